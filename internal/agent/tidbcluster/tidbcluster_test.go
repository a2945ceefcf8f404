package tidbcluster

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

func TestPDAddresses(t *testing.T) {
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n"}}
	if _, err := PDAddresses(tc); !errors.Is(err, ErrNoPD) || !strings.Contains(err.Error(), "spec.pdAddresses") || !strings.Contains(err.Error(), "spec.cluster") {
		t.Errorf("no PD: %v", err)
	}
	tc.Spec.Cluster = &pcv1alpha1.TidbClusterRef{Name: "main", ClusterDomain: "cluster1.com"}
	if got, _ := PDAddresses(tc); !slices.Equal(got, []string{"http://main-pd-peer.n.svc.cluster1.com:2379"}) {
		t.Errorf("spec.cluster: %v", got)
	}
	tc.Spec.PDAddresses = []string{" http://remote:2379 "}
	if got, _ := PDAddresses(tc); !slices.Equal(got, []string{"http://remote:2379"}) {
		t.Errorf("spec.pdAddresses: %v", got)
	}
	tc.Status.PD.Members = map[string]pcv1alpha1.PDMember{"a-pd-1": {ClientURL: "http://p1:2379"}, "a-pd-0": {ClientURL: "http://p0:2379"}, "x": {}}
	if got, _ := PDAddresses(tc); !slices.Equal(got, []string{"http://p0:2379", "http://p1:2379"}) {
		t.Errorf("own PD first, sorted: %v", got)
	}
}

// TestClusterRefPD: the PD of the TidbCluster spec.cluster joins, as tidb-operator addresses it.
func TestClusterRefPD(t *testing.T) {
	tls := &pcv1alpha1.TLSCluster{Enabled: true}
	for _, tc := range []struct {
		name string
		ref  *pcv1alpha1.TidbClusterRef
		tls  *pcv1alpha1.TLSCluster
		want string
	}{
		{"no reference", nil, nil, ""},
		{"a reference without a name", &pcv1alpha1.TidbClusterRef{Namespace: "other"}, nil, ""},
		{"same namespace by default", &pcv1alpha1.TidbClusterRef{Name: "main"}, nil, "http://main-pd.tidb:2379"},
		{"another namespace", &pcv1alpha1.TidbClusterRef{Name: "main", Namespace: "pingcap"}, nil, "http://main-pd.pingcap:2379"},
		{"another Kubernetes cluster: the peer service under its domain", &pcv1alpha1.TidbClusterRef{Name: "main", Namespace: "pingcap", ClusterDomain: "cluster1.com"}, nil,
			"http://main-pd-peer.pingcap.svc.cluster1.com:2379"},
		{"cluster TLS: https", &pcv1alpha1.TidbClusterRef{Name: "main", ClusterDomain: "cluster1.com"}, tls, "https://main-pd-peer.tidb.svc.cluster1.com:2379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "joins", Namespace: "tidb"},
				Spec: pcv1alpha1.TidbClusterSpec{Cluster: tc.ref, TLSCluster: tc.tls}}
			if got := ClusterRefPD(c); got != tc.want {
				t.Errorf("ClusterRefPD = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStores(t *testing.T) {
	tc := &pcv1alpha1.TidbCluster{Status: pcv1alpha1.TidbClusterStatus{TiKV: pcv1alpha1.TiKVStatus{Stores: map[string]pcv1alpha1.TiKVStore{
		"1": {ID: "1", PodName: "a-tikv-0", State: "Up"},
		"2": {ID: "2", PodName: "a-tikv-1", State: "Down"},
		"9": {ID: "9", PodName: "a-tikv-0", State: "Tombstone"},
	}}}}
	if n := StoresUp(tc); n != 1 {
		t.Errorf("up %d", n)
	}
	if m := StoreIDByPod(tc); m["a-tikv-0"] != "1" || m["a-tikv-1"] != "2" {
		t.Errorf("store ids %v", m)
	}
}

func TestEBSVolumeID(t *testing.T) {
	pv := func(src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src}}
	}
	for _, tt := range []struct {
		name string
		pv   *corev1.PersistentVolume
		id   string
		err  string
	}{
		{"csi", pv(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: EBSCSIDriver, VolumeHandle: "vol-1"}}), "vol-1", ""},
		{"in-tree with zone", pv(corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-west-2a/vol-2"}}), "vol-2", ""},
		{"in-tree bare", pv(corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-3"}}), "vol-3", ""},
		{"other csi", pv(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "efs.csi.aws.com", VolumeHandle: "fs-1"}}), "", "efs.csi.aws.com"},
		{"hostPath", pv(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}), "", "not an EBS volume"},
	} {
		id, err := EBSVolumeID(tt.pv)
		if id != tt.id || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %q %v", tt.name, id, err)
		}
	}
	for in, want := range map[string]string{"aws:///us-west-2a/i-0abc": "i-0abc", "gce://p/z/n": "", "aws:///us-west-2a/": ""} {
		got, err := InstanceID(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("InstanceID(%q) = %q, %v", in, got, err)
		}
	}
}

