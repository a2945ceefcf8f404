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

// TestManifestsPrintsTheSavedObjects: the TidbCluster first, then the objects that reference
// it, as one YAML stream; --kind narrows, --list prints keys; a malformed manifest in the
// storage fails with "invalid metadata"; once the backupmeta lists its manifests
// (fedbr.manifests), only those are read.
func TestManifestsPrintsTheSavedObjects(t *testing.T) {
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
	if _, err := s.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte(`{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"basic","namespace":"tidb"}}`)); err != nil {
		t.Fatal(err)
	}
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
