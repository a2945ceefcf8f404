package volumebackup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestTimeTaken pins the VolumeBackup's timeTaken: timeCompleted − timeStarted, rounded to the
// second, set once when the backup completes or fails (the plan's own clock, not a member's),
// empty while it runs, never recomputed afterwards; a backup that fails before it started
// (unknown data plane) starts and ends at once. And a Failed backup keeps summing the sizes its
// members report after it failed (a failed member's size comes from its snapshot step's
// measure before cleanup, and lands after the backup failed).
func TestTimeTaken(t *testing.T) {
	startedAt := t0.Add(-90*time.Minute - 30*time.Second - 400*time.Millisecond)
	running := func(b *fedv1alpha1.VolumeBackup) {
		s := metav1.NewTime(startedAt)
		b.Status.TimeStarted = &s
	}
	finished := func(phase fedv1alpha1.VolumeBackupPhase, condition string) func(*fedv1alpha1.VolumeBackup) {
		return func(b *fedv1alpha1.VolumeBackup) {
			running(b)
			c := metav1.NewTime(startedAt.Add(5 * time.Minute))
			b.Status.TimeCompleted, b.Status.TimeTaken, b.Status.Phase, b.Status.Initializer = &c, "5m0s", phase, "az1"
			b.Status.Conditions = []metav1.Condition{{Type: condition, Status: metav1.ConditionTrue, Reason: "X"}}
		}
	}
	allDone := func() map[string]Member {
		az1 := member(exec, inited, started, done)
		az1.ResumeGC = true
		return map[string]Member{"az1": withTS(az1, "300"), "az2": withTS(member(exec, started, done), "200"), "az3": withTS(member(exec, started, done), "250")}
	}
	sizedFailed := func() Member {
		m := member(tear, failedC)
		m.Status.BackupSize = 5 << 20
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.BackupMemberSizedCondition, Status: metav1.ConditionTrue,
			Reason: dpv1alpha1.BackupMemberSizedBeforeCleanupReason})
		return m
	}
	for _, tt := range []struct {
		name      string
		mutate    func(*fedv1alpha1.VolumeBackup)
		members   map[string]Member
		known     map[string]bool
		wantPhase fedv1alpha1.VolumeBackupPhase
		// wantTaken is the timeTaken; wantCompleted whether timeCompleted is now (else as before).
		wantTaken     string
		wantCompleted bool
		wantSize      int64
	}{
		{name: "complete: now − timeStarted, rounded to the second", mutate: running, members: allDone(),
			wantPhase: fedv1alpha1.VolumeBackupComplete, wantTaken: "1h30m30s", wantCompleted: true, wantSize: 4500},
		{name: "a member failed: the same measure, up to the failure", mutate: running,
			members:   map[string]Member{"az1": member(exec, inited), "az2": member(exec, failedC), "az3": member(exec)},
			wantPhase: fedv1alpha1.VolumeBackupFailed, wantTaken: "1h30m30s", wantCompleted: true},
		{name: "failed before it started (unknown data plane): started and ended now", known: map[string]bool{"az1": true, "az2": true},
			wantPhase: fedv1alpha1.VolumeBackupFailed, wantTaken: "0s", wantCompleted: true},
		{name: "running: no timeTaken", mutate: running,
			members:   map[string]Member{"az1": member(exec, inited, started), "az2": member(exec, started), "az3": member(exec)},
			wantPhase: fedv1alpha1.VolumeBackupRunning},
		{name: "complete, seen again later: not recomputed", mutate: finished(fedv1alpha1.VolumeBackupComplete, fedv1alpha1.VolumeBackupCompleteCondition),
			members: allDone(), wantPhase: fedv1alpha1.VolumeBackupComplete, wantTaken: "5m0s", wantSize: 4500},
		{name: "failed, seen again later: not recomputed, and the failed member's later size is summed",
			mutate:  finished(fedv1alpha1.VolumeBackupFailed, fedv1alpha1.VolumeBackupFailedCondition),
			members: map[string]Member{"az1": member(tear, inited, resumed), "az2": sizedFailed(), "az3": member(tear)},
			// az1 has snapshotted nothing, az3 too: the failed member's measure is the backup's size.
			wantPhase: fedv1alpha1.VolumeBackupFailed, wantTaken: "5m0s", wantSize: 5 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := backup()
			if tt.mutate != nil {
				tt.mutate(b)
			}
			before := b.Status.TimeCompleted
			o := Observed{Backup: b, Members: tt.members, Known: tt.known, Reachable: all()}
			if o.Members == nil {
				o.Members = map[string]Member{}
			}
			if o.Known == nil {
				o.Known = all()
			}
			r := Plan(o, t0)
			st := r.Status
			if st.Phase != tt.wantPhase {
				t.Fatalf("phase %s, want %s", st.Phase, tt.wantPhase)
			}
			if st.TimeTaken != tt.wantTaken {
				t.Errorf("timeTaken %q, want %q", st.TimeTaken, tt.wantTaken)
			}
			switch {
			case tt.wantCompleted && (st.TimeCompleted == nil || !st.TimeCompleted.Equal(&metav1.Time{Time: t0})):
				t.Errorf("timeCompleted %v, want now (%v)", st.TimeCompleted, t0)
			case !tt.wantCompleted && !st.TimeCompleted.Equal(before):
				t.Errorf("timeCompleted %v, want it unchanged (%v)", st.TimeCompleted, before)
			}
			if tt.wantTaken != "" && st.TimeStarted != nil && st.TimeCompleted != nil {
				if d, err := time.ParseDuration(st.TimeTaken); err != nil || d != st.TimeCompleted.Sub(st.TimeStarted.Time).Round(time.Second) {
					t.Errorf("timeTaken %q is not timeCompleted − timeStarted (%v)", st.TimeTaken, st.TimeCompleted.Sub(st.TimeStarted.Time))
				}
			}
			if st.BackupSize != tt.wantSize {
				t.Errorf("backupSize %d, want %d", st.BackupSize, tt.wantSize)
			}
		})
	}
}
