package backupmember

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brsnapshot "github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
)

// tsAt is the physical time of backupTS.
var tsAt = time.UnixMilli(int64(backupTS >> 18))

// snapshot is an owned, completed snapshot of volume vol for member uid-1, started just after
// the backup ts.
func snapshot(id, vol string) cloud.Snapshot {
	return cloud.Snapshot{ID: id, VolumeID: vol, State: cloud.SnapshotCompleted, Owned: true, OwnerID: "111122223333",
		Started: tsAt.Add(time.Second), Tags: map[string]string{meta.TagBackup: "uid-1"}}
}

// confirmation is what the agent finds of the one snapshot snapDone names: it matches.
func confirmation() *Confirmation {
	return &Confirmation{Volumes: []string{"vol-1"}, Snapshots: []cloud.Snapshot{snapshot("snap-1", "vol-1")}}
}

// TestConfirm: every mismatch between a completion report and what the agent finds gives its
// reason; a match confirms.
func TestConfirm(t *testing.T) {
	base := func() (*dpv1alpha1.VolumeBackupMember, *Confirmation, uint64, brsnapshot.Result) {
		m := member(dpv1alpha1.BackupMemberExecute, func(m *dpv1alpha1.VolumeBackupMember) {
			m.Spec.BackupTS = tsText
			m.CreationTimestamp = metav1.NewTime(tsAt.Add(-time.Minute))
		})
		c := &Confirmation{Volumes: []string{"vol-1", "vol-2"},
			Snapshots: []cloud.Snapshot{snapshot("snap-1", "vol-1"), snapshot("snap-2", "vol-2")}}
		sum := brsnapshot.Result{BackupID: "uid-1", ResolvedTS: backupTS, Snapshots: []brsnapshot.Snapshot{
			{StoreID: 1, VolumeID: "vol-1", SnapshotID: "snap-1"}, {StoreID: 2, VolumeID: "vol-2", SnapshotID: "snap-2"}}}
		return m, c, backupTS, sum
	}
	for _, tt := range []struct {
		name string
		mut  func(m *dpv1alpha1.VolumeBackupMember, c *Confirmation, ts *uint64, sum *brsnapshot.Result)
		want []string // substrings of the mismatches, in order; none: confirmed
	}{
		{name: "everything matches", mut: func(*dpv1alpha1.VolumeBackupMember, *Confirmation, *uint64, *brsnapshot.Result) {}},
		{name: "a snapshot AWS does not have",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots = c.Snapshots[:1]
			},
			want: []string{`snapshot "snap-2": not found in AWS`, "TiKV volume vol-2: 0 snapshots, want exactly one"}},
		{name: "a snapshot of another account",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots[1].Owned = false
			},
			want: []string{"snapshot snap-2: owned by account", "rule owner=self", "TiKV volume vol-2: 0 snapshots"}},
		{name: "a snapshot of another backup",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots[0].Tags = map[string]string{meta.TagBackup: "uid-other"}
			},
			want: []string{`snapshot snap-1: tagged fedbr.io/backup="uid-other", not "uid-1" (rule tag fedbr.io/backup)`, "TiKV volume vol-1: 0 snapshots"}},
		{name: "a snapshot without fedbr's tags",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots[0].Tags = nil
			},
			want: []string{"rule tag fedbr.io/backup"}},
		{name: "a snapshot of another volume than the result says",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				sum.Snapshots[0].VolumeID = "vol-2"
			},
			want: []string{"rule source volume"}},
		{name: "a snapshot still pending",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots[1].State = cloud.SnapshotPending
			},
			want: []string{"snapshot snap-2: pending, not completed"}},
		{name: "a snapshot of a volume that is not the TidbCluster's TiKV",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				c.Snapshots[1].VolumeID, sum.Snapshots[1].VolumeID = "vol-9", "vol-9"
			},
			want: []string{"snapshot snap-2: of volume vol-9, which is not a TiKV volume of TidbCluster tidb/basic", "TiKV volume vol-2: 0 snapshots"}},
		{name: "a TiKV volume without a snapshot",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Volumes = append(c.Volumes, "vol-3")
			},
			want: []string{"TiKV volume vol-3: 0 snapshots, want exactly one"}},
		{name: "two snapshots of one TiKV volume",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				c.Snapshots = append(c.Snapshots, snapshot("snap-3", "vol-1"))
				sum.Snapshots = append(sum.Snapshots, brsnapshot.Snapshot{StoreID: 3, VolumeID: "vol-1", SnapshotID: "snap-3"})
			},
			want: []string{"TiKV volume vol-1: 2 snapshots, want exactly one"}},
		{name: "a snapshot named twice",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				sum.Snapshots = append(sum.Snapshots, sum.Snapshots[0])
			},
			want: []string{"snapshot snap-1: named twice"}},
		{name: "no snapshot at all",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				sum.Snapshots = nil
			},
			want: []string{"the result names no snapshot", "TiKV volume vol-1: 0 snapshots", "TiKV volume vol-2: 0 snapshots"}},
		{name: "snapshots started before the backup ts",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				c.Snapshots[1].Started = tsAt.Add(-time.Minute)
			},
			want: []string{"is after snapshot snap-2 started"}},
		{name: "a backup ts older than any pause holds",
			mut: func(m *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				m.Spec.Template.VolumeBackupInitJobMaxActiveSeconds = ptr.To[int32](90)
				c.Snapshots[1].Started = tsAt.Add(90*time.Second + confirmSkew + time.Second)
			},
			want: []string{"is more than the pause's deadline (1m30s) before snapshot snap-2 started"}},
		{name: "a member created after the backup ts (its plane answered late)",
			mut: func(m *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				m.CreationTimestamp = metav1.NewTime(tsAt.Add(time.Minute))
				c.Snapshots[0].Started = tsAt.Add(2 * time.Minute)
				c.Snapshots[1].Started = tsAt.Add(2 * time.Minute)
			}},
		{name: "within the clock skew both ways",
			mut: func(m *dpv1alpha1.VolumeBackupMember, c *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				m.Spec.Template.VolumeBackupInitJobMaxActiveSeconds = ptr.To[int32](90)
				c.Snapshots[0].Started = tsAt.Add(-confirmSkew + time.Second)
				c.Snapshots[1].Started = tsAt.Add(90*time.Second + confirmSkew - time.Second)
			}},
		{name: "a result of another backup",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				sum.BackupID = "uid-other"
			},
			want: []string{`the result names backup "uid-other", not this member's uid-1`}},
		{name: "a report at another ts than the manager's",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, ts *uint64, _ *brsnapshot.Result) {
				*ts = backupTS - 1
			},
			want: []string{fmt.Sprintf("the step reports backup ts %d (result %d), the member's spec.backupTS is %d", backupTS-1, backupTS, backupTS)}},
		{name: "a result at another ts than the manager's",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				sum.ResolvedTS = 7
			},
			want: []string{"(result 7)"}},
		{name: "no backup ts in the spec",
			mut: func(m *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, _ *brsnapshot.Result) {
				m.Spec.BackupTS = ""
			},
			want: []string{`spec.backupTS "" is not the TSO the manager asked for`}},
		{name: "many mismatches: the first ten are named",
			mut: func(_ *dpv1alpha1.VolumeBackupMember, _ *Confirmation, _ *uint64, sum *brsnapshot.Result) {
				for i := range 12 {
					sum.Snapshots = append(sum.Snapshots, brsnapshot.Snapshot{SnapshotID: fmt.Sprintf("snap-x%d", i)})
				}
			},
			want: []string{`snapshot "snap-x0"`, "and 2 more"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, c, ts, sum := base()
			tt.mut(m, c, &ts, &sum)
			got := confirm(m, c, ts, sum)
			if len(tt.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("mismatches %q, want none", got)
				}
				return
			}
			text := strings.Join(got, "; ")
			at := 0
			for _, w := range tt.want {
				i := strings.Index(text[at:], w)
				if i < 0 {
					t.Fatalf("mismatches %q: want %q (after position %d)", got, w, at)
				}
				at += i + len(w)
			}
		})
	}
}

