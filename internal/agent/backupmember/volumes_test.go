package backupmember

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
)

func TestDiscover(t *testing.T) {
	rec, err := Discover(*cluster(), "az1", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	s := rec.TiKV.Stores[0]
	if s.ID != 1 || s.InstanceID != "i-0abc" || len(s.Volumes) != 1 || s.Volumes[0].ID != "vol-1" || s.Volumes[0].Type != meta.DataDirType ||
		s.Volumes[0].MountPath != "/var/lib/tikv" || rec.Fedbr.BackupID != "uid-1" || rec.Fedbr.Cluster != "az1" || rec.TiKV.Replicas != 1 {
		t.Errorf("record %+v store %+v", rec, s)
	}
	if len(rec.Kubernetes.PVs) != 1 || len(rec.Kubernetes.PVCs) != 1 || !strings.Contains(string(rec.Kubernetes.TidbCluster), `"basic"`) {
		t.Errorf("kubernetes section %+v", rec.Kubernetes)
	}
	if strings.Contains(string(rec.Kubernetes.PVs[0]), "managedFields") {
		t.Error("server bookkeeping kept")
	}
}

func TestDiscoverFailures(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  func(*Cluster)
		want string
	}{
		{"in-tree EBS works", func(c *Cluster) {
			c.PVs["pv-1"].Spec.CSI = nil
			c.PVs["pv-1"].Spec.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-west-2a/vol-9"}
		}, ""},
		{"store not published yet", func(c *Cluster) { c.TC.Status.TiKV.Stores = nil }, "no store in the TidbCluster's status"},
		{"claim not bound", func(c *Cluster) { c.PVCs["tikv-basic-tikv-0"].Status.Phase = corev1.ClaimPending }, "not bound"},
		{"claim missing", func(c *Cluster) { delete(c.PVCs, "tikv-basic-tikv-0") }, "claim tikv-basic-tikv-0 not found"},
		{"not an AWS node", func(c *Cluster) { c.Nodes["n1"].Spec.ProviderID = "kind://docker/kind/n1" }, "not an AWS instance"},
		{"pod not scheduled", func(c *Cluster) { c.Pods[0].Spec.NodeName = "" }, "not on a known node"},
		{"no TiKV", func(c *Cluster) { c.TC.Spec.TiKV.Replicas = 0 }, "has no TiKV"},
		{"terminating pod does not count", func(c *Cluster) { c.Pods[0].DeletionTimestamp = &c.TC.CreationTimestamp }, "0 are running"},
	} {
		c := cluster()
		tt.mut(c)
		_, err := Discover(*c, "az1", "uid-1")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// tikvCluster is a TidbCluster whose TiKV runs pods basic-tikv-0 … basic-tikv-<n-1>, each on
// its own node and EBS volume, as stores 1 … n (all Up), with spec.tikv.replicas n.
func tikvCluster(n int) *Cluster {
	c := cluster()
	c.TC.Spec.TiKV.Replicas = int32(n)
	c.Pods = nil
	c.TC.Status.TiKV.Stores = map[string]pcv1alpha1.TiKVStore{}
	for i := range n {
		pod, claim, pv, node := fmt.Sprintf("basic-tikv-%d", i), fmt.Sprintf("tikv-basic-tikv-%d", i), fmt.Sprintf("pv-%d", i), fmt.Sprintf("n%d", i)
		id := strconv.Itoa(i + 1)
		c.TC.Status.TiKV.Stores[id] = pcv1alpha1.TiKVStore{ID: id, PodName: pod, State: tidbcluster.StoreUp}
		c.Pods = append(c.Pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "tidb"},
			Spec: corev1.PodSpec{NodeName: node,
				Containers: []corev1.Container{{Name: "tikv", VolumeMounts: []corev1.VolumeMount{{Name: "tikv", MountPath: "/var/lib/tikv"}}}},
				Volumes:    []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
		})
		c.PVCs[claim] = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "tidb"},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		}
		c.PVs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: fmt.Sprintf("vol-%d", i+1)}}}}
		c.Nodes[node] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///us-west-2a/i-%d", i+1)}}
	}
	return c
}

// failedOver marks store id (pod basic-tikv-<id-1>) as failed over, as tidb-operator does
// once it was Down for its failover period.
func failedOver(c *Cluster, id int) {
	if c.TC.Status.TiKV.FailureStores == nil {
		c.TC.Status.TiKV.FailureStores = map[string]pcv1alpha1.TiKVFailureStore{}
	}
	s := strconv.Itoa(id)
	c.TC.Status.TiKV.FailureStores[s] = pcv1alpha1.TiKVFailureStore{PodName: fmt.Sprintf("basic-tikv-%d", id-1), StoreID: s}
}

