package tidbcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/meta"
)

// saved is a TidbCluster as the agent saves it: the whole object as read, status and server
// fields included.
const saved = `apiVersion: pingcap.com/v1alpha1
kind: TidbCluster
metadata:
  name: basic
  namespace: tidb
  uid: 0b7c2c4e-1111-2222-3333-444455556666
  resourceVersion: "1234"
  generation: 7
  creationTimestamp: "2026-12-01T00:00:00Z"
  managedFields: [{manager: kubectl, operation: Apply}]
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: x}]
  finalizers: [example.com/keep]
  labels: {team: db}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"kind":"TidbCluster"}'
    example.com/note: kept
spec:
  version: v7.5.0
  acrossK8s: true
  cluster: {name: basic, namespace: tidb, clusterDomain: usw2a.local}
  pd: {replicas: 3}
  tikv:
    replicas: 3
    config: |
      [raft-engine]
      dir = "/var/lib/raft"
status:
  tikv: {stores: {"1": {id: "1"}}}
`

func manifest(yamlText string) meta.Manifest {
	return meta.Manifest{Key: "manifests/tidb/TidbCluster/basic.yaml", Namespace: "tidb", Kind: "TidbCluster", Name: "basic", YAML: []byte(yamlText)}
}

func TestForRestore(t *testing.T) {
	want := func(name, clusterName string) map[string]any {
		return map[string]any{
			"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster",
			"metadata": map[string]any{"name": name, "namespace": "tidb-restore", "labels": map[string]any{"team": "db"},
				"annotations": map[string]any{"example.com/note": "kept"}},
			"spec": map[string]any{"version": "v7.5.0", "acrossK8s": true, "recoveryMode": true,
				"cluster": map[string]any{"name": clusterName, "namespace": "tidb-restore", "clusterDomain": "usw2a.local"},
				"pd":      map[string]any{"replicas": float64(3)},
				"tikv":    map[string]any{"replicas": float64(3), "config": "[raft-engine]\ndir = \"/var/lib/raft\"\n"}},
		}
	}
	for _, tc := range []struct {
		name, into, tc string
		yaml           string
		want           map[string]any
		wantErr        string
	}{
		{name: "the saved name, in the restore's namespace, recovering, joining the restored cluster", into: "tidb-restore", yaml: saved, want: want("basic", "basic")},
		{name: "renamed with --tc, the joined one too", into: "tidb-restore", tc: "restored", yaml: saved, want: want("restored", "restored")},
		{name: "a cluster of its own (no spec.cluster), recoveryMode set over false", into: "tidb-restore",
			yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb}\nspec: {recoveryMode: false, tikv: {replicas: 1}}\n",
			want: map[string]any{"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster", "metadata": map[string]any{"name": "basic", "namespace": "tidb-restore"},
				"spec": map[string]any{"recoveryMode": true, "tikv": map[string]any{"replicas": float64(1)}}}},
		{name: "spec.cluster without a namespace stays in the TidbCluster's own", into: "tidb-restore",
			yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb}\nspec: {cluster: {name: first}, tikv: {replicas: 1}}\n",
			want: map[string]any{"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster", "metadata": map[string]any{"name": "basic", "namespace": "tidb-restore"},
				"spec": map[string]any{"recoveryMode": true, "cluster": map[string]any{"name": "first"}, "tikv": map[string]any{"replicas": float64(1)}}}},
		{name: "failed-over stores: as many TiKV as tidb-operator ran (replicas plus one per failed-over store), the failover not kept", into: "tidb-restore",
			yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb}\nspec: {tikv: {replicas: 3}}\n" +
				"status: {tikv: {failureStores: {\"4\": {podName: basic-tikv-1, storeID: \"4\"}, \"9\": {podName: basic-tikv-2, storeID: \"9\"}}}}\n",
			want: map[string]any{"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster", "metadata": map[string]any{"name": "basic", "namespace": "tidb-restore"},
				"spec": map[string]any{"recoveryMode": true, "tikv": map[string]any{"replicas": float64(5)}}}},
		{name: "a backed-up cluster that was restored itself: the gate its restore opened is not kept", into: "tidb-restore",
			yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb, annotations: {tidb.pingcap.com/tikv-volumes-ready: tidb/r-dp1}}\nspec: {tikv: {replicas: 1}}\n",
			want: map[string]any{"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster", "metadata": map[string]any{"name": "basic", "namespace": "tidb-restore"},
				"spec": map[string]any{"recoveryMode": true, "tikv": map[string]any{"replicas": float64(1)}}}},
		{name: "not a TidbCluster", into: "tidb-restore", yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbMonitor\nmetadata: {name: m}\nspec: {}\n",
			wantErr: "pingcap.com/v1alpha1 TidbMonitor, want a pingcap.com TidbCluster"},
		{name: "a TidbCluster of another group", into: "tidb-restore", yaml: "apiVersion: example.com/v1\nkind: TidbCluster\nmetadata: {name: m}\nspec: {tikv: {}}\n",
			wantErr: "want a pingcap.com TidbCluster"},
		{name: "without TiKV", into: "tidb-restore", yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: m}\nspec: {pd: {}}\n",
			wantErr: "has no spec.tikv"},
		{name: "joined by spec.pdAddresses: the source's PD, refused", into: "tidb-restore",
			yaml:    "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb}\nspec: {pdAddresses: [\"http://basic-pd.tidb.svc.az1:2379\"], tikv: {replicas: 1}}\n",
			wantErr: "joins PD by spec.pdAddresses [http://basic-pd.tidb.svc.az1:2379], the source's"},
		{name: "spec.cluster without a name", into: "tidb-restore", yaml: "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: m}\nspec: {cluster: {namespace: tidb}, tikv: {}}\n",
			wantErr: "spec.cluster has no name"},
		{name: "not YAML", into: "tidb-restore", yaml: "{", wantErr: "manifests/tidb/TidbCluster/basic.yaml: "},
		{name: "a bad namespace", into: "Tidb_Restore", yaml: saved, wantErr: `namespace "Tidb_Restore"`},
		{name: "a bad name", into: "tidb-restore", tc: "Basic!", yaml: saved, wantErr: `TidbCluster name "Basic!"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ForRestore(manifest(tc.yaml), tc.into, tc.tc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ForRestore: %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// As it is printed and sent: through JSON (numbers as float64).
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("restored TidbCluster (-want +got):\n%s", d)
			}
		})
	}
}

func TestSavedTidbCluster(t *testing.T) {
	ms := []meta.Manifest{{Kind: "TidbMonitor", Namespace: "tidb", Name: "basic"}, {Kind: "TidbCluster", Namespace: "tidb", Name: "basic", Key: "k"},
		{Kind: "TidbCluster", Namespace: "other", Name: "basic"}}
	if m, err := SavedTidbCluster(ms, "tidb", "basic"); err != nil || m.Key != "k" {
		t.Errorf("SavedTidbCluster = %+v, %v", m, err)
	}
	if _, err := SavedTidbCluster(ms, "tidb", "gone"); err == nil || !strings.Contains(err.Error(), "no TidbCluster tidb/gone (it saved [tidb/basic other/basic])") {
		t.Errorf("missing: %v", err)
	}
}
