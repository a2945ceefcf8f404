package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestManifestsRoundTrip: the agent's inputs (the TidbCluster as JSON, the objects that
// reference it as JSON documents separated by ---) are saved under manifests/ and read back
// valid by meta.Store.Manifests, TidbCluster first.
func TestManifestsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tc := filepath.Join(dir, "tidbcluster.json")
	objs := filepath.Join(dir, "operator-objects.yaml")
	if err := os.WriteFile(tc, []byte(`{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"basic","namespace":"tidb"},"spec":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(objs, []byte(`{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbMonitor","metadata":{"name":"mon","namespace":"tidb"},"spec":{"clusters":[{"name":"basic"}]}}`+
		"\n---\n"+`{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbInitializer","metadata":{"name":"init","namespace":"tidb"},"spec":{"cluster":{"name":"basic"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := readManifests([]string{objs, tc})
	if err != nil {
		t.Fatal(err)
	}
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(d, nil)
	ctx := context.Background()
	if err := putManifests(ctx, store, ms); err != nil {
		t.Fatal(err)
	}
	read, err := store.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range read {
		keys = append(keys, m.Key)
	}
	want := []string{"manifests/tidb/TidbCluster/basic.yaml", "manifests/tidb/TidbMonitor/mon.yaml", "manifests/tidb/TidbInitializer/init.yaml"}
	if !slices.Equal(keys, want) {
		t.Errorf("read back %v, want %v", keys, want)
	}
}
