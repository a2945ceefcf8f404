package env

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/labdns"
	"github.com/fedbr/fedbr/internal/lab/operator"
)

// FederatedTidbClusters lays out one TiDB cluster over every data plane of l: a TidbCluster
// named name in namespace in each data-plane cluster, with tikvPerPlane TiKV each, the PD in
// the first data plane and the others joining it through spec.cluster with the first plane's
// cluster domain (spec.acrossK8s; each part's spec.clusterDomain is its plane's). Every part carries the same initial region layout: the stores
// interleaved across planes (store i of plane 1, of plane 2, …), so each region's three peers
// sit in three different planes when there are three, and the given split keys. The map is
// keyed by cluster. With raftVolume each TiKV has two volumes, as a TiKV with its raft log on a
// volume of its own (spec.tikv.storageVolumes "raft" at /var/lib/raft): data, and the log apart.
func FederatedTidbClusters(l *Lab, name, namespace string, tikvPerPlane int, raftVolume bool, splitKeys []string) map[string]*pcv1alpha1.TidbCluster {
	var initial []string
	for i := range tikvPerPlane {
		for _, d := range l.DataPlanes {
			initial = append(initial, strconv.FormatUint(d.StoreIDBase+uint64(i)+1, 10))
		}
	}
	out := map[string]*pcv1alpha1.TidbCluster{}
	for i, d := range l.DataPlanes {
		ann := map[string]string{operator.AnnotationInitialStores: strings.Join(initial, ",")}
		if len(splitKeys) > 0 {
			ann[operator.AnnotationSplitKeys] = strings.Join(splitKeys, ",")
		}
		storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		tc := &pcv1alpha1.TidbCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: pcv1alpha1.GroupVersion.String(), Kind: "TidbCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: ann},
			Spec: pcv1alpha1.TidbClusterSpec{
				// As a real TidbCluster names its release: the doubles speak PD v8.5's API.
				Version:       LabTiDBVersion,
				AcrossK8s:     true,
				ClusterDomain: labdns.Domain(d.Cluster),
				PD:            &pcv1alpha1.ComponentSpec{Replicas: 1, StorageClassName: ptr.To(l.StorageClass), Requests: storage},
				TiKV:          &pcv1alpha1.ComponentSpec{Replicas: int32(tikvPerPlane), StorageClassName: ptr.To(l.StorageClass), Requests: storage},
			},
		}
		if raftVolume {
			tc.Spec.TiKV.StorageVolumes = []pcv1alpha1.StorageVolume{{Name: "raft", StorageSize: "1Gi", MountPath: "/var/lib/raft"}}
		}
		if i > 0 {
			// As tidb-operator joins clusters across Kubernetes clusters: spec.cluster names the
			// first plane's TidbCluster with that plane's domain, whose PD Service name the
			// lab's cluster DNS resolves (labdns).
			tc.Spec.PD = &pcv1alpha1.ComponentSpec{Replicas: 0}
			tc.Spec.Cluster = &pcv1alpha1.TidbClusterRef{Name: name, Namespace: namespace, ClusterDomain: labdns.Domain(l.DataPlanes[0].Cluster)}
		}
		out[d.Cluster] = tc
	}
	return out
}

// LabTiDBVersion is the release the lab's TidbClusters name (spec.version).
const LabTiDBVersion = "v8.5.0"
