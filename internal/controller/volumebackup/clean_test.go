package volumebackup

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestPlanTellsMembersTheBackupFailed: every member of a failed VolumeBackup is told so
// (spec.backupFailed), the members whose own snapshots completed too, and before the backup's
// deletion deletes it; a member of a complete backup, or of one deleted while it ran, is never
// told. The agent reads it with the member's cleanPolicy: OnFailure then cleans every plane of
// a failed backup, Retain none (backupmember's TestPlanDeletionCleanPolicy).
func TestPlanTellsMembersTheBackupFailed(t *testing.T) {
	told := func(m Member) Member { m.BackupFailed = true; return m }
	resumedInit := func() Member { m := member(exec, inited, started, done, resumed); m.ResumeGC = true; return m }
	failedStatus := func(b *fedv1alpha1.VolumeBackup) {
		b.Status.Initializer = "az1"
		b.Status.TimeStarted = &metav1.Time{Time: t0}
		b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupFailedCondition, Status: metav1.ConditionTrue,
			Reason: fedv1alpha1.MemberFailedReason, LastTransitionTime: metav1.NewTime(t0)}}
	}
	completeStatus := func(b *fedv1alpha1.VolumeBackup) {
		b.Status.Initializer = "az1"
		b.Status.TimeStarted = &metav1.Time{Time: t0}
		b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue,
			Reason: fedv1alpha1.AllCompleteReason, LastTransitionTime: metav1.NewTime(t0)}}
	}
	deleted := func(b *fedv1alpha1.VolumeBackup) { now := metav1.NewTime(t0); b.DeletionTimestamp = &now }
	for _, tt := range []struct {
		name      string
		mutate    []func(*fedv1alpha1.VolumeBackup)
		members   map[string]Member
		reachable map[string]bool
		told      []string // the planes MarkFailed goes to, in order
	}{
		{
			name:    "one plane failed, two completed their snapshots: all three are told",
			members: map[string]Member{"az1": resumedInit(), "az2": member(exec, failedC), "az3": member(exec, started, done)},
			told:    []string{"az1", "az2", "az3"},
		},
		{
			name:    "all complete: none is told",
			members: map[string]Member{"az1": resumedInit(), "az2": member(exec, started, done), "az3": member(exec, started, done)},
		},
		{
			name:      "failed before: the members not told yet are, an unreachable one once it answers",
			mutate:    []func(*fedv1alpha1.VolumeBackup){failedStatus},
			members:   map[string]Member{"az1": told(member(tear, inited, started, done, resumed)), "az2": member(tear, failedC)},
			reachable: map[string]bool{"az1": true, "az2": true},
			told:      []string{"az2"},
		},
		{
			name:    "a failed backup deleted: a member not told yet is told before it is deleted",
			mutate:  []func(*fedv1alpha1.VolumeBackup){failedStatus, deleted},
			members: map[string]Member{"az1": told(member(tear, done)), "az2": member(tear, failedC), "az3": member(tear, done)},
			told:    []string{"az2", "az3"},
		},
		{
			name:    "a complete backup deleted: none is told",
			mutate:  []func(*fedv1alpha1.VolumeBackup){completeStatus, deleted},
			members: map[string]Member{"az1": member(tear, done), "az2": member(tear, done), "az3": member(tear, done)},
		},
		{
			name:    "a backup deleted while it ran: none is told (each member's own outcome decides)",
			mutate:  []func(*fedv1alpha1.VolumeBackup){deleted},
			members: map[string]Member{"az1": member(exec, inited, started), "az2": member(exec, started), "az3": member(exec, started)},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := backup()
			for _, f := range tt.mutate {
				f(b)
			}
			o := Observed{Backup: b, Members: tt.members, Known: all(), Reachable: tt.reachable}
			if o.Reachable == nil {
				o.Reachable = all()
			}
			r := Plan(o, t0.Add(time.Minute))
			var got []string
			for i, a := range r.Actions {
				if a.Kind != MarkFailed {
					continue
				}
				got = append(got, a.Cluster)
				// The plane's actions apply in order and stop at the first error: the mark
				// must come before the member's deletion.
				if j := slices.Index(r.Actions, Action{Kind: DeleteMember, Cluster: a.Cluster}); j >= 0 && j < i {
					t.Errorf("%s is deleted before it is told: %+v", a.Cluster, r.Actions)
				}
			}
			if !slices.Equal(got, tt.told) {
				t.Errorf("told %v, want %v; actions %+v", got, tt.told, r.Actions)
			}
		})
	}
}
