package operator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/podsecurity"
)

var testConfig = Config{Addressing: Addressing{IPPrefix: "127.0.1"}, Image: "fedbr"}

type tcOpt func(*pcv1alpha1.TidbCluster)

func recovery(tc *pcv1alpha1.TidbCluster) { tc.Spec.RecoveryMode = true }
func volumesReady(tc *pcv1alpha1.TidbCluster) {
	annotate(tc, pcv1alpha1.TiKVVolumesReadyAnnotation, "ns/restore")
}
func annotate(tc *pcv1alpha1.TidbCluster, k, v string) {
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[k] = v
}
func downTiKV(v string) tcOpt {
	return func(tc *pcv1alpha1.TidbCluster) { annotate(tc, AnnotationDownTiKV, v) }
}
func deleting(tc *pcv1alpha1.TidbCluster) {
	tc.DeletionTimestamp = &metav1.Time{}
	tc.Finalizers = []string{"x"}
}
func tikvReplicas(n int32) tcOpt {
	return func(tc *pcv1alpha1.TidbCluster) { tc.Spec.TiKV.Replicas = n }
}
func raftVolume(tc *pcv1alpha1.TidbCluster) {
	tc.Spec.TiKV.StorageVolumes = []pcv1alpha1.StorageVolume{{Name: "raft", StorageSize: "512Mi", MountPath: "/var/lib/raft"}}
}
func pdReplicas(n int32) tcOpt { return func(tc *pcv1alpha1.TidbCluster) { tc.Spec.PD.Replicas = n } }

func newTC(opts ...tcOpt) *pcv1alpha1.TidbCluster {
	tc := &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb", UID: "uid-tc"},
		Spec: pcv1alpha1.TidbClusterSpec{
			PD: &pcv1alpha1.ComponentSpec{Replicas: 1},
			TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3, StorageClassName: ptr.To("lab-ebs"),
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
	for _, o := range opts {
		o(tc)
	}
	return tc
}

// world is an observation: the listed pods exist (suffix "!" = being deleted, "*" = created in
// recovery mode), every existing pod has its claim, the Service exists when any pod does.
func world(tc *pcv1alpha1.TidbCluster, pdHealthy bool, pods ...string) Observed {
	o := Observed{Cluster: tc, Pods: map[string]PodState{}, PVCs: map[string]bool{}, Service: len(pods) > 0,
		PD: PDState{Healthy: pdHealthy}}
	for _, p := range pods {
		st := PodState{}
		for len(p) > 0 && (p[len(p)-1] == '!' || p[len(p)-1] == '*') {
			if p[len(p)-1] == '!' {
				st.Deleting = true
			} else {
				st.RecoveryMode = true
			}
			p = p[:len(p)-1]
		}
		name := "basic-" + p
		st.UID = types.UID("uid-basic-" + p)
		o.Pods[name] = st
		comp := ComponentPD
		if ordinal("basic", ComponentTiKV, name) >= 0 {
			comp = ComponentTiKV
		}
		o.PVCs[comp+"-"+name] = true
	}
	return o
}

// withTiKVClaims adds the claims of TiKV ordinals 0..n-1 (made by the restore, or left by a
// deleted pod).
func withTiKVClaims(o Observed, n int) Observed {
	for i := range n {
		o.PVCs[PVCName("basic", ComponentTiKV, i)] = true
	}
	return o
}

func actionNames(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, a.String())
	}
	return out
}

// failedOver marks the stores failed over in tc's status.tikv.failureStores, as tidb-operator
// does once a store was Down for its failover period.
func failedOver(tc *pcv1alpha1.TidbCluster, stores ...string) *pcv1alpha1.TidbCluster {
	tc.Status.TiKV.FailureStores = map[string]pcv1alpha1.TiKVFailureStore{}
	for i, s := range stores {
		tc.Status.TiKV.FailureStores[s] = pcv1alpha1.TiKVFailureStore{PodName: MemberName(tc.Name, ComponentTiKV, i), StoreID: s}
	}
	return tc
}

