package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/blob"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func generic(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestParseUpstreamBackupMeta reads a backupmeta in the shape BR writes (with the extra
// cluster_info members of BR's sample file) and finds everything a restore needs.
func TestParseUpstreamBackupMeta(t *testing.T) {
	r, err := Parse(fixture(t, "backupmeta-upstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateBackup(); err != nil {
		t.Fatal(err)
	}
	if r.ClusterInfo.ResolvedTS != 445580928837042177 || r.ClusterInfo.Version != "6.5.0" || r.TiKV.Replicas != 3 ||
		r.PD.Replicas != 3 || r.TiDB.Replicas != 2 || r.Fedbr != nil {
		t.Fatalf("parsed = %+v", r)
	}
	want := []string{"snap-0a1b2c3d4e5f60001", "snap-0a1b2c3d4e5f60002", "snap-0a1b2c3d4e5f60003", "snap-0a1b2c3d4e5f60004"}
	if got := r.SnapshotIDs(); !slices.Equal(got, want) {
		t.Fatalf("snapshot ids = %v", got)
	}
	vols := r.Volumes()
	if len(vols) != 4 || vols[2].StoreID != 4 || vols[2].Type != DataDirType || vols[2].AZ != "us-west-2a" {
		t.Fatalf("volumes = %+v", vols)
	}
	if len(r.Kubernetes.PVs) != 1 || len(r.Kubernetes.PVCs) != 1 || !bytes.Contains(r.Kubernetes.TidbCluster, []byte("acrossK8s")) {
		t.Fatalf("kubernetes = %+v", r.Kubernetes)
	}
	if !bytes.Contains(r.Options, []byte("445580928837042177")) {
		t.Fatalf("options = %s", r.Options)
	}
	if string(r.ClusterInfo.Extra["max_alloc_id"]) != "6000" {
		t.Fatalf("unknown cluster_info members = %v", r.ClusterInfo.Extra)
	}
}

// TestRoundTripIsLossless: parsing and writing an upstream backupmeta and an operator
// clustermeta gives back the same JSON document, unknown members and big numbers included.
func TestRoundTripIsLossless(t *testing.T) {
	for _, name := range []string{"backupmeta-upstream.json", "clustermeta-operator.json"} {
		t.Run(name, func(t *testing.T) {
			in := fixture(t, name)
			r, err := Parse(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if name == "clustermeta-operator.json" {
				// BR's keys are always written; the operator's clustermeta lacks some.
				r2, err := Parse(out)
				if err != nil {
					t.Fatal(err)
				}
				if r2.TiKV.Stores[0].Volumes[1].MountPath != "/var/lib/raft" || r2.TiKV.Replicas != 9 {
					t.Fatalf("rewritten clustermeta = %s", out)
				}
				return
			}
			if !reflect.DeepEqual(generic(t, in), generic(t, out)) {
				t.Fatalf("round trip changed the document:\n%s", out)
			}
		})
	}
}

// TestFedbrRecordReadsAsBR: a record fedbr writes has every key BR reads, with BR's types,
// and its extensions are extra keys BR's decoder skips.
func TestFedbrRecordReadsAsBR(t *testing.T) {
	r := sampleBackup()
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The subset of BR's schema, decoded strictly typed as BR does.
	var br struct {
		ClusterInfo *struct {
			Version        string            `json:"cluster_version"`
			FullBackupType string            `json:"full_backup_type"`
			ResolvedTS     uint64            `json:"resolved_ts"`
			Replicas       map[string]uint64 `json:"replicas"`
		} `json:"cluster_info"`
		TiKV struct {
			Replicas int `json:"replicas"`
			Stores   []struct {
				StoreID uint64 `json:"store_id"`
				Volumes []struct {
					ID              string `json:"volume_id"`
					Type            string `json:"type"`
					SnapshotID      string `json:"snapshot_id"`
					RestoreVolumeID string `json:"restore_volume_id"`
					AZ              string `json:"volume_az"`
					Status          string `json:"status"`
				} `json:"volumes"`
			} `json:"stores"`
		} `json:"tikv"`
		Region string `json:"region"`
	}
	if err := json.Unmarshal(b, &br); err != nil {
		t.Fatal(err)
	}
	if br.ClusterInfo.ResolvedTS != r.ClusterInfo.ResolvedTS || len(br.TiKV.Stores) != 2 ||
		br.TiKV.Stores[1].Volumes[0].SnapshotID != "snap-3" || br.TiKV.Stores[0].Volumes[1].Type != "raft-engine.dir" {
		t.Fatalf("BR view = %+v", br)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(b, &keys)
	for _, k := range []string{"cluster_info", "tikv", "tidb", "pd", "kubernetes", "options", "region"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("BR key %q missing from %s", k, b)
		}
	}
	var vol map[string]json.RawMessage
	_ = json.Unmarshal(mustJSON(t, r.TiKV.Stores[0].Volumes[0]), &vol)
	for _, k := range []string{"volume_id", "type", "snapshot_id", "restore_volume_id", "volume_az", "status"} {
		if _, ok := vol[k]; !ok {
			t.Errorf("BR volume key %q missing", k)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewerFormatIsRefused(t *testing.T) {
	_, err := Parse(fixture(t, "backupmeta-newer-fedbr.json"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "newer fedbr") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parse([]byte("{not json")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("garbage: err = %v", err)
	}
}

func sampleBackup() *Record {
	return &Record{
		ClusterInfo: &ClusterInfo{Version: "7.5.1", FullBackupType: FullBackupTypeEBS, ResolvedTS: 451000000000000000},
		TiKV: TiKV{Replicas: 9, Stores: []TiKVStore{
			{ID: 1, InstanceID: "i-1", Volumes: []Volume{
				{ID: "vol-1", Type: DataDirType, SnapshotID: "snap-1", AZ: "us-west-2a", MountPath: "/var/lib/tikv"},
				{ID: "vol-2", Type: "raft-engine.dir", SnapshotID: "snap-2", AZ: "us-west-2a"},
			}},
			{ID: 2, InstanceID: "i-2", Volumes: []Volume{{ID: "vol-3", Type: DataDirType, SnapshotID: "snap-3", AZ: "us-west-2a"}}},
		}},
		TiDB:  Component{Replicas: 2},
		PD:    Component{Replicas: 3},
		Fedbr: &Extension{BackupID: "b1", Cluster: "east", PDClusterID: 42},
	}
}

func TestValidateBackup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Record)
		want   string
	}{
		{"valid", func(*Record) {}, ""},
		{"no cluster_info", func(r *Record) { r.ClusterInfo = nil }, "cluster_info is missing"},
		{"bad version", func(r *Record) { r.ClusterInfo.Version = "nightly" }, "not a semantic version"},
		{"other type", func(r *Record) { r.ClusterInfo.FullBackupType = "kv" }, "only aws-ebs"},
		{"no resolved ts", func(r *Record) { r.ClusterInfo.ResolvedTS = 0 }, "resolved_ts is 0"},
		{"no stores", func(r *Record) { r.TiKV.Stores = nil }, "store count is 0"},
		{"store without volumes", func(r *Record) { r.TiKV.Stores[1].Volumes = nil }, "tikv.stores[1] (store 2) has no volumes"},
		{"no snapshot id", func(r *Record) { r.TiKV.Stores[0].Volumes[1].SnapshotID = "" }, "tikv.stores[0].volumes[1].snapshot_id is empty"},
		{"snapshot id a filter wildcard", func(r *Record) { r.TiKV.Stores[0].Volumes[1].SnapshotID = "snap-*" },
			`tikv.stores[0].volumes[1].snapshot_id "snap-*": not an EBS snapshot id`},
		{"volume id not a volume", func(r *Record) { r.TiKV.Stores[1].Volumes[0].ID = "snap-3x" },
			`tikv.stores[1].volumes[0].volume_id "snap-3x": not an EBS volume id`},
		{"restore volume id with a comma", func(r *Record) { r.TiKV.Stores[1].Volumes[0].RestoreVolumeID = "vol-1,vol-2" },
			`tikv.stores[1].volumes[0].restore_volume_id "vol-1,vol-2": not an EBS volume id`},
		{"one snapshot for two volumes", func(r *Record) { r.TiKV.Stores[1].Volumes[0].SnapshotID = "snap-1" },
			`tikv.stores[1].volumes[0].snapshot_id "snap-1": listed twice (also tikv.stores[0].volumes[0].snapshot_id)`},
		{"store listed twice", func(r *Record) { r.TiKV.Stores[1].ID = 1 }, "tikv.stores[1].store_id 1: listed twice"},
		{"replicas below the stores", func(r *Record) { r.TiKV.Replicas = 1 }, "tikv.replicas 1: want at least the 2 stores"},
		{"replicas beyond the bound", func(r *Record) { r.TiKV.Replicas = MaxStores + 1 }, "tikv.replicas 10001"},
		{"too many volumes", func(r *Record) {
			for i := range MaxVolumesPerStore {
				r.TiKV.Stores[1].Volumes = append(r.TiKV.Stores[1].Volumes, Volume{ID: fmt.Sprintf("vol-x%d", i), SnapshotID: fmt.Sprintf("snap-x%d", i)})
			}
		}, "tikv.stores[1].volumes: 33 volumes, at most 32"},
		{"manifests listed", func(r *Record) {
			r.Fedbr.Manifests = []string{"manifests/tidb/TidbCluster/basic.yaml", "manifests/_cluster/StorageClass/gp3.yaml"}
		}, ""},
		{"manifest key outside manifests/", func(r *Record) { r.Fedbr.Manifests = []string{"backupmeta"} },
			`fedbr.manifests[0]: manifest key "backupmeta"`},
		{"manifest key climbing out", func(r *Record) { r.Fedbr.Manifests = []string{"manifests/../TidbCluster/x.yaml"} },
			`fedbr.manifests[0]: manifest key "manifests/../TidbCluster/x.yaml"`},
		{"manifest key too deep", func(r *Record) { r.Fedbr.Manifests = []string{"manifests/tidb/a/TidbCluster/x.yaml"} },
			`fedbr.manifests[0]: manifest key`},
		{"manifest key without .yaml", func(r *Record) { r.Fedbr.Manifests = []string{"manifests/tidb/TidbCluster/x"} },
			`fedbr.manifests[0]: manifest key`},
		{"manifest key too long", func(r *Record) {
			r.Fedbr.Manifests = []string{"manifests/tidb/TidbCluster/" + strings.Repeat("x", 1024) + ".yaml"}
		}, `fedbr.manifests[0]: manifest key`},
		{"manifest listed twice", func(r *Record) {
			r.Fedbr.Manifests = []string{"manifests/tidb/TidbCluster/basic.yaml", "manifests/tidb/TidbCluster/basic.yaml"}
		}, `fedbr.manifests[1] "manifests/tidb/TidbCluster/basic.yaml": listed twice`},
		{"too many manifests", func(r *Record) {
			for i := range MaxManifests + 1 {
				r.Fedbr.Manifests = append(r.Fedbr.Manifests, fmt.Sprintf("manifests/tidb/TidbMonitor/m%d.yaml", i))
			}
		}, "fedbr.manifests: 257 keys, at most 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleBackup()
			tc.change(r)
			err := r.ValidateBackup()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestValidateCluster(t *testing.T) {
	r, err := Parse(fixture(t, "clustermeta-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateCluster(); err != nil {
		t.Fatal(err)
	}
	r.TiKV.Stores = append(r.TiKV.Stores, TiKVStore{ID: 2, Volumes: []Volume{{ID: "vol-0a1b2c3d4e5f60001"}}})
	r.TiKV.Replicas = 1
	err = r.ValidateCluster()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "listed twice") || !strings.Contains(err.Error(), "want at least the 2 stores listed") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"6.5.0": "6.5.0", "v7.1.2": "7.1.2", "8.0.0-alpha+git.abc": "8.0.0-alpha"} {
		v, err := ParseVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"", "6.5", "06.5.0", "6.5.0.1", "latest"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", in)
		}
	}
}

type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time {
	c.t = c.t.Add(time.Minute)
	return c.t
}

func newStore(t *testing.T) (*Store, *blob.Dir) {
	t.Helper()
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return NewStore(d, c.now), d
}

// TestBackupMetaIsWriteOnce: a retried write of the same record succeeds (later write time
// and all), a different record is refused and the stored one kept.
func TestBackupMetaIsWriteOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	r := sampleBackup()
	if err := s.PutBackupMeta(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBackupMeta(ctx, r); err != nil {
		t.Fatalf("identical rewrite: %v", err)
	}
	other := sampleBackup()
	other.TiKV.Stores[0].Volumes[0].SnapshotID = "snap-9"
	if err := s.PutBackupMeta(ctx, other); !errors.Is(err, ErrExists) {
		t.Fatalf("different rewrite: err = %v, want ErrExists", err)
	}
	got, err := s.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.TiKV.Stores[0].Volumes[0].SnapshotID != "snap-1" || got.Fedbr.Version != FormatVersion || got.Fedbr.WrittenAt.IsZero() {
		t.Fatalf("stored = %+v %+v", got.TiKV.Stores[0], got.Fedbr)
	}
	if r.Fedbr.WrittenAt != (time.Time{}) {
		t.Fatal("PutBackupMeta changed the caller's record")
	}
	bad := sampleBackup()
	bad.ClusterInfo.ResolvedTS = 0
	if err := s.PutBackupMeta(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid record: err = %v", err)
	}
}

// TestUpstreamBackupMetaRewrite: a backupmeta written by BR (no fedbr extension) and the
// same content written again by fedbr count as the same record.
func TestUpstreamBackupMetaRewrite(t *testing.T) {
	ctx := context.Background()
	s, d := newStore(t)
	if err := d.Put(ctx, BackupMetaKey, fixture(t, "backupmeta-upstream.json")); err != nil {
		t.Fatal(err)
	}
	r, err := s.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutBackupMeta(ctx, r); err != nil {
		t.Fatalf("rewrite of upstream's record: %v", err)
	}
}

// TestClusterMetaReplaceableUntilBackupMeta: weak point 17 — a retried backup may rewrite
// clustermeta until snapshots were recorded; then it is frozen.
func TestClusterMetaReplaceableUntilBackupMeta(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	c, err := Parse(fixture(t, "clustermeta-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutClusterMeta(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.PD.Replicas = 5
	if err := s.PutClusterMeta(ctx, c); err != nil {
		t.Fatalf("replace before backupmeta: %v", err)
	}
	if err := s.PutBackupMeta(ctx, sampleBackup()); err != nil {
		t.Fatal(err)
	}
	if err := s.PutClusterMeta(ctx, c); err != nil {
		t.Fatalf("identical rewrite after backupmeta: %v", err)
	}
	c.PD.Replicas = 7
	if err := s.PutClusterMeta(ctx, c); !errors.Is(err, ErrExists) {
		t.Fatalf("change after backupmeta: err = %v", err)
	}
	got, err := s.ClusterMeta(ctx)
	if err != nil || got.PD.Replicas != 5 {
		t.Fatalf("clustermeta = %+v, %v", got, err)
	}
}

// TestRestoreMetaPerRestore: two restores of one backup keep separate old → new maps.
func TestRestoreMetaPerRestore(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for i, id := range []string{"r1", "r2"} {
		r := sampleBackup()
		for si := range r.TiKV.Stores {
			for vi := range r.TiKV.Stores[si].Volumes {
				v := &r.TiKV.Stores[si].Volumes[vi]
				v.RestoreVolumeID = v.ID + "-restored-" + string(rune('a'+i))
			}
		}
		if err := s.PutRestoreMeta(ctx, id, r); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := s.Restores(ctx)
	if err != nil || !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Fatalf("restores = %v, %v", ids, err)
	}
	r1, err := s.RestoreMeta(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if m := r1.RestoredVolumes(); m["vol-3"] != "vol-3-restored-a" || len(m) != 3 || r1.Fedbr.RestoreID != "r1" {
		t.Fatalf("r1 map = %v, ext %+v", m, r1.Fedbr)
	}
	if _, err := s.RestoreMeta(ctx, "r3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing restore: err = %v", err)
	}
	if err := s.PutRestoreMeta(ctx, "../backupmeta", sampleBackup()); err == nil {
		t.Fatal("a restore id with a path was accepted")
	}
	if err := s.PutRestoreMeta(ctx, "r4", sampleBackup()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("restoremeta without restored volumes: err = %v", err)
	}
}

// recording wraps a blob store and records deletions.
type recording struct {
	blob.Store
	mu      sync.Mutex
	deleted []string
}

func (r *recording) Delete(ctx context.Context, key string) error {
	r.mu.Lock()
	r.deleted = append(r.deleted, key)
	r.mu.Unlock()
	return r.Store.Delete(ctx, key)
}

// TestDeleteWrittenLeavesBackupMetaLastAndTombstone: what fedbr wrote goes, backupmeta last;
// the tombstone and an object fedbr never writes stay.
func TestDeleteWrittenLeavesBackupMetaLastAndTombstone(t *testing.T) {
	ctx := context.Background()
	_, d := newStore(t)
	rec := &recording{Store: d}
	s := NewStore(rec, nil)
	if err := s.PutBackupMeta(ctx, sampleBackup()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte("kind: TidbCluster\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "zz-other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTombstone(ctx, Tombstone{BackupID: "b1", Snapshots: []string{"snap-1"}}); err != nil {
		t.Fatal(err)
	}
	deleted, left, err := s.DeleteWritten(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 || rec.deleted[len(rec.deleted)-1] != BackupMetaKey || !slices.Equal(left, []string{"zz-other"}) {
		t.Fatalf("deleted %v in order %v, left %v", deleted, rec.deleted, left)
	}
	keys, _ := s.Keys(ctx)
	if !slices.Equal(keys, []string{TombstoneKey, "zz-other"}) {
		t.Fatalf("left = %v", keys)
	}
	ts, err := s.Tombstone(ctx)
	if err != nil || ts.BackupID != "b1" {
		t.Fatalf("tombstone = %+v, %v", ts, err)
	}
}

func TestPutManifestKeepsFirstCopy(t *testing.T) {
	ctx := context.Background()
	s, d := newStore(t)
	key, err := s.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte("v1"))
	if err != nil || key != "manifests/tidb/TidbCluster/basic.yaml" {
		t.Fatalf("key = %q, %v", key, err)
	}
	if _, err := s.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if b, _ := d.Get(ctx, key, MaxManifestBytes); string(b) != "v1" {
		t.Fatalf("manifest = %q", b)
	}
	if _, err := s.PutManifest(ctx, "tidb", "a/b", "basic", nil); err == nil {
		t.Fatal("a kind with a slash was accepted")
	}
}

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"b1", "tidb.vbk-2026-01-01t00-00-00", "0e6f1c2a-uid"} {
		if err := ValidateID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a/b", "a b", strings.Repeat("x", 129)} {
		if err := ValidateID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBackupMetaPendingThenCompleted: the snapshot step writes backupmeta pending (readers
// of a restorable backup refuse it), may complete it exactly once (a rewrite of content
// is still refused), and may abandon it only while pending.
func TestBackupMetaPendingThenCompleted(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	r := sampleBackup()
	if r.Fedbr == nil {
		r.Fedbr = &Extension{}
	}
	r.Fedbr.Snapshots = SnapshotsPending
	if err := s.PutBackupMeta(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBackupMeta(ctx, r); err != nil {
		t.Fatalf("identical pending rewrite: %v", err)
	}
	if _, err := s.BackupMeta(ctx); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("reading a pending backupmeta: err = %v, want ErrIncomplete", err)
	}
	if got, err := s.BackupMetaAsIs(ctx); err != nil || !got.Pending() {
		t.Fatalf("as is: %+v, %v", got, err)
	}
	done, err := s.CompleteBackupMeta(ctx)
	if err != nil || done.Pending() || done.Fedbr.Snapshots != SnapshotsCompleted {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	if again, err := s.CompleteBackupMeta(ctx); err != nil || again.Fedbr.Snapshots != SnapshotsCompleted {
		t.Fatalf("complete again: %+v, %v", again, err)
	}
	got, err := s.BackupMeta(ctx)
	if err != nil || got.TiKV.Stores[0].Volumes[0].SnapshotID != "snap-1" {
		t.Fatalf("completed read: %+v, %v", got, err)
	}
	other := got.Clone()
	other.TiKV.Stores[0].Volumes[0].SnapshotID = "snap-9"
	if err := s.PutBackupMeta(ctx, other); !errors.Is(err, ErrExists) {
		t.Fatalf("content rewrite after completion: err = %v, want ErrExists", err)
	}
	if err := s.AbandonBackupMeta(ctx); !errors.Is(err, ErrExists) {
		t.Fatalf("abandoning a completed backupmeta: err = %v, want ErrExists", err)
	}

	s2, _ := newStore(t)
	if err := s2.AbandonBackupMeta(ctx); err != nil {
		t.Fatalf("abandoning a missing backupmeta: %v", err)
	}
	if err := s2.PutBackupMeta(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s2.AbandonBackupMeta(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.BackupMetaAsIs(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after abandon: err = %v, want ErrNotFound", err)
	}
}

// TestWritten: the objects fedbr writes for a backup, and nothing below or beside them.
func TestWritten(t *testing.T) {
	for key, want := range map[string]bool{
		"backupmeta": true, "clustermeta": true, "restoremeta/r-1": true, "manifests/tidb/TidbCluster/basic.yaml": true,
		"cleaned": false, "nightly-az1/backupmeta": false, "team-b/nightly/clustermeta": false, "restoremeta/": false,
		"restoremeta/r-1/x": false, "manifests/tidb/TidbCluster/basic.json": false, "manifests/tidb/basic.yaml": false,
		"manifests/a/b/c/d.yaml": false, "manifests//TidbCluster/basic.yaml": false, "manifests/tidb/TidbCluster/.yaml": false,
		"backupmeta.bak": false, "notes.txt": false, "": false,
		"logs/fed-nightly-snapshot-zj767.log": true, "logs/.log": false, "logs/a/b.log": false, "logs/x.txt": false, "logs/": false,
	} {
		if got := Written(key); got != want {
			t.Errorf("Written(%q) = %v, want %v", key, got, want)
		}
	}
}