// dropPod removes pod name from the cluster (it is gone, or terminating when terminating).
func dropPod(c *Cluster, name string, terminating bool) {
	for i := range c.Pods {
		if c.Pods[i].Name != name {
			continue
		}
		if terminating {
			c.Pods[i].DeletionTimestamp = &c.TC.CreationTimestamp
			return
		}
		c.Pods = slices.Delete(c.Pods, i, i+1)
		return
	}
}

// TestDiscoverTiKVShapes: Discover backs up every TiKV pod tidb-operator keeps, which is
// spec.tikv.replicas plus one pod per failed-over store (status.tikv.failureStores, as its
// StatefulSet's desired replicas), and refuses a cluster whose pods are not that set yet,
// saying why.
func TestDiscoverTiKVShapes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		c      func() *Cluster
		stores []uint64 // backed up; nil when refused
		want   []string // the refusal says all of these
	}{
		{"settled", func() *Cluster { return tikvCluster(3) }, []uint64{1, 2, 3}, nil},
		{"3 replicas and a failed-over store: the operator's 4th pod is backed up too", func() *Cluster {
			c := tikvCluster(4)
			c.TC.Spec.TiKV.Replicas = 3
			failedOver(c, 2) // store 2 was Down; tikv-3 was added for it, and store 2 came back
			return c
		}, []uint64{1, 2, 3, 4}, nil},
		{"a failed-over store whose pod is gone", func() *Cluster {
			c := tikvCluster(4)
			c.TC.Spec.TiKV.Replicas = 3
			failedOver(c, 2)
			dropPod(c, "basic-tikv-1", false)
			return c
		}, nil, []string{"wants 4 TiKV pods (spec.tikv.replicas 3 and 1 failed-over store in status.tikv.failureStores) and 3 are running",
			"store 2 failed over and its pod basic-tikv-1 is not running"}},
		{"a failed-over store whose pod is terminating", func() *Cluster {
			c := tikvCluster(4)
			c.TC.Spec.TiKV.Replicas = 3
			failedOver(c, 2)
			dropPod(c, "basic-tikv-1", true)
			return c
		}, nil, []string{"and 3 are running", "store 2 failed over and its pod basic-tikv-1 is not running"}},
		{"scaling out", func() *Cluster {
			c := tikvCluster(3)
			c.TC.Spec.TiKV.Replicas = 4
			return c
		}, nil, []string{"wants 4 TiKV pods (spec.tikv.replicas) and 3 are running", "back up a settled cluster"}},
		{"scaling in", func() *Cluster {
			c := tikvCluster(4)
			c.TC.Spec.TiKV.Replicas = 3
			return c
		}, nil, []string{"wants 3 TiKV pods (spec.tikv.replicas) and 4 are running", "back up a settled cluster"}},
		{"failover recovered: the extra pod is on its way out", func() *Cluster {
			c := tikvCluster(4) // recoverFailover cleared status.tikv.failureStores; tikv-3 is scaled in
			c.TC.Spec.TiKV.Replicas = 3
			return c
		}, nil, []string{"wants 3 TiKV pods (spec.tikv.replicas) and 4 are running"}},
	} {
		rec, err := Discover(*tt.c(), "az1", "uid-1")
		if tt.want != nil {
			if err == nil {
				t.Errorf("%s: backed up %+v, want a refusal", tt.name, rec.TiKV.Stores)
				continue
			}
			if !errors.Is(err, ErrVolumeDiscovery) {
				t.Errorf("%s: %v is not ErrVolumeDiscovery", tt.name, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tt.name, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var got []uint64
		for _, s := range rec.TiKV.Stores {
			got = append(got, s.ID)
		}
		if !slices.Equal(got, tt.stores) || rec.TiKV.Replicas != len(tt.stores) || len(rec.Kubernetes.PVCs) != len(tt.stores) || len(rec.Kubernetes.PVs) != len(tt.stores) {
			t.Errorf("%s: stores %v, tikv.replicas %d, %d claims, %d PVs; want stores %v and as many of each",
				tt.name, got, rec.TiKV.Replicas, len(rec.Kubernetes.PVCs), len(rec.Kubernetes.PVs), tt.stores)
		}
	}
}

// TestDiscoverAnnotatesPVsWithTheirVolume: each PV the clustermeta records carries
// temporary/volume-id=<its EBS volume id>, the annotation upstream tidb-operator's restore
// finds a backed-up volume's PV by (pkg/backup/snapshotter/snapshotter.go,
// ProcessCSBPVCsAndPVs; it fails "pv with volume id … not found" without it), and the PV the
// agent read is left as it was.
func TestDiscoverAnnotatesPVsWithTheirVolume(t *testing.T) {
	c := cluster()
	c.PVs["pv-1"].Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": tidbcluster.EBSCSIDriver}
	rec, err := Discover(*c, "az1", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := json.Unmarshal(rec.Kubernetes.PVs[0], &pv); err != nil {
		t.Fatal(err)
	}
	if got := pv.Annotations[meta.AnnotationVolumeID]; got != "vol-1" {
		t.Errorf("recorded PV annotation %s = %q, want vol-1 (annotations %v)", meta.AnnotationVolumeID, got, pv.Annotations)
	}
	if got := pv.Annotations["pv.kubernetes.io/provisioned-by"]; got != tidbcluster.EBSCSIDriver {
		t.Errorf("recorded PV lost its own annotations: %v", pv.Annotations)
	}
	if _, ok := c.PVs["pv-1"].Annotations[meta.AnnotationVolumeID]; ok {
		t.Error("Discover annotated the PV object it was given")
	}
}

// TestDiscoverTypesStorageVolumesByTiKVConfigKey: a storage volume's type is the TiKV config
// key whose value is its mount path (raft-engine.dir, rocksdb.wal-dir), as upstream's backup
// defines it (pkg/backup/snapshotter/snapshotter.go, collectVolumesInfo), whether
// spec.tikv.config is a TOML string or a map; "" when no key holds the path; the data volume
// stays storage.data-dir. A config that is neither is refused, naming the field.
func TestDiscoverTypesStorageVolumesByTiKVConfigKey(t *testing.T) {
	withVolumes := func(config string) *Cluster {
		c := cluster()
		c.TC.Spec.TiKV.StorageVolumes = []pcv1alpha1.StorageVolume{{Name: "raft", MountPath: "/var/lib/raft"}, {Name: "wal", MountPath: "/var/lib/wal"}}
		if config != "" {
			c.TC.Spec.TiKV.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
		}
		pod := &c.Pods[0]
		for i, name := range []string{"raft", "wal"} {
			vol, claim, pv := "tikv-"+name, "tikv-"+name+"-basic-tikv-0", "pv-"+name
			pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/var/lib/" + name})
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			c.PVCs[claim] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "tidb"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
			c.PVs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: fmt.Sprintf("vol-%d", i+2)}}}}
		}
		return c
	}
	toml := strconv.Quote("[raft-engine]\ndir = \"/var/lib/raft\"\n[rocksdb]\nwal-dir = \"/var/lib/wal\"\n")
	for _, tt := range []struct {
		name, config string
		want         map[string]string // mount path → type
		err          string
	}{
		{"TOML string", toml, map[string]string{"/var/lib/tikv": meta.DataDirType, "/var/lib/raft": "raft-engine.dir", "/var/lib/wal": "rocksdb.wal-dir"}, ""},
		{"map", `{"raft-engine":{"dir":"/var/lib/raft"},"rocksdb":{"wal-dir":"/var/lib/wal"}}`,
			map[string]string{"/var/lib/tikv": meta.DataDirType, "/var/lib/raft": "raft-engine.dir", "/var/lib/wal": "rocksdb.wal-dir"}, ""},
		{"no key holds the WAL's path", strconv.Quote("[raft-engine]\ndir = \"/var/lib/raft\"\n"),
			map[string]string{"/var/lib/tikv": meta.DataDirType, "/var/lib/raft": "raft-engine.dir", "/var/lib/wal": ""}, ""},
		{"no config", "", map[string]string{"/var/lib/tikv": meta.DataDirType, "/var/lib/raft": "", "/var/lib/wal": ""}, ""},
		{"config neither TOML nor a map", `42`, nil, "spec.tikv.config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Discover(*withVolumes(tt.config), "az1", "uid-1")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range rec.TiKV.Stores[0].Volumes {
				got[v.MountPath] = v.Type
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("types by mount path %v, want %v", got, tt.want)
			}
		})
	}
}

