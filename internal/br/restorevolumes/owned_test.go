package restorevolumes_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// overwrite replaces the object key with rec as it is (a storage writer needs no fedbr).
func (l *lab) overwrite(t *testing.T, key string, rec *meta.Record) {
	t.Helper()
	b, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.dir.Put(context.Background(), key, b); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesSnapshotsNotTheBackups: a backupmeta naming a snapshot that is not the
// backup's — another account's, one tagged for another backup, or (for a backup taken by
// upstream BR, which carries no identity tag) one of another volume than recorded — fails the
// step naming the snapshot and the rule before any volume is created or FSR enabled.
func TestRestoreRefusesSnapshotsNotTheBackups(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poison func(t *testing.T, l *lab) string
		rule   string
	}{
		{name: "another account's snapshot", rule: meta.RuleOwner, poison: func(t *testing.T, l *lab) string {
			id := l.rec.TiKV.Stores[1].Volumes[0].SnapshotID
			if err := l.srv.GiveSnapshot(id, "999999999999"); err != nil {
				t.Fatal(err)
			}
			return id
		}},
		{name: "another backup's snapshots", rule: meta.RuleBackupTag, poison: func(_ *testing.T, l *lab) string {
			rec := l.rec.Clone()
			rec.Fedbr.BackupID = "b9" // b1's snapshots listed as b9's
			l.overwrite(t, meta.BackupMetaKey, rec)
			return rec.TiKV.Stores[0].Volumes[0].SnapshotID
		}},
		{name: "upstream backupmeta, snapshot of another volume", rule: meta.RuleSourceVolume, poison: func(_ *testing.T, l *lab) string {
			rec := l.rec.Clone()
			rec.Fedbr = nil
			a, b := &rec.TiKV.Stores[0].Volumes[0], &rec.TiKV.Stores[1].Volumes[0]
			a.SnapshotID, b.SnapshotID = b.SnapshotID, a.SnapshotID
			l.overwrite(t, meta.BackupMetaKey, rec)
			return a.SnapshotID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t, awsdouble.Options{})
			refused := tc.poison(t, l)
			before := l.volumeCount()
			// Upstream backups allowed: the upstream row's refusal is the snapshot's own.
			_, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", FSR: true, AllowUpstream: true})
			if !errors.Is(err, meta.ErrNotOwned) || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "rule "+tc.rule) {
				t.Fatalf("restore = %v; want %v naming snapshot %s and rule %s", err, meta.ErrNotOwned, refused, tc.rule)
			}
			calls := l.srv.Stats().Calls
			if l.volumeCount() != before || calls["CreateVolume"] != 0 || calls["EnableFastSnapshotRestores"] != 0 {
				t.Fatalf("volumes %d → %d, CreateVolume calls %d, EnableFastSnapshotRestores calls %d; want none",
					before, l.volumeCount(), calls["CreateVolume"], calls["EnableFastSnapshotRestores"])
			}
		})
	}
}

// TestRestoreUpstreamBackup is the upstream rule's positive control: a backupmeta without
// fedbr's identity whose snapshots are the account's, of the volumes it records, restores when
// upstream backups are allowed, and is refused before any call to EC2 when they are not (the
// default).
func TestRestoreUpstreamBackup(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	rec := l.rec.Clone()
	rec.Fedbr = nil
	l.overwrite(t, meta.BackupMetaKey, rec)
	before, calls := l.volumeCount(), l.srv.Stats().Calls
	if _, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1"}); !errors.Is(err, restorevolumes.ErrUpstream) {
		t.Fatalf("restore by default = %v, want %v", err, restorevolumes.ErrUpstream)
	}
	if after := l.srv.Stats().Calls; l.volumeCount() != before || !maps.Equal(after, calls) {
		t.Fatalf("refused restore: volumes %d → %d, EC2 calls %v → %v; want none", before, l.volumeCount(), calls, after)
	}
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", AllowUpstream: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) != 4 {
		t.Fatalf("result = %+v", res)
	}
}

// TestRetryRefusesRestoremetaNamingAnotherVolume: a retry returns the volumes restoremeta
// records only if each carries this restore's identity; one naming any other volume of the
// account (here another cluster's TiKV volume) is refused by id and rule.
func TestRetryRefusesRestoremetaNamingAnotherVolume(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	if _, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1"}); err != nil {
		t.Fatal(err)
	}
	rm, err := l.store.RestoreMeta(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// another cluster's live TiKV volume in the account
	other, err := l.srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	victim := other.Volumes[0].ID
	rm.TiKV.Stores[0].Volumes[0].RestoreVolumeID = victim
	l.overwrite(t, meta.RestoreMetaPrefix+"r1", rm)
	_, err = restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1"})
	if !errors.Is(err, meta.ErrNotOwned) || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "rule "+meta.RuleRestoreTag) {
		t.Fatalf("retry = %v; want %v naming volume %s and rule %s", err, meta.ErrNotOwned, victim, meta.RuleRestoreTag)
	}
}
