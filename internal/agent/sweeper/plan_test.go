package sweeper

import (
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

const (
	cluster = "0b8f5d2e-kube-system"
	grace   = time.Hour
)

var now = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// snap is a snapshot the snapshot step made for backup member uid in namespace ns, started
// age ago; edit changes its tags.
func snap(uid, ns string, age time.Duration, edit ...func(map[string]string)) cloud.Snapshot {
	tags := map[string]string{meta.TagBackup: uid, "fedbr.io/store": "1", meta.TagBackupPending: cluster + "/" + ns}
	for _, e := range edit {
		e(tags)
	}
	return cloud.Snapshot{ID: "snap-1", VolumeID: "vol-src", State: cloud.SnapshotCompleted, Started: now.Add(-age), Tags: tags}
}

// vol is a volume restore-volumes made for restore member uid in namespace ns, created age
// ago, available.
func vol(uid, ns string, age time.Duration, edit ...func(*cloud.Volume)) cloud.Volume {
	v := cloud.Volume{ID: "vol-1", State: cloud.VolumeAvailable, Created: now.Add(-age),
		Tags: map[string]string{meta.TagRestore: uid, "TiDBCluster-BR": "new", meta.TagRestorePending: cluster + "/" + ns}}
	for _, e := range edit {
		e(&v)
	}
	return v
}

func set(k, v string) func(map[string]string) { return func(m map[string]string) { m[k] = v } }
func unset(k string) func(map[string]string)  { return func(m map[string]string) { delete(m, k) } }

// TestDecide: one row per decision. A resource is deleted only when it is tagged pending for
// this cluster (and namespace), carries a valid identity whose member is gone, nothing still
// uses it, and it is older than the grace period; every doubt keeps it.
func TestDecide(t *testing.T) {
	for _, tt := range []struct {
		name string
		obs  Observed
		// keep is "" when the resource is to be deleted, else a part of the reason it is kept.
		keep string
	}{
		{name: "snapshot of a gone backup member, past the grace period: deleted",
			obs: Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}}},
		{name: "exactly the grace period old: deleted",
			obs: Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", grace)}}},
		{name: "young orphan snapshot kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", grace-time.Second)}},
			keep: "younger than the grace period"},
		{name: "snapshot of a live backup member kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-live", "tidb", 48*time.Hour)}, BackupMembers: map[string]bool{"uid-live": true}},
			keep: "its member (uid uid-live) exists"},
		{name: "a restore member with the backup's uid does not keep a snapshot",
			obs: Observed{Snapshots: []cloud.Snapshot{snap("uid-x", "tidb", 2*time.Hour)}, RestoreMembers: map[string]bool{"uid-x": true}}},
		{name: "snapshot another member's result records kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}, Referenced: map[string]string{"snap-1": "tidb/fed-b2"}},
			keep: "recorded by VolumeBackupMember tidb/fed-b2"},
		{name: "snapshots kept while a member's result is unreadable",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}, ReferencesUnknown: "VolumeBackupMember tidb/fed-b3"},
			keep: "are unknown"},
		{name: "snapshot of another Kubernetes cluster kept (a shared AWS account)",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, set(meta.TagBackupPending, "other-cluster/tidb"))}},
			keep: "another Kubernetes cluster"},
		{name: "snapshot of another namespace kept by a namespaced agent",
			obs:  Observed{Scope: Scope{Namespaces: []string{"prod", "prod-restore"}}, Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}},
			keep: "outside this agent's prod, prod-restore"},
		{name: "snapshot of its own namespace deleted by a namespaced agent",
			obs: Observed{Scope: Scope{Namespaces: []string{"tidb"}}, Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}}},
		{name: "snapshot of one of its namespaces deleted by an agent of several",
			obs: Observed{Scope: Scope{Namespaces: []string{"tidb-restore", "tidb"}}, Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour)}}},
		{name: "unparsable owner tag kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, set(meta.TagBackupPending, "garbage"))}},
			keep: "tag " + meta.TagBackupPending},
		{name: "no backup identity tag kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, unset(meta.TagBackup))}},
			keep: "tag " + meta.TagBackup},
		{name: "invalid backup identity kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, set(meta.TagBackup, "a b"))}},
			keep: "tag " + meta.TagBackup},
		{name: "snapshot not marked pending (a completed backup, or an older fedbr's) kept",
			obs:  Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, unset(meta.TagBackupPending))}},
			keep: "not tagged " + meta.TagBackupPending},
		{name: "a restore's pending tag copied from the source volume does not make a snapshot sweepable",
			obs: Observed{Snapshots: []cloud.Snapshot{snap("uid-gone", "tidb", 2*time.Hour, unset(meta.TagBackupPending),
				set(meta.TagRestorePending, cluster+"/tidb"), set(meta.TagRestore, "ruid-gone"))}},
			keep: "not tagged " + meta.TagBackupPending},
		{name: "snapshot start time unknown kept",
			obs: Observed{Snapshots: []cloud.Snapshot{func() cloud.Snapshot {
				s := snap("uid-gone", "tidb", 2*time.Hour)
				s.Started = time.Time{}
				return s
			}()}},
			keep: "creation time is unknown"},

		{name: "available volume of a gone restore member, past the grace period: deleted",
			obs: Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour)}}},
		{name: "young orphan volume kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 10*time.Minute)}},
			keep: "younger than the grace period"},
		{name: "volume of a live restore member kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-live", "dst", 2*time.Hour)}, RestoreMembers: map[string]bool{"ruid-live": true}},
			keep: "its member (uid ruid-live) exists"},
		{name: "attached volume kept",
			obs: Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour, func(v *cloud.Volume) {
				v.State = cloud.VolumeInUse
				v.Attachments = []cloud.Attachment{{InstanceID: "i-1", VolumeID: v.ID, Device: "/dev/xvdb"}}
			})}},
			keep: "in-use with 1 attachments"},
		{name: "volume still being created kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour, func(v *cloud.Volume) { v.State = "creating" })}},
			keep: "not available"},
		{name: "volume a PersistentVolume names kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour)}, Bound: map[string]string{"vol-1": "fedbr-ruid-gone-dst-tikv-0"}},
			keep: "PersistentVolume fedbr-ruid-gone-dst-tikv-0 names it"},
		{name: "volume of another Kubernetes cluster kept",
			obs: Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour, func(v *cloud.Volume) {
				v.Tags[meta.TagRestorePending] = "other/dst"
			})}},
			keep: "another Kubernetes cluster"},
		{name: "volume without its restore identity kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour, func(v *cloud.Volume) { delete(v.Tags, meta.TagRestore) })}},
			keep: "tag " + meta.TagRestore},
		{name: "volume creation time unknown kept",
			obs:  Observed{Volumes: []cloud.Volume{vol("ruid-gone", "dst", 2*time.Hour, func(v *cloud.Volume) { v.Created = time.Time{} })}},
			keep: "creation time is unknown"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Now, tt.obs.Grace = now, grace
			if tt.obs.Scope.Cluster == "" {
				tt.obs.Scope.Cluster = cluster
			}
			p := Decide(tt.obs)
			if len(p.Delete)+len(p.Keep) != 1 {
				t.Fatalf("plan %+v, want one decision", p)
			}
			if tt.keep == "" {
				if len(p.Delete) != 1 {
					t.Fatalf("kept: %+v, want it deleted", p.Keep)
				}
				return
			}
			if len(p.Keep) != 1 {
				t.Fatalf("deleted: %+v, want it kept (%s)", p.Delete, tt.keep)
			}
			if !strings.Contains(p.Keep[0].Reason, tt.keep) {
				t.Errorf("kept because %q, want %q", p.Keep[0].Reason, tt.keep)
			}
		})
	}
}