// TestManifestKeepsFailureStores: the saved TidbCluster manifest drops status but its
// status.tikv.failureStores, which a restore made from it needs (restore create
// --with-tidbclusters sizes the restored TiKV from it); without failed-over stores, no status.
func TestManifestKeepsFailureStores(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status map[string]any
		want   map[string]any
	}{
		{"failed-over stores", map[string]any{"tikv": map[string]any{"phase": "Normal", "stores": map[string]any{"1": map[string]any{}},
			"failureStores": map[string]any{"4": map[string]any{"podName": "basic-tikv-1", "storeID": "4"}}}, "pd": map[string]any{}},
			map[string]any{"tikv": map[string]any{"failureStores": map[string]any{"4": map[string]any{"podName": "basic-tikv-1", "storeID": "4"}}}}},
		{"none", map[string]any{"tikv": map[string]any{"phase": "Normal"}}, nil},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster",
			"metadata": map[string]any{"name": "basic", "namespace": "tidb"}, "spec": map[string]any{"tikv": map[string]any{"replicas": int64(1)}},
			"status": tc.status}}
		raw, err := tidbClusterManifest(Cluster{TC: &pcv1alpha1.TidbCluster{}, Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		st, _ := got["status"].(map[string]any)
		if !reflect.DeepEqual(st, tc.want) {
			t.Errorf("%s: status %v, want %v", tc.name, st, tc.want)
		}
	}
}
