package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestManifestsReadBackSortedAndValidated: saved manifests read back TidbCluster first, then the
// other operator kinds in their order; a manifest whose key or body is malformed, or that is
// larger than MaxManifestBytes, or one manifest too many, is ErrInvalid.
func TestManifestsReadBackSortedAndValidated(t *testing.T) {
	ctx := context.Background()
	s, d := newStore(t)
	obj := func(kind, name string) []byte {
		return fmt.Appendf(nil, "apiVersion: pingcap.com/v1alpha1\nkind: %s\nmetadata:\n  name: %s\n  namespace: tidb\nspec:\n  clusters:\n  - name: basic\n", kind, name)
	}
	for _, m := range []struct{ kind, name string }{{"TidbNGMonitoring", "ng"}, {"TidbMonitor", "mon"}, {"TidbCluster", "basic"}, {"TidbDashboard", "dash"}} {
		if _, err := s.PutManifest(ctx, "tidb", m.kind, m.name, obj(m.kind, m.name)); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := s.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Kind+"/"+m.Name)
		if m.APIVersion != "pingcap.com/v1alpha1" || m.Namespace != "tidb" || !strings.Contains(string(m.YAML), "kind: "+m.Kind) {
			t.Errorf("manifest %+v", m)
		}
	}
	if want := []string{"TidbCluster/basic", "TidbMonitor/mon", "TidbDashboard/dash", "TidbNGMonitoring/ng"}; !slices.Equal(got, want) {
		t.Errorf("manifests %v, want %v", got, want)
	}

	for _, bad := range []struct {
		name, key string
		body      []byte
	}{
		{"another object than its key names", "manifests/tidb/TidbMonitor/other.yaml", obj("TidbMonitor", "mon")},
		{"not an object", "manifests/tidb/TidbMonitor/x.yaml", []byte("[1, 2")},
		{"no apiVersion", "manifests/tidb/TidbMonitor/y.yaml", []byte("kind: TidbMonitor\nmetadata:\n  name: y\n  namespace: tidb\n")},
		{"a key too deep", "manifests/tidb/x/TidbMonitor/mon.yaml", obj("TidbMonitor", "mon")},
		{"a key without .yaml", "manifests/tidb/TidbMonitor/mon", obj("TidbMonitor", "mon")},
		{"too large", "manifests/tidb/TidbMonitor/big.yaml", append(obj("TidbMonitor", "big"), strings.Repeat("#", MaxManifestBytes)...)},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if err := d.Put(ctx, bad.key, bad.body); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Delete(ctx, bad.key) }()
			if _, err := s.Manifests(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.key) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, bad.key)
			}
		})
	}
	if _, err := s.Manifests(ctx); err != nil {
		t.Fatalf("after the bad ones went: %v", err)
	}
	for i := len(ms); i <= MaxManifests; i++ {
		if err := d.Put(ctx, fmt.Sprintf("manifests/tidb/TidbMonitor/m%d.yaml", i), obj("TidbMonitor", fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Manifests(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("%d manifests: err = %v, want ErrInvalid", MaxManifests+1, err)
	}
	if _, err := s.PutManifest(ctx, "tidb", "TidbMonitor", "huge", make([]byte, MaxManifestBytes+1)); err == nil {
		t.Error("a manifest over MaxManifestBytes was written")
	}
}

// TestManifestsFromTheRecordedList: with a backupmeta listing fedbr.manifests, exactly those are
// read (an object under manifests/ the list does not name is not), a listed one that is missing
// is an error, and a backupmeta whose list is malformed is ErrInvalid, never a reason to list
// the storage instead. Without a backupmeta, or with one listing none (an older fedbr), the
// storage is listed.
func TestManifestsFromTheRecordedList(t *testing.T) {
	ctx := context.Background()
	s, d := newStore(t)
	obj := func(kind, name string) []byte {
		return fmt.Appendf(nil, "apiVersion: pingcap.com/v1alpha1\nkind: %s\nmetadata:\n  name: %s\n  namespace: tidb\n", kind, name)
	}
	var saved []string
	for _, m := range []struct{ kind, name string }{{"TidbMonitor", "mon"}, {"TidbCluster", "basic"}} {
		key, err := s.PutManifest(ctx, "tidb", m.kind, m.name, obj(m.kind, m.name))
		if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, key)
	}
	// Not listed: written after the backup, or by someone else.
	if err := d.Put(ctx, "manifests/tidb/TidbDashboard/later.yaml", obj("TidbDashboard", "later")); err != nil {
		t.Fatal(err)
	}
	keysOf := func() ([]string, bool) {
		t.Helper()
		keys, recorded, err := s.ManifestKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := s.Manifests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.Key)
		}
		if len(got) != len(keys) {
			t.Fatalf("Manifests read %v, ManifestKeys gave %v", got, keys)
		}
		return got, recorded
	}
	if got, recorded := keysOf(); recorded || len(got) != 3 {
		t.Errorf("no backupmeta: read %v (recorded %v), want the 3 listed in storage", got, recorded)
	}

	old := sampleBackup() // an older fedbr's backupmeta: no list
	if err := d.Put(ctx, BackupMetaKey, mustMarshal(t, old)); err != nil {
		t.Fatal(err)
	}
	if got, recorded := keysOf(); recorded || len(got) != 3 {
		t.Errorf("backupmeta without a list: read %v (recorded %v), want the 3 listed in storage", got, recorded)
	}

	r := sampleBackup()
	r.Fedbr.Manifests = saved
	if err := d.Put(ctx, BackupMetaKey, mustMarshal(t, r)); err != nil {
		t.Fatal(err)
	}
	if got, recorded := keysOf(); !recorded || !slices.Equal(got, []string{"manifests/tidb/TidbCluster/basic.yaml", "manifests/tidb/TidbMonitor/mon.yaml"}) {
		t.Errorf("recorded list: read %v (recorded %v), want the two recorded, TidbCluster first", got, recorded)
	}

	if err := d.Delete(ctx, saved[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Manifests(ctx); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), saved[0]) {
		t.Errorf("a recorded manifest missing: err = %v, want not found naming %s", err, saved[0])
	}

	r.Fedbr.Manifests = []string{"manifests/../../other-backup/backupmeta.yaml"}
	if err := d.Put(ctx, BackupMetaKey, mustMarshal(t, r)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Manifests(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "fedbr.manifests[0]") {
		t.Errorf("a malformed list: err = %v, want ErrInvalid naming fedbr.manifests[0]", err)
	}
}

func mustMarshal(t *testing.T, r *Record) []byte {
	t.Helper()
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
