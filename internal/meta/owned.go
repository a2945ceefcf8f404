package meta

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/fedbr/fedbr/internal/cloud"
)

// ErrNotOwned marks a snapshot or volume that metadata names but that is not the operation's
// to act on: metadata is read from storage and untrusted, so every snapshot a restore creates
// volumes from or a clean deletes, and every volume the agent binds to a TiKV claim, is
// checked against the cloud first, and one that fails is refused by name before any create or
// delete call.
var ErrNotOwned = errors.New("refused: not this backup's or restore's")

// ErrForeignSnapshot marks a snapshot whose namespace tag (TagNamespace) is missing or names a
// data-plane namespace the member may not act on. The backup identity tag does not prove whose
// a snapshot is: a tenant writes the backupmeta in its own storage and can copy another
// tenant's, identity and snapshot ids included; the namespace tag it cannot forge, as the
// per-namespace IAM policy lets a step create only snapshots tagged with its own namespace. It
// is an ErrNotOwned.
var ErrForeignSnapshot = fmt.Errorf("%w: a snapshot of a namespace this member may not act on", ErrNotOwned)

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
	// RuleNamespace: a fedbr backup's snapshot carries fedbr.io/namespace=<a data-plane
	// namespace the member may act on> (Namespaces).
	RuleNamespace = "tag " + TagNamespace
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

// Namespaces are the data-plane namespaces, as path.Match globs, whose snapshots an operation
// may create volumes from or delete, matched against each snapshot's TagNamespace. Nil checks
// nothing: a step run by hand with neither --source-namespaces nor --owner acts with the
// operator's own identity, which may act on every namespace.
type Namespaces []string

// Validate checks the globs: at least one, none empty, each in path.Match syntax.
func (n Namespaces) Validate() error {
	if n == nil {
		return nil
	}
	if len(n) == 0 {
		return errors.New("no namespace: want at least one data-plane namespace or glob")
	}
	var errs []error
	for _, g := range n {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, errors.New("an empty namespace pattern"))
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("namespace pattern %q: not a glob (path.Match syntax: *, ?, [a-z], \\ escapes): %w", g, err))
		}
	}
	return errors.Join(errs...)
}

// Allows says whether namespace matches one of the globs; a nil Namespaces allows any.
func (n Namespaces) Allows(namespace string) bool {
	if n == nil {
		return true
	}
	for _, g := range n {
		if ok, err := path.Match(g, namespace); ok && err == nil {
			return true
		}
	}
	return false
}

// CheckNamespace checks that snapshot s carries TagNamespace with a namespace n allows. A
// snapshot of a backup without fedbr's identity (backupID empty: upstream BR took it, which
// tags no namespace) passes without the tag, the documented risk of restoring such backups,
// but not with another namespace's: that is a fedbr snapshot named by a backupmeta that left
// fedbr's identity out.
func CheckNamespace(s cloud.Snapshot, backupID string, n Namespaces) error {
	if n == nil {
		return nil
	}
	ns, tagged := s.Tags[TagNamespace]
	switch {
	case !tagged && backupID == "":
		return nil
	case !tagged:
		return fmt.Errorf("snapshot %s: carries no %s tag, so nothing proves it is of a namespace this member may act on (allowed: %s; a snapshot fedbr took before it tagged namespaces gets the tag, with its backup's namespace, from the operator) (rule %s): %w",
			s.ID, TagNamespace, n, RuleNamespace, ErrForeignSnapshot)
	case !n.Allows(ns):
		return fmt.Errorf("snapshot %s: tagged %s=%q, a namespace this member may not act on (allowed: %s; the agent's --allow-same-namespace and --allow-namespaces decide) (rule %s): %w",
			s.ID, TagNamespace, ns, n, RuleNamespace, ErrForeignSnapshot)
	}
	return nil
}

// String lists the globs for a message.
func (n Namespaces) String() string {
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// CheckSnapshots checks every snapshot the record lists that is among snaps (a described
// snapshot set; one not there is missing, which the caller judges) with CheckSnapshot, for
// backup backupID and the volume the record lists it for, then with CheckNamespace against
// namespaces. Every refusal is reported.
func (r *Record) CheckSnapshots(snaps []cloud.Snapshot, backupID string, namespaces Namespaces) error {
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
		err := CheckSnapshot(s, backupID, v.ID)
		if err == nil {
			err = CheckNamespace(s, backupID, namespaces)
		}
		if err != nil {
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