func TestComputePlan(t *testing.T) {
	tests := []struct {
		name string
		obs  Observed
		want []string
		wait Wait
	}{
		{
			name: "normal start creates Service and PD; TiKV waits for PD",
			obs:  world(newTC(), false),
			want: []string{"CreateService basic-pd", "CreatePVC pd-basic-pd-0", "CreatePod basic-pd-0"},
			wait: WaitPD,
		},
		{
			name: "PD not ready keeps TiKV waiting",
			obs:  world(newTC(), false, "pd-0"),
			want: nil,
			wait: WaitPD,
		},
		{
			name: "PD ready starts every TiKV with its claim",
			obs:  world(newTC(), true, "pd-0"),
			want: []string{"CreatePVC tikv-basic-tikv-0", "CreatePod basic-tikv-0", "CreatePVC tikv-basic-tikv-1",
				"CreatePod basic-tikv-1", "CreatePVC tikv-basic-tikv-2", "CreatePod basic-tikv-2"},
		},
		{
			name: "a storage volume gets its own claim, named as tidb-operator names it",
			obs:  world(newTC(tikvReplicas(1), raftVolume), true, "pd-0"),
			want: []string{"CreatePVC tikv-basic-tikv-0", "CreatePVC tikv-raft-basic-tikv-0", "CreatePod basic-tikv-0"},
		},
		{
			name: "steady state does nothing",
			obs:  world(newTC(), true, "pd-0", "tikv-0", "tikv-1", "tikv-2"),
		},
		{
			name: "scale out adds the next ordinal",
			obs:  world(newTC(tikvReplicas(4)), true, "pd-0", "tikv-0", "tikv-1", "tikv-2"),
			want: []string{"CreatePVC tikv-basic-tikv-3", "CreatePod basic-tikv-3"},
		},
		{
			name: "a failed-over store adds a pod past spec.tikv.replicas, as tidb-operator's StatefulSet does",
			obs:  world(failedOver(newTC(), "4"), true, "pd-0", "tikv-0", "tikv-1", "tikv-2"),
			want: []string{"CreatePVC tikv-basic-tikv-3", "CreatePod basic-tikv-3"},
		},
		{
			name: "the failover pod is kept while the store stays failed over",
			obs:  world(failedOver(newTC(), "4"), true, "pd-0", "tikv-0", "tikv-1", "tikv-2", "tikv-3"),
		},
		{
			name: "scale in deletes the highest ordinals and keeps their claims",
			obs:  world(newTC(tikvReplicas(1)), true, "pd-0", "tikv-0", "tikv-1", "tikv-2"),
			want: []string{"DeletePod basic-tikv-1", "DeletePod basic-tikv-2"},
		},
		{
			name: "a lost pod is recreated on its existing claim",
			obs:  withTiKVClaims(world(newTC(), true, "pd-0", "tikv-0", "tikv-2"), 3),
			want: []string{"CreatePod basic-tikv-1"},
		},
		{
			name: "recovery mode starts PD but no TiKV and no TiKV claim before volumes are ready",
			obs:  world(newTC(recovery), true, "pd-0"),
			want: nil,
			wait: WaitVolumesReady,
		},
		{
			name: "recovery mode on a fresh cluster creates PD first",
			obs:  world(newTC(recovery), false),
			want: []string{"CreateService basic-pd", "CreatePVC pd-basic-pd-0", "CreatePod basic-pd-0"},
			wait: WaitVolumesReady,
		},
		{
			name: "annotation arrival starts TiKV on the restore's claims",
			obs:  withTiKVClaims(world(newTC(recovery, volumesReady), true, "pd-0"), 3),
			want: []string{"CreatePod basic-tikv-0", "CreatePod basic-tikv-1", "CreatePod basic-tikv-2"},
		},
		{
			name: "a TiKV whose node is lost (down-tikv) never starts, in recovery mode or not",
			obs:  withTiKVClaims(world(newTC(recovery, volumesReady, downTiKV("1")), true, "pd-0"), 3),
			want: []string{"CreatePod basic-tikv-0", "CreatePod basic-tikv-2"},
		},
		{
			name: "a lost node's TiKV is not recreated",
			obs:  withTiKVClaims(world(newTC(downTiKV("0,2")), true, "pd-0", "tikv-1"), 3),
		},
		{
			name: "annotation arrival with PD not ready waits for PD",
			obs:  world(newTC(recovery, volumesReady), false, "pd-0"),
			wait: WaitPD,
		},
		{
			name: "recovery mode steady state keeps recovery pods",
			obs:  world(newTC(recovery, volumesReady), true, "pd-0", "tikv-0*", "tikv-1*", "tikv-2*"),
		},
		{
			// tidb-operator leaves the restart to the restore's controller, which deletes
			// the pods; restarting here too made TiKV restart twice.
			name: "recoveryMode cleared restarts nothing by itself",
			obs:  world(newTC(), true, "pd-0", "tikv-0*", "tikv-1*", "tikv-2*"),
		},
		{
			name: "restore-finish waits for terminating pods",
			obs:  world(newTC(), true, "pd-0", "tikv-0*!", "tikv-1*!", "tikv-2"),
			wait: WaitPodsGone,
		},
		{
			name: "restore-finish recreates the deleted pods in normal mode",
			obs:  withTiKVClaims(world(newTC(), true, "pd-0", "tikv-2"), 3),
			want: []string{"CreatePod basic-tikv-0", "CreatePod basic-tikv-1"},
		},
		{
			name: "deletion does nothing; owner references clean up",
			obs:  world(newTC(deleting), true, "pd-0", "tikv-0"),
		},
		{
			name: "foreign pods with similar names are ignored",
			obs: func() Observed {
				o := world(newTC(), true, "pd-0", "tikv-0", "tikv-1", "tikv-2")
				o.Pods["basic-tikv-x"] = PodState{}
				o.Pods["basic-tikv-01"] = PodState{}
				return o
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ComputePlan(testConfig, tt.obs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, actionNames(got)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if got.Wait != tt.wait {
				t.Errorf("wait = %q, want %q", got.Wait, tt.wait)
			}
		})
	}
}

func TestComputePlanInvalid(t *testing.T) {
	for name, tc := range map[string]*pcv1alpha1.TidbCluster{
		"no PD":         func() *pcv1alpha1.TidbCluster { tc := newTC(); tc.Spec.PD = nil; return tc }(),
		"three PD":      newTC(pdReplicas(3)),
		"too many TiKV": newTC(tikvReplicas(101)),
		"bad base port annotation": func() *pcv1alpha1.TidbCluster {
			tc := newTC()
			tc.Annotations = map[string]string{AnnotationBasePort: "x"}
			return tc
		}(),
		"bad down-tikv annotation": newTC(downTiKV("one")),
		"zero storage": func() *pcv1alpha1.TidbCluster {
			tc := newTC()
			tc.Spec.TiKV.Requests[corev1.ResourceStorage] = resource.MustParse("0")
			return tc
		}(),
		"storage volume without storageSize": func() *pcv1alpha1.TidbCluster {
			tc := newTC(raftVolume)
			tc.Spec.TiKV.StorageVolumes[0].StorageSize = ""
			return tc
		}(),
		"storage volume with a bad storageSize": func() *pcv1alpha1.TidbCluster {
			tc := newTC(raftVolume)
			tc.Spec.TiKV.StorageVolumes[0].StorageSize = "ten gigs"
			return tc
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ComputePlan(testConfig, world(tc, true))
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
		})
	}
}

