package meta

import (
	"errors"
	"fmt"

	"github.com/fedbr/fedbr/internal/cloud"
)

// ErrNotOwned marks a snapshot or volume that metadata names but that is not the operation's
// to act on: metadata is read from storage and untrusted, so every snapshot a restore creates
// volumes from or a clean deletes, and every volume the agent binds to a TiKV claim, is
// checked against the cloud first, and one that fails is refused by name before any create or
// delete call.
var ErrNotOwned = errors.New("refused: not this backup's or restore's")

// Rules a snapshot or volume must pass, as the errors name them.
const (
	// RuleOwner: a snapshot is owned by the account fedbr acts for (DescribeSnapshots
	// OwnerIds=self), never one another account shares or made public.
	RuleOwner = "owner=self"
	// RuleBackupTag: a fedbr backup's snapshot carries fedbr.io/backup=<its backup id>.
	RuleBackupTag = "tag " + TagBackup
	// RuleSourceVolume: a snapshot was taken of the volume the backupmeta records for it
	// (for a backup taken by upstream BR, whose snapshots carry only their source volumes'
	// tags, this and the owner are what can be checked).
	RuleSourceVolume = "source volume"
	// RuleRestoreTag: a restored volume carries fedbr.io/restore=<its restore id>.
	RuleRestoreTag = "tag " + TagRestore
)

// CheckSnapshot checks that s is a snapshot of backup backupID (empty: a backup without
// fedbr's identity, taken by upstream BR) taken of volume volumeID (empty: not checked, for a
// snapshot found by its identity tag alone).
func CheckSnapshot(s cloud.Snapshot, backupID, volumeID string) error {
	switch {
	case !s.Owned:
		return fmt.Errorf("snapshot %s: owned by account %q, not by this account (rule %s): %w", s.ID, s.OwnerID, RuleOwner, ErrNotOwned)
	case backupID != "" && s.Tags[TagBackup] != backupID:
		return fmt.Errorf("snapshot %s: tagged %s=%q, not %q (rule %s): %w", s.ID, TagBackup, s.Tags[TagBackup], backupID, RuleBackupTag, ErrNotOwned)
	case volumeID != "" && s.VolumeID != volumeID:
		return fmt.Errorf("snapshot %s: taken of volume %q, but the backupmeta records it for volume %s (rule %s): %w", s.ID, s.VolumeID, volumeID, RuleSourceVolume, ErrNotOwned)
	}
	return nil
}

// BackupID is the identity the record's snapshots are tagged with; empty for a backup taken
// by upstream BR.
func (r *Record) BackupID() string {
	if r.Fedbr == nil {
		return ""
	}
	return r.Fedbr.BackupID
}

// CheckSnapshots checks every snapshot the record lists that is among snaps (a described
// snapshot set; one not there is missing, which the caller judges) with CheckSnapshot, for
// backup backupID and the volume the record lists it for. Every refusal is reported.
func (r *Record) CheckSnapshots(snaps []cloud.Snapshot, backupID string) error {
	byID := make(map[string]cloud.Snapshot, len(snaps))
	for _, s := range snaps {
		byID[s.ID] = s
	}
	var errs []error
	for _, v := range r.Volumes() {
		s, ok := byID[v.SnapshotID]
		if !ok {
			continue
		}
		if err := CheckSnapshot(s, backupID, v.ID); err != nil {
			errs = append(errs, fmt.Errorf("store %d: %w", v.StoreID, err))
		}
	}
	return errors.Join(errs...)
}

// CheckRestoredVolume checks that v is a volume of restore restoreID. Volumes are never shared
// between accounts, so a described volume is the account's; the tag says it is this
// restore's, not a volume of another cluster a restoremeta names.
func CheckRestoredVolume(v cloud.Volume, restoreID string) error {
	if v.Tags[TagRestore] != restoreID {
		return fmt.Errorf("volume %s: tagged %s=%q, not %q (rule %s): %w", v.ID, TagRestore, v.Tags[TagRestore], restoreID, RuleRestoreTag, ErrNotOwned)
	}
	return nil
}
