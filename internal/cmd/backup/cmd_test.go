package backup

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"manifests"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// saved is a backup's storage in a temporary directory holding a TidbMonitor mon and the
// TidbCluster basic of namespace tidb as tc says it.
func saved(t *testing.T, tc string) (string, blob.Store) {
	t.Helper()
	dir := t.TempDir()
	d, err := blob.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := meta.NewStore(d, nil)
	ctx := context.Background()
	if _, err := s.PutManifest(ctx, "tidb", "TidbMonitor", "mon", []byte("apiVersion: pingcap.com/v1alpha1\nkind: TidbMonitor\nmetadata:\n  name: mon\n  namespace: tidb\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte(tc)); err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// TestManifestsPrintsTheSavedObjects: the TidbCluster first, then the objects that reference
// it, as one YAML stream; --kind narrows, --list prints keys; a malformed manifest in the
// storage fails with "invalid metadata"; once the backupmeta lists its manifests
// (fedbr.manifests), only those are read.
func TestManifestsPrintsTheSavedObjects(t *testing.T) {
	ctx := context.Background()
	dir, d := saved(t, `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"basic","namespace":"tidb"}}`)
	out, err := run(t, "--storage", dir)
	want := "# manifests/tidb/TidbCluster/basic.yaml\n" + `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"basic","namespace":"tidb"}}` +
		"\n---\n# manifests/tidb/TidbMonitor/mon.yaml\napiVersion: pingcap.com/v1alpha1\nkind: TidbMonitor\nmetadata:\n  name: mon\n  namespace: tidb\n"
	if err != nil || out != want {
		t.Errorf("output %q, %v; want %q", out, err, want)
	}
	if out, err := run(t, "--storage", dir, "--kind", "TidbMonitor", "--list"); err != nil || out != "manifests/tidb/TidbMonitor/mon.yaml\n" {
		t.Errorf("--kind --list: %q, %v", out, err)
	}
	if _, err := run(t, "--storage", dir, "--kind", "TidbDashboard"); err == nil || !strings.Contains(err.Error(), "no manifest") {
		t.Errorf("no dashboard: %v", err)
	}
	if err := d.Put(ctx, "manifests/tidb/TidbMonitor/forged.yaml", []byte("kind: TidbCluster\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "--storage", dir); err == nil || !strings.Contains(err.Error(), "invalid metadata") {
		t.Errorf("forged manifest: %v", err)
	}
	if _, err := run(t); err == nil || !strings.Contains(err.Error(), "--storage is required") {
		t.Errorf("no storage: %v", err)
	}

	// A backupmeta that records its manifests: exactly those are printed, whatever else the
	// storage holds under manifests/ (the forged one above is never read).
	rec := &meta.Record{Fedbr: &meta.Extension{BackupID: "b1", Manifests: []string{"manifests/tidb/TidbCluster/basic.yaml"}}}
	b, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, meta.BackupMetaKey, b); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "--storage", dir, "--list"); err != nil || out != "manifests/tidb/TidbCluster/basic.yaml\n" {
		t.Errorf("recorded list: %q, %v; want the one key recorded", out, err)
	}
}

// TestManifestsForRestore: --for-restore prints only the TidbClusters, each as a restore into
// that namespace needs it (recovery mode, the namespace, no status or server fields; --tc
// renames); the flags that do not go together are refused.
func TestManifestsForRestore(t *testing.T) {
	dir, _ := saved(t, "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata:\n  name: basic\n  namespace: tidb\n  uid: u1\n  resourceVersion: \"9\"\nspec:\n  tikv:\n    replicas: 3\nstatus:\n  tikv: {}\n")
	out, err := run(t, "--storage", dir, "--for-restore", "tidb-restore", "--tc", "restored")
	want := "# manifests/tidb/TidbCluster/basic.yaml\napiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata:\n  name: restored\n  namespace: tidb-restore\nspec:\n  recoveryMode: true\n  tikv:\n    replicas: 3\n"
	if err != nil || out != want {
		t.Errorf("--for-restore: %q, %v; want %q", out, err, want)
	}
	for _, args := range [][]string{{"--tc", "x"}, {"--for-restore", "tidb-restore", "--list"}, {"--for-restore", "tidb-restore", "--kind", "TidbMonitor"}, {"--for-restore", "Bad_NS"}} {
		if _, err := run(t, append([]string{"--storage", dir}, args...)...); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
