package env

import (
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"

	"github.com/fedbr/fedbr/internal/lab/operator"
)

func TestTiDBOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    TiDBOptions
		want string // "" for valid
	}{
		{"defaults", TiDBOptions{Namespace: "tidb"}, ""},
		{"recovery", TiDBOptions{Namespace: "r", Recovery: true, PodSecurity: "privileged"}, ""},
		{"no namespace", TiDBOptions{}, "namespace is required"},
		{"too many TiKV", TiDBOptions{Namespace: "tidb", TiKVPerPlane: 11}, "want 1 to 10"},
		{"negative TiKV", TiDBOptions{Namespace: "tidb", TiKVPerPlane: -1}, "want 1 to 10"},
		{"unknown level", TiDBOptions{Namespace: "tidb", PodSecurity: "strict"}, `pod security "strict"`},
		{"bank into recovery", TiDBOptions{Namespace: "tidb", Recovery: true, Bank: true}, "not to one in recovery mode"},
		{"one account", TiDBOptions{Namespace: "tidb", Bank: true, Accounts: 1}, "accounts 1"},
		{"negative rate", TiDBOptions{Namespace: "tidb", Bank: true, Rate: -1}, "rate -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRecoveryTidbClusters(t *testing.T) {
	l := &Lab{StorageClass: "ebs", DataPlanes: []DataPlane{
		{Cluster: "dp1", IPPrefix: "127.0.21", StoreIDBase: 1000},
		{Cluster: "dp2", IPPrefix: "127.0.22", StoreIDBase: 2000},
	}}
	tcs, err := RecoveryTidbClusters(l, "basic", "tidb-restored", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for cluster, block := range map[string]string{"dp1": "127.0.121", "dp2": "127.0.122"} {
		tc := tcs[cluster]
		if !tc.Spec.RecoveryMode || tc.Annotations[operator.AnnotationIPPrefix] != block || tc.Namespace != "tidb-restored" {
			t.Errorf("%s: recoveryMode %v, block %q, namespace %s; want recovery on %s", cluster, tc.Spec.RecoveryMode,
				tc.Annotations[operator.AnnotationIPPrefix], tc.Namespace, block)
		}
	}
	if got := tidbcluster.ClusterRefPD(tcs["dp2"]); got != "http://basic-pd-peer.tidb-restored.svc.dp1.local:2379" || len(tcs["dp2"].Spec.PDAddresses) != 0 {
		t.Errorf("dp2 joins PD at %v (pdAddresses %v), want the first plane's restored PD by name", got, tcs["dp2"].Spec.PDAddresses)
	}
	l.DataPlanes[1].IPPrefix = "127.0.200"
	if _, err := RecoveryTidbClusters(l, "basic", "r", 1, false); err == nil || !strings.Contains(err.Error(), "no room for a restore block") {
		t.Fatalf("a prefix with no room above it: %v", err)
	}
}