// TestDecideMany: the plan lists every orphan once, sorted, with its identity and age, and
// keeps the rest.
func TestDecideMany(t *testing.T) {
	s2 := snap("uid-a", "tidb", 3*time.Hour)
	s2.ID = "snap-2"
	s3 := snap("uid-live", "tidb", 3*time.Hour)
	s3.ID = "snap-3"
	v2 := vol("ruid-a", "dst", 90*time.Minute)
	v2.ID = "vol-2"
	p := Decide(Observed{Scope: Scope{Cluster: cluster}, Now: now, Grace: grace,
		Snapshots: []cloud.Snapshot{s3, s2, snap("uid-a", "tidb", 2*time.Hour)}, Volumes: []cloud.Volume{v2},
		BackupMembers: map[string]bool{"uid-live": true}})
	want := []Orphan{
		{Kind: metrics.OrphanSnapshot, ID: "snap-1", Owner: "uid-a", Namespace: "tidb", Age: 2 * time.Hour},
		{Kind: metrics.OrphanSnapshot, ID: "snap-2", Owner: "uid-a", Namespace: "tidb", Age: 3 * time.Hour},
		{Kind: metrics.OrphanVolume, ID: "vol-2", Owner: "ruid-a", Namespace: "dst", Age: 90 * time.Minute},
	}
	if len(p.Delete) != len(want) {
		t.Fatalf("delete %+v, want %+v", p.Delete, want)
	}
	for i := range want {
		if p.Delete[i] != want[i] {
			t.Errorf("delete[%d] = %+v, want %+v", i, p.Delete[i], want[i])
		}
	}
	if len(p.Keep) != 1 || p.Keep[0].ID != "snap-3" {
		t.Errorf("keep %+v, want snap-3", p.Keep)
	}
	if why := p.Delete[2].Why(); !strings.Contains(why, "VolumeRestoreMember") || !strings.Contains(why, meta.TagRestore+"=ruid-a") {
		t.Errorf("why = %q", why)
	}
}
