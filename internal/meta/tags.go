package meta

import (
	"fmt"
	"regexp"
)

// Tag keys carrying fedbr's identity on every snapshot and volume it creates, so a sweeper
// can find what a backup or restore left behind even when its metadata is gone.
const (
	TagBackup  = "fedbr.io/backup"
	TagRestore = "fedbr.io/restore"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateID checks a backup or restore identity: 1–128 letters, digits, '.', '_' or '-',
// starting with a letter or digit, so it is both a valid AWS tag value and one object-name
// segment.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("identity %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// BackupTags are the identity tags of a backup's snapshots.
func BackupTags(backupID string) map[string]string { return map[string]string{TagBackup: backupID} }

// RestoreTags are the identity tags of a restore's volumes.
func RestoreTags(restoreID string) map[string]string {
	return map[string]string{TagRestore: restoreID}
}
