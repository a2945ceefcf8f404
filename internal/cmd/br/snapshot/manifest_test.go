package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestManifestsRoundTrip: the agent's inputs (the TidbCluster as JSON, the objects that
// reference it as JSON documents separated by ---) are saved under manifests/ and read back
// valid by meta.Store.Manifests, TidbCluster first; putManifests returns their keys once each.
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
	saved, err := putManifests(ctx, store, ms)
	if err != nil {
		t.Fatal(err)
	}
	// The keys recorded in backupmeta: each once, in --manifest order.
	if want := []string{"manifests/tidb/TidbMonitor/mon.yaml", "manifests/tidb/TidbInitializer/init.yaml", "manifests/tidb/TidbCluster/basic.yaml"}; !slices.Equal(saved, want) {
		t.Errorf("saved keys %v, want %v", saved, want)
	}
	if again, err := putManifests(ctx, store, append(ms, ms...)); err != nil || len(again) != 3 {
		t.Errorf("the same objects twice: keys %v, err %v; want the 3 keys once", again, err)
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

// TestManifestsOverTheBound: more objects than a reader accepts are refused before any is
// written, as the backupmeta listing them would be refused.
func TestManifestsOverTheBound(t *testing.T) {
	ms := make([]manifest, meta.MaxManifests+1)
	for i := range ms {
		ms[i] = manifest{namespace: "tidb", kind: "TidbMonitor", name: fmt.Sprintf("m%d", i), yaml: []byte("kind: TidbMonitor\n")}
	}
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := putManifests(ctx, meta.NewStore(d, nil), ms); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Fatalf("err = %v, want the bound named", err)
	}
	if keys, err := d.List(ctx, meta.ManifestsPrefix); err != nil || len(keys) != 0 {
		t.Errorf("written before the refusal: %v, %v", keys, err)
	}
}
