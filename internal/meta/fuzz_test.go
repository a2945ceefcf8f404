package meta

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/blob"
)

// FuzzParse: no input makes parsing a record, validating it or walking what a reader uses
// (volumes, snapshot ids, the restored map, the ownership check) panic; whatever parses and
// passes ValidateIDs has only well-formed, unique ids. Its seeds run with every `go test`.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"backupmeta-upstream.json", "backupmeta-newer-fedbr.json", "clustermeta-operator.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"tikv":null}`, `{"tikv":{"stores":null}}`, `{"tikv":{"stores":[null]}}`,
		`{"tikv":{"stores":[{"volumes":[null,{}]}]}}`, `{"cluster_info":null,"fedbr":null}`, `{"fedbr":{"backup_id":"*"}}`,
		`{"tikv":{"replicas":-1,"stores":[{"store_id":1,"volumes":[{"volume_id":"vol-1","snapshot_id":"snap-*"}]}]}}`,
		`{"kubernetes":{"pvs":[null,1,"x"],"pvcs":{},"crd_tidb_cluster":[]}}`, `{"fedbr":{"version":1e400}}`, `{"tikv":{"stores":[{"store_id":-1}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("parse error %v is not ErrInvalid", err)
			}
			return
		}
		_ = r.ValidateCluster()
		_ = r.ValidateBackup()
		_ = r.Pending()
		var snaps []cloud.Snapshot
		for _, v := range r.Volumes() {
			snaps = append(snaps, cloud.Snapshot{ID: v.SnapshotID, VolumeID: v.ID, Owned: true})
		}
		_ = r.CheckSnapshots(snaps, r.BackupID(), nil)
		_ = r.RestoredVolumes()
		if _, err := r.Marshal(); err != nil {
			t.Fatalf("a parsed record does not marshal: %v", err)
		}
		if r.ValidateIDs() != nil {
			return
		}
		seen := map[string]bool{}
		for _, id := range r.SnapshotIDs() {
			if seen[id] || !snapshotIDPattern.MatchString(id) || strings.ContainsAny(id, "*?,") {
				t.Fatalf("ValidateIDs passed snapshot id %q (seen before: %v)", id, seen[id])
			}
			seen[id] = true
		}
	})
}

// FuzzParseTombstone: no input makes reading a tombstone panic, and what it accepts lists only
// snapshot ids.
func FuzzParseTombstone(f *testing.F) {
	for _, s := range []string{`{"backup_id":"b1","snapshots":["snap-0a1b2c3d4e5f60001"],"cleaned_at":"2026-01-01T00:00:00Z"}`,
		``, `null`, `{"snapshots":null}`, `{"snapshots":[""]}`, `{"snapshots":["snap-*"]}`, `{"cleaned_at":"x"}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseTombstone(data)
		if err != nil {
			return
		}
		for _, id := range ts.Snapshots {
			if !snapshotIDPattern.MatchString(id) {
				t.Fatalf("accepted snapshot id %q", id)
			}
		}
	})
}

// TestReadsAreBounded: a record beyond MaxRecordBytes is refused with ErrTooLarge naming the
// object; one naming a wildcard identity, which would be an EC2 tag filter matching every
// backup, is refused naming the field before any reader uses it.
func TestReadsAreBounded(t *testing.T) {
	ctx := context.Background()
	s, d := newStore(t)
	big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), MaxRecordBytes)...)
	if err := d.Put(ctx, BackupMetaKey, append(big, `"}`...)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackupMetaAsIs(ctx); !errors.Is(err, blob.ErrTooLarge) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), BackupMetaKey) {
		t.Fatalf("read an oversized backupmeta: err = %v, want ErrTooLarge naming %s", err, BackupMetaKey)
	}
	if err := d.Put(ctx, BackupMetaKey, []byte(`{"fedbr":{"version":1,"backup_id":"*"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackupMetaAsIs(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "fedbr.backup_id") {
		t.Fatalf("read a backupmeta with backup_id *: err = %v, want ErrInvalid naming fedbr.backup_id", err)
	}
	if err := d.Put(ctx, TombstoneKey, []byte(`{"snapshots":["snap-1","*"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tombstone(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "snapshots[1]") {
		t.Fatalf("read a tombstone listing *: err = %v", err)
	}
}