func TestComputePlanObjects(t *testing.T) {
	p, err := ComputePlan(testConfig, world(newTC(recovery, volumesReady), true, "pd-0"))
	if err != nil {
		t.Fatal(err)
	}
	var tikv1 *corev1.Pod
	var claim1 *corev1.PersistentVolumeClaim
	for _, a := range p.Actions {
		if a.Pod != nil && a.Pod.Name == "basic-tikv-1" {
			tikv1 = a.Pod
		}
		if a.PVC != nil && a.PVC.Name == "tikv-basic-tikv-1" {
			claim1 = a.PVC
		}
	}
	if tikv1 == nil || claim1 == nil {
		t.Fatalf("no pod or claim for tikv-1 in %v", actionNames(p))
	}
	wantArgs := []string{"lab", "tikv", "--store-id", "2", "--data-dir", "var/lib/tikv", "--pd", "127.0.1.10:2379",
		"--listen", "127.0.1.101:20160", "--advertise-addr", "127.0.1.101:20160", "--initial-stores", "1,2,3"}
	if diff := cmp.Diff(wantArgs, tikv1.Spec.Containers[0].Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if got := tikv1.Annotations[AnnotationRecoveryMode]; got != "true" {
		t.Errorf("recovery annotation = %q", got)
	}
	if got := tikv1.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; got != "tikv-basic-tikv-1" {
		t.Errorf("claim = %q", got)
	}
	if o := tikv1.OwnerReferences; len(o) != 1 || o[0].UID != "uid-tc" || !*o[0].Controller {
		t.Errorf("owner references = %+v", o)
	}
	if got := *claim1.Spec.StorageClassName; got != "lab-ebs" {
		t.Errorf("storage class = %q", got)
	}
	if got := claim1.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "2Gi" {
		t.Errorf("size = %s", got.String())
	}
	if len(claim1.OwnerReferences) != 0 {
		t.Errorf("claims must outlive the TidbCluster, got owners %+v", claim1.OwnerReferences)
	}
	// The lab's tenant namespaces enforce the restricted Pod Security Standard.
	for _, a := range p.Actions {
		if a.Pod != nil {
			if err := podsecurity.Check(psaapi.LevelRestricted, &a.Pod.ObjectMeta, &a.Pod.Spec); err != nil {
				t.Errorf("pod %s: %v", a.Pod.Name, err)
			}
		}
	}
}

func TestComputePlanStatus(t *testing.T) {
	o := world(newTC(), true, "pd-0", "tikv-0", "tikv-1", "tikv-2")
	o.PD.Members = []PDMemberState{{Name: "basic-pd-0", ID: 7, ClientURL: "http://127.0.1.10:2379", Healthy: true}}
	o.PD.Stores = []StoreState{
		{ID: 1, Address: "127.0.1.100:20160", State: "Up"},
		{ID: 2, Address: "127.0.1.101:20160", State: "Up"},
		{ID: 3, Address: "127.0.1.102:20160", State: "Disconnected"},
		{ID: 9, Address: "127.0.2.100:20160", State: "Up"}, // another lab cluster's store
	}
	p, err := ComputePlan(testConfig, o)
	if err != nil {
		t.Fatal(err)
	}
	want := pcv1alpha1.TidbClusterStatus{
		PD: pcv1alpha1.PDStatus{Members: map[string]pcv1alpha1.PDMember{
			"basic-pd-0": {Name: "basic-pd-0", ID: "7", ClientURL: "http://127.0.1.10:2379", Health: true}}},
		TiKV: pcv1alpha1.TiKVStatus{Phase: "Normal", Stores: map[string]pcv1alpha1.TiKVStore{
			"1": {ID: "1", PodName: "basic-tikv-0", IP: "127.0.1.100", State: "Up"},
			"2": {ID: "2", PodName: "basic-tikv-1", IP: "127.0.1.101", State: "Up"},
			"3": {ID: "3", PodName: "basic-tikv-2", IP: "127.0.1.102", State: "Disconnected"},
		}},
	}
	if diff := cmp.Diff(want, p.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	// PD unreachable: keep the members' addresses, marked unhealthy.
	o.Cluster.Status = p.Status
	o.PD = PDState{}
	p, err = ComputePlan(testConfig, o)
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Status.PD.Members["basic-pd-0"]; m.Health || m.ClientURL != "http://127.0.1.10:2379" {
		t.Errorf("member while PD is down = %+v", m)
	}
}

func TestAddressing(t *testing.T) {
	ip := Addressing{IPPrefix: "127.0.3", StoreIDBase: 300}
	port := Addressing{BasePort: 31000}
	got := []string{ip.PD(0), ip.TiKV(0), ip.TiKV(2), port.PD(0), port.TiKV(0), port.TiKV(2)}
	want := []string{"127.0.3.10:2379", "127.0.3.100:20160", "127.0.3.102:20160",
		"127.0.0.1:31000", "127.0.0.1:31100", "127.0.0.1:31102"}
	if !slices.Equal(got, want) {
		t.Errorf("addresses = %v, want %v", got, want)
	}
	if ip.StoreID(2) != 303 {
		t.Errorf("store id = %d", ip.StoreID(2))
	}
	if got, err := port.For(map[string]string{AnnotationIPPrefix: "127.0.9"}); err != nil || got.PD(0) != "127.0.9.10:2379" {
		t.Errorf("ip prefix annotation: %v, %v", got.PD(0), err)
	}
	if got, err := ip.For(map[string]string{AnnotationBasePort: "40000"}); err != nil || got.TiKV(1) != "127.0.0.1:40101" {
		t.Errorf("base port annotation: %v, %v", got.TiKV(1), err)
	}
	for _, a := range []Addressing{{IPPrefix: "10.0.0"}, {IPPrefix: "127.0"}, {}, {BasePort: 65500}} {
		if a.Validate() == nil {
			t.Errorf("%+v: want an error", a)
		}
	}
	for _, a := range []Addressing{ip, port} {
		if err := a.Validate(); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
}

func TestComputePlanAddressAnnotations(t *testing.T) {
	tc := newTC()
	tc.Annotations = map[string]string{AnnotationIPPrefix: "127.0.7", AnnotationStoreIDBase: "700"}
	p, err := ComputePlan(testConfig, world(tc, true, "pd-0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Pod != nil && a.Pod.Name == "basic-tikv-0" {
			want := []string{"lab", "tikv", "--store-id", "701", "--data-dir", "var/lib/tikv", "--pd", "127.0.7.10:2379",
				"--listen", "127.0.7.100:20160", "--advertise-addr", "127.0.7.100:20160", "--initial-stores", "701,702,703"}
			if diff := cmp.Diff(want, a.Pod.Spec.Containers[0].Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			return
		}
	}
	t.Fatalf("no tikv-0 in %v", actionNames(p))
}

func TestRefreshInterval(t *testing.T) {
	stores := func(states ...string) pcv1alpha1.TidbClusterStatus {
		st := pcv1alpha1.TidbClusterStatus{TiKV: pcv1alpha1.TiKVStatus{Stores: map[string]pcv1alpha1.TiKVStore{}}}
		for i, s := range states {
			id := string(rune('1' + i))
			st.TiKV.Stores[id] = pcv1alpha1.TiKVStore{ID: id, State: s}
		}
		return st
	}
	for _, tt := range []struct {
		name string
		tc   *pcv1alpha1.TidbCluster
		st   pcv1alpha1.TidbClusterStatus
		want time.Duration
	}{
		{"every store up: the slow refresh", newTC(), stores("Up", "Up", "Up"), statusRefreshInterval},
		{"a store not up yet: the fast one", newTC(), stores("Up", "Disconnected", "Up"), storesSettleInterval},
		{"stores missing: the fast one", newTC(), stores("Up"), storesSettleInterval},
		{"no TiKV: the slow one", newTC(tikvReplicas(0)), stores(), statusRefreshInterval},
	} {
		if got := refreshInterval(tt.tc, tt.st); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStorageVolumeIsTheRaftVolume: a TiKV with a storage volume mounts it where the spec says
// and keeps its log there; its claim asks for the entry's storageSize, the data claim for
// spec.tikv.requests.storage.
func TestStorageVolumeIsTheRaftVolume(t *testing.T) {
	p, err := ComputePlan(testConfig, world(newTC(tikvReplicas(1), raftVolume), true, "pd-0"))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]string{}
	for _, a := range p.Actions {
		if a.PVC != nil {
			q := a.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
			sizes[a.PVC.Name] = q.String()
		}
	}
	if want := map[string]string{"tikv-basic-tikv-0": "2Gi", "tikv-raft-basic-tikv-0": "512Mi"}; !maps.Equal(sizes, want) {
		t.Errorf("claim sizes %v, want %v", sizes, want)
	}
	for _, a := range p.Actions {
		if a.Pod == nil {
			continue
		}
		ps := a.Pod.Spec
		if len(ps.Volumes) != 2 || ps.Volumes[1].Name != "tikv-raft" || ps.Volumes[1].PersistentVolumeClaim.ClaimName != "tikv-raft-basic-tikv-0" {
			t.Fatalf("volumes %+v", ps.Volumes)
		}
		c := ps.Containers[0]
		if len(c.VolumeMounts) != 2 || c.VolumeMounts[1].MountPath != "/var/lib/raft" {
			t.Fatalf("mounts %+v", c.VolumeMounts)
		}
		if !strings.Contains(strings.Join(c.Args, " "), "--raft-dir var/lib/raft") {
			t.Fatalf("args %v", c.Args)
		}
		return
	}
	t.Fatal("no pod planned")
}

// TestTLSClusterPods: with spec.tlsCluster enabled PD advertises https:// and each member
// mounts its component's cluster secret read-only and serves with --ca, --cert and --key in it.
func TestTLSClusterPods(t *testing.T) {
	tlsOn := func(tc *pcv1alpha1.TidbCluster) { tc.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true} }
	pods := map[string]*corev1.Pod{}
	for _, o := range []Observed{world(newTC(tlsOn), false), world(newTC(tlsOn), true, "pd-0")} {
		p, err := ComputePlan(testConfig, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.Actions {
			if a.Pod != nil {
				pods[a.Pod.Name] = a.Pod
			}
		}
	}
	for name, comp := range map[string]string{"basic-pd-0": ComponentPD, "basic-tikv-0": ComponentTiKV} {
		pod := pods[name]
		if pod == nil {
			t.Fatalf("no pod %s planned: %v", name, pods)
		}
		args := strings.Join(pod.Spec.Containers[0].Args, " ")
		if want := fmt.Sprintf("--ca var/lib/%[1]s-tls/ca.crt --cert var/lib/%[1]s-tls/tls.crt --key var/lib/%[1]s-tls/tls.key", comp); !strings.Contains(args, want) {
			t.Errorf("%s args %q, want %q", name, args, want)
		}
		if comp == ComponentPD && !strings.Contains(args, "--advertise-url https://127.0.1.10:2379") {
			t.Errorf("%s args %q, want an https:// advertise URL", name, args)
		}
		v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]
		m := pod.Spec.Containers[0].VolumeMounts[len(pod.Spec.Containers[0].VolumeMounts)-1]
		if v.Secret == nil || v.Secret.SecretName != "basic-"+comp+"-cluster-secret" || m.Name != v.Name || m.MountPath != "/var/lib/"+comp+"-tls" || !m.ReadOnly {
			t.Errorf("%s volume %+v mount %+v, want basic-%[4]s-cluster-secret at /var/lib/%[4]s-tls read-only", name, v, m, comp)
		}
	}
	// Without tlsCluster nothing of it.
	p, err := ComputePlan(testConfig, world(newTC(), false))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Pod != nil && strings.Contains(strings.Join(a.Pod.Spec.Containers[0].Args, " "), "--ca") {
			t.Errorf("%s without tlsCluster has --ca: %v", a.Pod.Name, a.Pod.Spec.Containers[0].Args)
		}
	}
}
