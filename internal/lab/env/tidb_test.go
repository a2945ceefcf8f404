package env

import (
	"testing"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"

	"github.com/fedbr/fedbr/internal/lab/operator"
)

func TestFederatedTidbClusters(t *testing.T) {
	l := &Lab{StorageClass: "gp3", DataPlanes: []DataPlane{
		{Cluster: "dp1", IPPrefix: "127.0.11", StoreIDBase: 1000},
		{Cluster: "dp2", IPPrefix: "127.0.12", StoreIDBase: 2000},
		{Cluster: "dp3", IPPrefix: "127.0.13", StoreIDBase: 3000},
	}}
	tcs := FederatedTidbClusters(l, "bank", "tidb", 2, false, []string{"k1", "k2"})
	if len(tcs) != 3 {
		t.Fatalf("got %d TidbClusters, want one per data plane", len(tcs))
	}
	for cluster, tc := range tcs {
		if got := tc.Annotations[operator.AnnotationInitialStores]; got != "1001,2001,3001,1002,2002,3002" {
			t.Errorf("%s: initial stores %q, want the stores interleaved across planes", cluster, got)
		}
		if got := tc.Annotations[operator.AnnotationSplitKeys]; got != "k1,k2" {
			t.Errorf("%s: split keys %q", cluster, got)
		}
		if !tc.Spec.AcrossK8s || tc.Spec.TiKV.Replicas != 2 || *tc.Spec.TiKV.StorageClassName != "gp3" || len(tc.Spec.TiKV.StorageVolumes) != 0 {
			t.Errorf("%s: spec %+v", cluster, tc.Spec)
		}
	}
	for cluster, tc := range FederatedTidbClusters(l, "bank", "tidb", 2, true, nil) {
		if sv := tc.Spec.TiKV.StorageVolumes; len(sv) != 1 || sv[0].Name != "raft" || sv[0].MountPath != "/var/lib/raft" {
			t.Errorf("%s: with a raft volume, storage volumes %+v", cluster, sv)
		}
	}
	if pd := tcs["dp1"].Spec.PD; pd.Replicas != 1 || len(tcs["dp1"].Spec.PDAddresses) != 0 {
		t.Errorf("dp1 must run the PD: %+v, %v", pd, tcs["dp1"].Spec.PDAddresses)
	}
	for _, c := range []string{"dp2", "dp3"} {
		tc := tcs[c]
		if tc.Spec.PD.Replicas != 0 || tc.Spec.Cluster == nil || tc.Spec.Cluster.Name != "bank" {
			t.Errorf("%s must join dp1's PD: %+v", c, tc.Spec)
		}
		if len(tc.Spec.PDAddresses) != 0 || tc.Spec.ClusterDomain != c+".local" {
			t.Errorf("%s: pdAddresses %v, clusterDomain %q: want none and its own", c, tc.Spec.PDAddresses, tc.Spec.ClusterDomain)
		}
		// As tidb-operator addresses the joined PD across Kubernetes clusters.
		if got := tidbcluster.ClusterRefPD(tc); got != "http://bank-pd-peer.tidb.svc.dp1.local:2379" {
			t.Errorf("%s joins PD at %s", c, got)
		}
	}
}
