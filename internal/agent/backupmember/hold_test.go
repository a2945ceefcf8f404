package backupmember

import (
	"testing"
	"time"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

// TestHoldInWindow is holdInWindow's table: the agent holds back its status on a member whose
// own pause holds GC, for at most WindowQuiet after the pause took hold, and never a failure,
// a completion, a lift or a deletion.
func TestHoldInWindow(t *testing.T) {
	pause := func(doc map[string]any) job.Report { return report(map[string]string{job.StepPause: mustJSON(doc)}) }
	ready := map[string]any{"phase": "Ready", "backupTS": backupTS, "stores": 3, "gcPausedAt": pausedAt}
	started := map[string]string{job.StepPause: mustJSON(ready),
		job.StepSnapshot: mustJSON(map[string]any{"phase": "Started", "total": 1, "backupTS": backupTS, "startedAt": pausedAt.Add(time.Second)})}
	execute := func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS, m.Spec.StartPause = tsText, true }
	for _, tt := range []struct {
		name string
		o    Observed
		now  time.Time
		want time.Duration
	}{
		{"the pause took hold just now: held for the quiet time", obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
			o.Pause, o.Report = active(pauseName), pause(ready)
		}), pausedAt, WindowQuiet},
		{"the snapshots started, the pause still holds: held for what is left", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Pause, o.Snapshot, o.Report = active(pauseName), active(snapName), report(started)
		}), pausedAt.Add(time.Second), WindowQuiet - time.Second},
		{"the release asked: still held until the pause reports the lift", obs(member(dpv1alpha1.BackupMemberExecute, execute, func(m *dpv1alpha1.VolumeBackupMember) {
			m.Spec.ResumeGC = true
		}), func(o *Observed) {
			o.Pause, o.Snapshot, o.Report = active(pauseName), active(snapName), report(started)
		}), pausedAt.Add(2 * time.Second), WindowQuiet - 2*time.Second},
		{"the pause's clock far ahead: one quiet time per pass at most", obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
			o.Pause, o.Report = active(pauseName), pause(ready)
		}), pausedAt.Add(-time.Hour), WindowQuiet},
		{"the quiet time is over: written", obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
			o.Pause, o.Report = active(pauseName), pause(ready)
		}), pausedAt.Add(WindowQuiet), 0},
		{"the pause lifted: written", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Pause = active(pauseName)
			o.Report = pause(map[string]any{"phase": "Stopped", "backupTS": backupTS, "stores": 3, "gcPausedAt": pausedAt, "liftedAt": pausedAt.Add(time.Second)})
		}), pausedAt.Add(time.Second), 0},
		{"the pause not ready yet: nothing to hold", obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
			o.Pause, o.Report = active(pauseName), pause(map[string]any{"phase": "Starting"})
		}), pausedAt, 0},
		{"the pause Job gone: written", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Pause, o.Report = failed(pauseName, "BackoffLimitExceeded"), pause(ready)
		}), pausedAt, 0},
		{"a failure: written at once", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Pause = active(pauseName)
			o.Report = report(map[string]string{job.StepPause: mustJSON(ready), job.StepSnapshot: mustJSON(map[string]any{"phase": "Failed", "error": "throttled"})})
		}), pausedAt, 0},
		{"a deletion: written at once", obs(member(dpv1alpha1.BackupMemberExecute, execute, deleting(fedv1alpha1.CleanPolicyDelete)), func(o *Observed) {
			o.Pause, o.Report = active(pauseName), pause(ready)
		}), pausedAt, 0},
		{"the release asked: the pause lifts on the spec, beside a held status", obs(member(dpv1alpha1.BackupMemberExecute, execute, func(m *dpv1alpha1.VolumeBackupMember) {
			m.Spec.ResumeGC = true
		}), func(o *Observed) {
			o.Pause, o.Snapshot, o.Report = active(pauseName), active(snapName), report(started)
		}), pausedAt, WindowQuiet},
		{"a Job to create: written with it", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Pause, o.Report, o.Cluster = active(pauseName), pause(ready), cluster()
		}), pausedAt, 0},
		{"a member without a pause: nothing to hold", obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
			o.Snapshot, o.Report = active(snapName), report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Started", "total": 1, "backupTS": backupTS})})
		}), pausedAt, 0},
	} {
		r := Plan(tt.o, tt.now)
		if tt.o.Member.Spec.ResumeGC && len(r.Actions) != 0 {
			t.Errorf("%s: actions %v, want none: the pause sees spec.resumeGC itself", tt.name, r.Actions)
		}
		if r.HoldStatus != tt.want {
			t.Errorf("%s: hold %v, want %v (phase %s, actions %v)", tt.name, r.HoldStatus, tt.want, r.Status.Phase, r.Actions)
		}
	}
}