func TestTiKVVolumeNames(t *testing.T) {
	tikv := func(svs ...pcv1alpha1.StorageVolume) *pcv1alpha1.TidbCluster {
		return &pcv1alpha1.TidbCluster{Spec: pcv1alpha1.TidbClusterSpec{TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1, StorageVolumes: svs}}}
	}
	for _, tt := range []struct {
		name string
		tc   *pcv1alpha1.TidbCluster
		want []string
	}{
		{"no TiKV spec: the data volume", &pcv1alpha1.TidbCluster{}, []string{"tikv"}},
		{"data volume only", tikv(), []string{"tikv"}},
		{"storage volumes, sorted", tikv(pcv1alpha1.StorageVolume{Name: "wal"}, pcv1alpha1.StorageVolume{Name: "raft"}), []string{"tikv", "tikv-raft", "tikv-wal"}},
		{"an unnamed storage volume is the data volume", tikv(pcv1alpha1.StorageVolume{MountPath: "/var/lib/tikv"}), []string{"tikv"}},
		{"a name given twice is one volume", tikv(pcv1alpha1.StorageVolume{Name: "raft"}, pcv1alpha1.StorageVolume{Name: "raft"}), []string{"tikv", "tikv-raft"}},
	} {
		if got := TiKVVolumeNames(tt.tc); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTiKVPlacement(t *testing.T) {
	tol := func(key string) []corev1.Toleration {
		return []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	aff := func(zone string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}
	}
	tc := &pcv1alpha1.TidbCluster{Spec: pcv1alpha1.TidbClusterSpec{
		NodeSelector: map[string]string{"pool": "tidb", "disk": "gp3"}, Tolerations: tol("tidb"), Affinity: aff("a"),
	}}
	p := TiKVPlacement(tc)
	if !maps.Equal(p.NodeSelector, map[string]string{"pool": "tidb", "disk": "gp3"}) || p.Tolerations[0].Key != "tidb" || p.Affinity != tc.Spec.Affinity ||
		p.Resources.Requests != nil || p.Resources.Limits != nil {
		t.Errorf("no TiKV spec: the TidbCluster's placement, no resources: %+v", p)
	}

	tc.Spec.TiKV = &pcv1alpha1.ComponentSpec{
		NodeSelector: map[string]string{"pool": "tikv"}, Tolerations: tol("tikv"), Affinity: aff("b"),
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceStorage: resource.MustParse("1Ti")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")},
	}
	p = TiKVPlacement(tc)
	if !maps.Equal(p.NodeSelector, map[string]string{"pool": "tikv", "disk": "gp3"}) {
		t.Errorf("node selector %v: want the TidbCluster's with TiKV's keys over it", p.NodeSelector)
	}
	if p.Tolerations[0].Key != "tikv" || p.Affinity != tc.Spec.TiKV.Affinity {
		t.Errorf("TiKV's tolerations and affinity replace the TidbCluster's: %+v %+v", p.Tolerations, p.Affinity)
	}
	if _, storage := p.Resources.Requests[corev1.ResourceStorage]; storage || p.Resources.Requests.Cpu().String() != "4" || p.Resources.Limits.Memory().String() != "16Gi" {
		t.Errorf("resources %+v: want TiKV's cpu and memory, not its storage", p.Resources)
	}
	if tc.Spec.NodeSelector["pool"] != "tidb" {
		t.Errorf("the TidbCluster's node selector was changed: %v", tc.Spec.NodeSelector)
	}
}

func TestTiKVOrdinal(t *testing.T) {
	for _, c := range []struct {
		pod  string
		want int
		ok   bool
	}{
		{"basic-tikv-0", 0, true},
		{"basic-tikv-12", 12, true},
		{"basic-pd-0", 0, false},     // another component
		{"other-tikv-1", 0, false},   // another cluster
		{"basic-tikv-x", 0, false},   // not a number
		{"basic-tikv--1", 0, false},  // negative
		{"basic-tikv-1-a", 0, false}, // a suffix
	} {
		if got, ok := TiKVOrdinal(c.pod, "basic"); ok != c.ok || (ok && got != c.want) {
			t.Errorf("TiKVOrdinal(%q) = %d, %v; want %d, %v", c.pod, got, ok, c.want, c.ok)
		}
	}
}

// TestFailureStores: tidb-operator v1.6's status.tikv.failureStores (keyed by store id, with
// fields fedbr does not read) decodes into the stand-in, and the TiKV pods it keeps are
// spec.tikv.replicas plus one per failed-over store.
func TestFailureStores(t *testing.T) {
	status := `{"tikv":{"phase":"Normal","stores":{"1":{"id":"1","podName":"basic-tikv-0","ip":"a","leaderCount":3,"state":"Up"},
	  "4":{"id":"4","podName":"basic-tikv-3","ip":"d","leaderCount":1,"state":"Up"}},
	  "failureStores":{"10":{"podName":"basic-tikv-9","storeID":"10","pvcUIDSet":{"0f3e":{}},"hostDown":true,"storeDeleted":true,"createdAt":"2026-12-01T10:00:00Z"},
	  "2":{"podName":"basic-tikv-1","createdAt":"2026-12-01T09:00:00Z"}},
	  "failoverUID":"5a1b"}}`
	tc := &pcv1alpha1.TidbCluster{Spec: pcv1alpha1.TidbClusterSpec{TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3}}}
	if err := json.Unmarshal([]byte(status), &tc.Status); err != nil {
		t.Fatal(err)
	}
	got := FailureStores(tc)
	want := []pcv1alpha1.TiKVFailureStore{{PodName: "basic-tikv-1", StoreID: "2"}, {PodName: "basic-tikv-9", StoreID: "10", StoreDeleted: true}}
	if !slices.Equal(got, want) {
		t.Errorf("failure stores %+v, want %+v (by store id, numerically; the key as the id when the entry has none)", got, want)
	}
	if n := TiKVPods(tc); n != 5 {
		t.Errorf("TiKV pods %d, want spec.tikv.replicas 3 + 2 failed-over stores", n)
	}
	if n := TiKVPods(&pcv1alpha1.TidbCluster{}); n != 0 {
		t.Errorf("no TiKV: %d pods", n)
	}
}
