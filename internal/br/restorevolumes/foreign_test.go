package restorevolumes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestRestoreRefusesAnotherNamespacesSnapshots: the backup identity tag proves nothing about
// whose a snapshot is, since a tenant writes the backupmeta and can copy another tenant's
// (newLab's backup b1, taken for namespace backupNamespace, stands for it). A restore for a
// member whose snapshots must come from other namespaces fails with meta.ErrForeignSnapshot,
// naming the snapshot, its namespace tag or its absence and the allowed namespaces, before any
// volume is created, FSR enabled or PD touched.
func TestRestoreRefusesAnotherNamespacesSnapshots(t *testing.T) {
	tenantA := &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "tenant-a"}
	for _, tc := range []struct {
		name string
		// poison changes the lab (the backupmeta or the snapshots) and returns the options of
		// the restore and what its error must name besides the refused snapshot.
		poison func(t *testing.T, l *lab) (restorevolumes.Options, string)
	}{
		{name: "a copied backupmeta: another namespace's snapshots, identity tag right", poison: func(*testing.T, *lab) (restorevolumes.Options, string) {
			return restorevolumes.Options{Owner: tenantA, SourceNamespaces: meta.Namespaces{"tenant-a", "tenant-a-*"}},
				meta.TagNamespace + `="` + backupNamespace + `"`
		}},
		{name: "run by hand with --owner alone: the owner's namespace", poison: func(*testing.T, *lab) (restorevolumes.Options, string) {
			return restorevolumes.Options{Owner: tenantA}, meta.TagNamespace + `="` + backupNamespace + `"`
		}},
		{name: "a snapshot without a namespace tag", poison: func(t *testing.T, l *lab) (restorevolumes.Options, string) {
			id := l.rec.TiKV.Stores[1].Volumes[0].SnapshotID
			if err := l.p.UntagSnapshots(testContext(t), []string{id}, []string{meta.TagNamespace}); err != nil {
				t.Fatal(err)
			}
			return restorevolumes.Options{SourceNamespaces: meta.Namespaces{backupNamespace}}, "carries no " + meta.TagNamespace + " tag"
		}},
		{name: "an upstream-format backupmeta naming fedbr's snapshots of another namespace", poison: func(t *testing.T, l *lab) (restorevolumes.Options, string) {
			rec := l.rec.Clone()
			rec.Fedbr = nil // the identity left out, so no backup tag is checked
			l.overwrite(t, meta.BackupMetaKey, rec)
			return restorevolumes.Options{AllowUpstream: true, SourceNamespaces: meta.Namespaces{"tenant-a"}},
				meta.TagNamespace + `="` + backupNamespace + `"`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t, awsdouble.Options{})
			o, names := tc.poison(t, l)
			o.RestoreID, o.FSR = "r1", true
			before := l.volumeCount()
			pd := &fakePD{}
			_, err := restorevolumes.Run(ctx, l.p, pd, l.store, o)
			allowed := "allowed: " + o.SourceNamespaces.String()
			if o.SourceNamespaces == nil {
				allowed = "allowed: " + o.Owner.Namespace
			}
			if !errors.Is(err, meta.ErrForeignSnapshot) || !errors.Is(err, meta.ErrNotOwned) || !strings.Contains(err.Error(), names) ||
				!strings.Contains(err.Error(), allowed) || !strings.Contains(err.Error(), "rule "+meta.RuleNamespace) {
				t.Fatalf("restore = %v; want %v naming %s, %q and the rule %s", err, meta.ErrForeignSnapshot, names, allowed, meta.RuleNamespace)
			}
			for _, st := range l.rec.TiKV.Stores {
				if id := st.Volumes[0].SnapshotID; strings.Contains(names, backupNamespace) && !strings.Contains(err.Error(), id) {
					t.Errorf("restore = %v; want it to name snapshot %s", err, id)
				}
			}
			calls := l.srv.Stats().Calls
			if l.volumeCount() != before || calls["CreateVolume"] != 0 || calls["EnableFastSnapshotRestores"] != 0 {
				t.Fatalf("volumes %d → %d, CreateVolume calls %d, EnableFastSnapshotRestores calls %d; want none",
					before, l.volumeCount(), calls["CreateVolume"], calls["EnableFastSnapshotRestores"])
			}
			if pd.calls != nil {
				t.Fatalf("PD calls %v; want none before the snapshots were checked", pd.calls)
			}
		})
	}
}

// TestRestoreIntoAnotherNamespaceOfTheTenant: a VolumeRestore in control-plane namespace
// backupNamespace restoring into data-plane namespace tidb-dr, which the agent's
// --allow-namespaces tidb=tidb-dr allows, from a backup taken in backupNamespace. The restoring
// member lives in tidb-dr (its volumes carry it), its snapshots carry backupNamespace, and the
// namespaces the agent's policy gives the member's owner hold both: the restore goes through.
func TestRestoreIntoAnotherNamespaceOfTheTenant(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	pol, err := policy.New(policy.Config{AgentImage: "fedbr:test", StepServiceAccount: "fedbr-br", SameNamespace: true,
		Namespaces: []string{backupNamespace + "=tidb-dr"}})
	if err != nil {
		t.Fatal(err)
	}
	source := meta.Namespaces(pol.DataNamespaces(backupNamespace))
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1",
		Owner: &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "tidb-dr"}, SourceNamespaces: source})
	if err != nil {
		t.Fatalf("restore with source namespaces %v: %v", source, err)
	}
	if len(res.Volumes) != 4 {
		t.Fatalf("result = %+v; want 4 volumes", res)
	}
	for _, v := range l.srv.Inventory(meta.RestoreTags("r1")).Volumes {
		if v.Tags[meta.TagNamespace] != "tidb-dr" {
			t.Errorf("volume %s carries %s=%q, want the restoring member's tidb-dr", v.ID, meta.TagNamespace, v.Tags[meta.TagNamespace])
		}
	}
}

// TestRestoreUpstreamBackupWithoutNamespaceTags: upstream BR tags no namespace, so a backupmeta
// without fedbr's identity whose snapshots carry none restores under the namespace check when
// upstream backups are allowed (the documented risk of --allow-upstream-backups).
func TestRestoreUpstreamBackupWithoutNamespaceTags(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	rec := l.rec.Clone()
	rec.Fedbr = nil
	l.overwrite(t, meta.BackupMetaKey, rec)
	if err := l.p.UntagSnapshots(ctx, rec.SnapshotIDs(), []string{meta.TagNamespace, meta.TagBackup}); err != nil {
		t.Fatal(err)
	}
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", AllowUpstream: true,
		Owner: &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "tenant-a"}, SourceNamespaces: meta.Namespaces{"tenant-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) != 4 {
		t.Fatalf("result = %+v; want 4 volumes", res)
	}
}
