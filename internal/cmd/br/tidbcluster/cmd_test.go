package tidbcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

// backup writes a backupmeta whose saved TidbCluster is tc ("" none) into a directory storage.
func backup(t *testing.T, tc string) string {
	t.Helper()
	rec := &meta.Record{
		ClusterInfo: &meta.ClusterInfo{Version: "8.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 449000000000000000},
		TiKV:        meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1, Volumes: []meta.Volume{{ID: "vol-1", Type: meta.DataDirType, SnapshotID: "snap-1", AZ: "us-west-2a"}}}}},
		Fedbr:       &meta.Extension{BackupID: "b1"},
	}
	if tc != "" {
		rec.Kubernetes.TidbCluster = json.RawMessage(tc)
	}
	b, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := blob.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(context.Background(), meta.BackupMetaKey, b); err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(args ...string) (string, error) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestPrintsTheSavedTidbCluster: the backupmeta's kubernetes.crd_tidb_cluster, as saved (status
// included); a backup without one, one a restore cannot be made from, and one over tidbcluster.MaxSaved are
// refused with what is wrong.
func TestPrintsTheSavedTidbCluster(t *testing.T) {
	const tc = `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"basic","namespace":"tidb"},"spec":{"tikv":{"replicas":1}},"status":{"tikv":{}}}`
	out, err := run("--storage", backup(t, tc))
	if err != nil || out != tc+"\n" {
		t.Errorf("output %q, %v; want the saved TidbCluster", out, err)
	}
	for _, c := range []struct{ name, tc, want string }{
		{"none saved", "", "the backup saved no TidbCluster"},
		{"not a TidbCluster", `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbMonitor","metadata":{"name":"m"}}`, "want a pingcap.com TidbCluster"},
		{"joined by the source's PD address", `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"b"},"spec":{"pdAddresses":["http://pd:2379"],"tikv":{}}}`, "spec.pdAddresses"},
		{"too large", `{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"b","annotations":{"x":"` + strings.Repeat("a", tidbcluster.MaxSaved) + `"}},"spec":{"tikv":{}}}`, "over the 262144 a scratch restore takes"},
	} {
		if _, err := run("--storage", backup(t, c.tc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "--storage is required") {
		t.Errorf("no storage: %v", err)
	}
	for _, name := range []string{"storage", "region", "aws-endpoint", "member"} {
		if f := NewCmd().Flags().Lookup(name); f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}