// fakeCluster is cluster() as objects an API server would hold.
func fakeCluster() client.Reader {
	c := cluster()
	objs := []client.Object{c.TC}
	for i := range c.Pods {
		p := c.Pods[i].DeepCopy()
		p.Labels = tidbcluster.TiKVSelector(c.TC.Name)
		objs = append(objs, p)
	}
	for _, pvc := range c.PVCs {
		objs = append(objs, pvc)
	}
	for _, pv := range c.PVs {
		objs = append(objs, pv)
	}
	for _, n := range c.Nodes {
		objs = append(objs, n)
	}
	return fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
}

// TestForgedCompletionNeverCompletes is the negative control over the production AWS provider
// and the AWS double: a step identity's forged Completed report (with a result naming snapshots)
// while AWS holds none of them fails the member SnapshotsNotConfirmed, never Complete.
func TestForgedCompletionNeverCompletes(t *testing.T) {
	lab := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	m := member(dpv1alpha1.BackupMemberExecute, func(m *dpv1alpha1.VolumeBackupMember) {
		m.Spec.BackupTS = tsText
		m.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.BackupMemberSnapshotsCreatedCondition, Status: metav1.ConditionTrue, Reason: "R"}}
	})
	forged := report(map[string]string{
		job.StepSnapshot: mustJSON(map[string]any{"phase": "Completed", "done": 1, "total": 1, "backupTS": backupTS}),
		job.StepSnapshot + ".result": mustJSON(brsnapshot.Result{BackupID: "uid-1", ResolvedTS: backupTS,
			Snapshots: []brsnapshot.Snapshot{{StoreID: 1, VolumeID: "vol-1", SnapshotID: "snap-0123456789abcdef0"}}}),
	})
	o := obs(m, func(o *Observed) { o.Snapshot, o.Report = active(snapName), forged })
	if !NeedsConfirmation(m, o.Snapshot, o.Report) {
		t.Fatal("a Completed report with a result needs no confirmation")
	}
	o.Confirm = ObserveConfirmation(context.Background(), fakeCluster(), lab.Provider, o)
	if o.Confirm.CloudErr != nil || o.Confirm.DiscoveryErr != nil || len(o.Confirm.Volumes) != 1 || o.Confirm.Volumes[0] != "vol-1" {
		t.Fatalf("confirmation %+v: want vol-1 discovered and AWS answering", o.Confirm)
	}
	r := Plan(o, t0)
	if apimeta.IsStatusConditionTrue(r.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition) {
		t.Fatalf("a forged report completed the member: %+v", r.Status.Conditions)
	}
	f := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition)
	if f == nil || f.Status != metav1.ConditionTrue || f.Reason != dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason ||
		!strings.Contains(f.Message, `snapshot "snap-0123456789abcdef0": not found in AWS`) || !strings.Contains(f.Message, "TiKV volume vol-1: 0 snapshots") {
		t.Fatalf("Failed = %+v, want SnapshotsNotConfirmed naming the snapshot and the volume", f)
	}
	// Failed, the member is not confirmed again.
	m.Status = r.Status
	if NeedsConfirmation(m, o.Snapshot, o.Report) {
		t.Error("a failed member is confirmed again")
	}
}

