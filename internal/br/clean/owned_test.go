package clean_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestCleanRefusesSnapshotsNotTheBackups: a backupmeta is read from storage and untrusted. One
// that lists a snapshot of another backup, of another account, or of another volume than it
// records makes clean refuse that snapshot by id and rule before any DeleteSnapshot: nothing
// is deleted, the metadata is kept, and the other backup's snapshot still exists.
func TestCleanRefusesSnapshotsNotTheBackups(t *testing.T) {
	for _, tc := range []struct {
		name string
		// poison changes the backupmeta of b1 (two stores) given backup b2's; it returns the
		// refused snapshot id.
		poison   func(t *testing.T, l *lab, rec, other *meta.Record) string
		backupID string
		rule     string
	}{
		{name: "another backup's snapshot", backupID: "b1", rule: meta.RuleBackupTag,
			poison: func(_ *testing.T, _ *lab, rec, other *meta.Record) string {
				// b2's snapshot under b1's volume record: the tag gives it away
				v := &rec.TiKV.Stores[1].Volumes[0]
				v.SnapshotID, v.ID = other.TiKV.Stores[0].Volumes[0].SnapshotID, other.TiKV.Stores[0].Volumes[0].ID
				return v.SnapshotID
			}},
		{name: "another account's snapshot", backupID: "b1", rule: meta.RuleOwner,
			poison: func(t *testing.T, l *lab, rec, _ *meta.Record) string {
				id := rec.TiKV.Stores[1].Volumes[0].SnapshotID
				if err := l.srv.GiveSnapshot(id, "999999999999"); err != nil {
					t.Fatal(err)
				}
				return id
			}},
		{name: "upstream backupmeta, snapshot of another volume", rule: meta.RuleSourceVolume,
			poison: func(_ *testing.T, _ *lab, rec, other *meta.Record) string {
				// an upstream backup carries no identity: the recorded source volume is what
				// can be checked
				rec.Fedbr = nil
				v := &rec.TiKV.Stores[1].Volumes[0]
				v.SnapshotID = other.TiKV.Stores[0].Volumes[0].SnapshotID
				return v.SnapshotID
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t)
			rec := l.backup(t, "b1", 2)
			other := l.backup(t, "b2", 1)
			refused := tc.poison(t, l, rec, other)
			l.writeMeta(t, rec)
			before := l.srv.Inventory(nil).Snapshots
			sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: tc.backupID, DeleteRatio: 2})
			if !errors.Is(err, meta.ErrNotOwned) || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "rule "+tc.rule) {
				t.Fatalf("clean = %v; want %v naming snapshot %s and rule %s", err, meta.ErrNotOwned, refused, tc.rule)
			}
			if len(sum.Deleted) != 0 || sum.Result != "failed" {
				t.Fatalf("summary = %+v; want nothing deleted", sum)
			}
			if after := l.srv.Inventory(nil).Snapshots; len(after) != len(before) {
				t.Fatalf("%d snapshots before the refused clean, %d after", len(before), len(after))
			}
			if keys := l.keys(t); !slices.Contains(keys, meta.BackupMetaKey) {
				t.Fatalf("metadata was deleted: %v", keys)
			}
		})
	}
}

// TestCleanUpstreamBackupOwnSnapshots is the positive control of the upstream rule: a
// backupmeta without fedbr's identity whose snapshots are the account's, of the volumes it
// records, is cleaned.
func TestCleanUpstreamBackupOwnSnapshots(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 2)
	rec.Fedbr = nil
	l.writeMeta(t, rec)
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{DeleteRatio: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Deleted) != 4 {
		t.Fatalf("summary = %+v; want 4 deleted", sum)
	}
}

// TestDoubleRefusesDeletingAnotherAccountsSnapshot: without fedbr's check, the cloud itself
// refuses (AWS answers UnauthorizedOperation), so the check above is what names the problem
// up front rather than a clean failing half-way.
func TestDoubleRefusesDeletingAnotherAccountsSnapshot(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	id := rec.SnapshotIDs()[0]
	if err := l.srv.GiveSnapshot(id, "999999999999"); err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteSnapshots(ctx, []string{id}); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("delete another account's snapshot = %v; want UnauthorizedOperation", err)
	}
	snaps, err := l.p.DescribeSnapshots(ctx, rec.SnapshotIDs())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if want := s.ID != id; s.Owned != want || (s.ID == id && (s.OwnerID != "999999999999" || len(s.Tags) != 0)) {
			t.Errorf("snapshot %s: owned %v owner %q tags %v", s.ID, s.Owned, s.OwnerID, s.Tags)
		}
	}
	if len(snaps) != 2 {
		t.Fatalf("described %d snapshots, want both (one shared by another account)", len(snaps))
	}
}
