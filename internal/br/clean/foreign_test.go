package clean_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestCleanRefusesAnotherNamespacesSnapshots: a tenant's storage holding a backupmeta copied
// from another tenant's (backup b2 of namespace tenant-b, identity and snapshot ids included)
// does not make the tenant's clean delete those snapshots: a clean allowed only tenant-a's
// namespaces refuses them with meta.ErrForeignSnapshot, naming each, its namespace tag and the
// allowed namespaces, before any DeleteSnapshot; the metadata is kept and every snapshot of b2
// still exists. As for any snapshot not the backup's, nothing is deleted.
func TestCleanRefusesAnotherNamespacesSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		backupID string
	}{
		// by hand without --backup-id: the identity is the copied backupmeta's
		{name: "the identity read from the copied backupmeta"},
		{name: "the copied identity given", backupID: "b2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t)
			other := l.backupIn(t, "b2", "tenant-b", 2)
			l.writeMeta(t, other)
			before := l.srv.Inventory(nil).Snapshots
			allowed := meta.Namespaces{"tenant-a", "tenant-a-*"}
			sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: tc.backupID, DeleteRatio: 2, SourceNamespaces: allowed})
			if !errors.Is(err, meta.ErrForeignSnapshot) || !strings.Contains(err.Error(), `fedbr.io/namespace="tenant-b"`) ||
				!strings.Contains(err.Error(), "allowed: tenant-a, tenant-a-*") || !strings.Contains(err.Error(), "rule "+meta.RuleNamespace) {
				t.Fatalf("clean = %v; want %v naming the namespace tenant-b, the allowed namespaces and the rule", err, meta.ErrForeignSnapshot)
			}
			for _, id := range other.SnapshotIDs() {
				if !strings.Contains(err.Error(), id) {
					t.Errorf("clean = %v; want it to name snapshot %s", err, id)
				}
			}
			if len(sum.Deleted) != 0 || sum.Result != "failed" || l.srv.Stats().Calls["DeleteSnapshot"] != 0 {
				t.Fatalf("summary = %+v, DeleteSnapshot calls %d; want nothing deleted", sum, l.srv.Stats().Calls["DeleteSnapshot"])
			}
			if left := l.left(t, "b2"); len(left) != len(before) || len(left) != 4 {
				t.Fatalf("b2's snapshots left %v; want all 4 of the %d", left, len(before))
			}
			if keys := l.keys(t); !slices.Contains(keys, meta.BackupMetaKey) {
				t.Fatalf("metadata was deleted: %v", keys)
			}
		})
	}
}

// TestCleanOwnNamespacesSnapshots is the namespace rule's positive control: a backup whose
// snapshots carry a namespace the clean is allowed is cleaned, and so is an upstream backup's
// snapshots, which carry none.
func TestCleanOwnNamespacesSnapshots(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	l.writeMeta(t, l.backupIn(t, "b1", "tenant-a-dr", 2))
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", DeleteRatio: 2, SourceNamespaces: meta.Namespaces{"tenant-a", "tenant-a-*"}})
	if err != nil || len(sum.Deleted) != 4 {
		t.Fatalf("clean = %v, summary %+v; want 4 deleted", err, sum)
	}

	up := newLab(t)
	rec := up.backup(t, "b1", 2)
	rec.Fedbr = nil
	up.writeMeta(t, rec)
	sum, err = clean.Run(ctx, up.p, up.store, clean.Options{DeleteRatio: 2, SourceNamespaces: meta.Namespaces{"tenant-a"}})
	if err != nil || len(sum.Deleted) != 4 {
		t.Fatalf("clean of an upstream backup = %v, summary %+v; want 4 deleted", err, sum)
	}
}
