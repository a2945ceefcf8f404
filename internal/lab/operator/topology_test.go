package operator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// joining is a TidbCluster without PD whose TiKV join the PD of another lab cluster.
func joining(tc *pcv1alpha1.TidbCluster) {
	tc.Spec.PD.Replicas = 0
	tc.Spec.PDAddresses = []string{"http://127.0.1.10:2379"}
}

func annotated(kv ...string) tcOpt {
	return func(tc *pcv1alpha1.TidbCluster) {
		if tc.Annotations == nil {
			tc.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			tc.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// tikvArgs plans o and returns the arguments of pod basic-tikv-<ordinal>.
func tikvArgs(t *testing.T, cfg Config, o Observed, name string) []string {
	t.Helper()
	p, err := ComputePlan(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Kind == CreatePod && a.Pod.Name == name {
			return a.Pod.Spec.Containers[0].Args
		}
	}
	t.Fatalf("no pod %s in %v", name, actionNames(p))
	return nil
}

func TestComputePlanJoiningPD(t *testing.T) {
	cfg := Config{Addressing: Addressing{IPPrefix: "127.0.2", StoreIDBase: 2000}, Image: "fedbr"}
	tests := []struct {
		name string
		obs  Observed
		want []string
		wait Wait
	}{
		{
			name: "remote PD not ready: nothing starts, no Service",
			obs:  world(newTC(joining), false),
			wait: WaitPD,
		},
		{
			name: "remote PD ready: TiKV only",
			obs:  world(newTC(joining), true),
			want: []string{"CreatePVC tikv-basic-tikv-0", "CreatePod basic-tikv-0", "CreatePVC tikv-basic-tikv-1",
				"CreatePod basic-tikv-1", "CreatePVC tikv-basic-tikv-2", "CreatePod basic-tikv-2"},
		},
		{
			name: "no pd at all works the same",
			obs:  world(newTC(joining, func(tc *pcv1alpha1.TidbCluster) { tc.Spec.PD = nil }), true, "tikv-0", "tikv-1"),
			want: []string{"CreatePVC tikv-basic-tikv-2", "CreatePod basic-tikv-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ComputePlan(cfg, tt.obs)
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

func TestComputePlanLayoutArgs(t *testing.T) {
	cfg := Config{Addressing: Addressing{IPPrefix: "127.0.2", StoreIDBase: 2000}, Image: "fedbr"}
	layout := []string{AnnotationInitialStores, "1001,2001,3001,1002", AnnotationSplitKeys, "acct000100,acct000200"}
	tests := []struct {
		name string
		tc   *pcv1alpha1.TidbCluster
		pods []string
		want []string
	}{
		{
			name: "joining stores get no layout by default",
			tc:   newTC(joining),
			want: []string{"lab", "tikv", "--store-id", "2002", "--data-dir", "var/lib/tikv", "--pd", "127.0.1.10:2379",
				"--listen", "127.0.2.101:20160", "--advertise-addr", "127.0.2.101:20160"},
		},
		{
			name: "joining stores with the federated layout",
			tc:   newTC(joining, annotated(layout...)),
			want: []string{"lab", "tikv", "--store-id", "2002", "--data-dir", "var/lib/tikv", "--pd", "127.0.1.10:2379",
				"--listen", "127.0.2.101:20160", "--advertise-addr", "127.0.2.101:20160",
				"--initial-stores", "1001,2001,3001,1002", "--split-keys", "acct000100,acct000200"},
		},
		{
			// tidb-operator's across-Kubernetes shape: the PD Service's name in the referenced
			// cluster's domain, which the TiKV pod resolves through the lab's cluster DNS.
			name: "joining by cluster reference",
			tc: newTC(pdReplicas(0), func(tc *pcv1alpha1.TidbCluster) {
				tc.Spec.Cluster = &pcv1alpha1.TidbClusterRef{Name: "basic", Namespace: "tidb", ClusterDomain: "dp1.local"}
			}),
			want: []string{"lab", "tikv", "--store-id", "2002", "--data-dir", "var/lib/tikv", "--pd", "basic-pd-peer.tidb.svc.dp1.local:2379",
				"--listen", "127.0.2.101:20160", "--advertise-addr", "127.0.2.101:20160"},
		},
		{
			name: "the PD side with the federated layout",
			tc:   newTC(annotated(layout...)),
			pods: []string{"pd-0"},
			want: []string{"lab", "tikv", "--store-id", "2002", "--data-dir", "var/lib/tikv", "--pd", "127.0.2.10:2379",
				"--listen", "127.0.2.101:20160", "--advertise-addr", "127.0.2.101:20160",
				"--initial-stores", "1001,2001,3001,1002", "--split-keys", "acct000100,acct000200"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tikvArgs(t, cfg, world(tt.tc, true, tt.pods...), "basic-tikv-1")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputePlanJoiningStatus(t *testing.T) {
	cfg := Config{Addressing: Addressing{IPPrefix: "127.0.2", StoreIDBase: 2000}, Image: "fedbr"}
	o := world(newTC(joining), true, "tikv-0")
	o.PD.Members = []PDMemberState{{Name: "other-pd-0", ID: 7, ClientURL: "http://127.0.1.10:2379", Healthy: true}}
	o.PD.Stores = []StoreState{
		{ID: 1001, Address: "127.0.1.100:20160", State: "Up"}, // the PD side's store
		{ID: 2001, Address: "127.0.2.100:20160", State: "Up"},
	}
	p, err := ComputePlan(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	want := pcv1alpha1.TidbClusterStatus{TiKV: pcv1alpha1.TiKVStatus{Phase: "Normal", Stores: map[string]pcv1alpha1.TiKVStore{
		"2001": {ID: "2001", PodName: "basic-tikv-0", IP: "127.0.2.100", State: "Up"},
	}}}
	if diff := cmp.Diff(want, p.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	o.PD = PDState{}
	o.Cluster.Status = p.Status
	if p, err = ComputePlan(cfg, o); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.PD.Members) != 0 {
		t.Errorf("members of a TidbCluster without PD = %v, want none", p.Status.PD.Members)
	}
}

func TestComputePlanInvalidTopology(t *testing.T) {
	for name, tc := range map[string]*pcv1alpha1.TidbCluster{
		"no PD and no address":       newTC(pdReplicas(0)),
		"own PD and an address":      newTC(func(tc *pcv1alpha1.TidbCluster) { tc.Spec.PDAddresses = []string{"http://127.0.1.10:2379"} }),
		"address without scheme":     newTC(joining, func(tc *pcv1alpha1.TidbCluster) { tc.Spec.PDAddresses = []string{"127.0.1.10:2379"} }),
		"address without port":       newTC(joining, func(tc *pcv1alpha1.TidbCluster) { tc.Spec.PDAddresses = []string{"http://pd"} }),
		"no PD to join":              newTC(pdReplicas(0)),
		"cluster reference unnamed":  newTC(pdReplicas(0), func(tc *pcv1alpha1.TidbCluster) { tc.Spec.Cluster = &pcv1alpha1.TidbClusterRef{Namespace: "tidb"} }),
		"two initial stores":         newTC(annotated(AnnotationInitialStores, "1,2")),
		"initial store not a number": newTC(annotated(AnnotationInitialStores, "1,2,x")),
		"initial store zero":         newTC(annotated(AnnotationInitialStores, "0,1,2")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ComputePlan(testConfig, world(tc, true))
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
		})
	}
}

func TestParsePDAddress(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.1.10:2379":  "127.0.1.10:2379",
		"https://pd.example:2379": "pd.example:2379",
		"http://[::1]:2379":       "[::1]:2379",
	} {
		got, err := parsePDAddress(in)
		if err != nil || got != want {
			t.Errorf("parsePDAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