// describedAll describes every id asked for as a completed snapshot of this backup.
type describedAll struct{}

func (describedAll) DescribeSnapshots(_ context.Context, ids []string) ([]cloud.Snapshot, error) {
	out := make([]cloud.Snapshot, 0, len(ids))
	for _, id := range ids {
		out = append(out, snapshot(id, "vol-"+strings.TrimPrefix(id, "snap-")))
	}
	return out, nil
}

// TestConfirmationUsesTheVolumesHandedTheStep: a member that recorded the TiKV volumes it handed
// its snapshot step is confirmed against those, not against what TiKV has become since (a
// store added or replaced while the snapshots completed; here the TidbCluster is even gone);
// one without a record rediscovers them.
func TestConfirmationUsesTheVolumesHandedTheStep(t *testing.T) {
	sum := brsnapshot.Result{BackupID: "uid-1", ResolvedTS: backupTS, Snapshots: []brsnapshot.Snapshot{
		{StoreID: 1, VolumeID: "vol-1", SnapshotID: "snap-1"}, {StoreID: 2, VolumeID: "vol-2", SnapshotID: "snap-2"}}}
	o := obs(member(dpv1alpha1.BackupMemberExecute, func(m *dpv1alpha1.VolumeBackupMember) {
		m.Spec.BackupTS = tsText
		m.Status.TiKVVolumes = []string{"vol-1", "vol-2"}
	}), func(o *Observed) {
		o.TC = nil
		o.Report = report(map[string]string{job.StepSnapshot + ".result": mustJSON(sum)})
	})
	c := ObserveConfirmation(context.Background(), nil, describedAll{}, o)
	if c.DiscoveryErr != nil || c.CloudErr != nil || !slices.Equal(c.Volumes, []string{"vol-1", "vol-2"}) || len(c.Snapshots) != 2 {
		t.Fatalf("confirmation %+v, want the recorded volumes and both snapshots described", c)
	}
	if bad := confirm(o.Member, c, backupTS, sum); len(bad) != 0 {
		t.Errorf("mismatches %v, want none", bad)
	}
	o.Member.Status.TiKVVolumes = nil
	if c := ObserveConfirmation(context.Background(), nil, describedAll{}, o); c.DiscoveryErr == nil {
		t.Errorf("without a record and without the TidbCluster: %+v, want a discovery error", c)
	}
}
