package backupmember

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

// TestStalledSnapshotWait: the snapshot step's wait for its snapshots is bounded by its
// progress, not by its length. A wait whose progress has not moved for stallTimeout fails the
// member with ProgressStalled (the manager then tears the backup down, and the teardown stops
// the step, which deletes its snapshots); one that moved within the window goes on, and the
// member is looked at again when the window would end, so nothing polls. A step that has not
// stamped progressAt yet counts from when every snapshot started.
func TestStalledSnapshotWait(t *testing.T) {
	started := t0.Add(-10 * time.Hour)
	execute := func(m *dpv1alpha1.VolumeBackupMember) {
		m.Spec.BackupTS = tsText
		m.Spec.Template.StallTimeout = &metav1.Duration{Duration: 2 * time.Hour}
	}
	waiting := func(progressAt *time.Time) job.Report {
		doc := map[string]any{"phase": job.PhaseWaiting, "done": 1, "total": 4, "percent": 37.5, "backupTS": backupTS, "startedAt": started}
		if progressAt != nil {
			doc["progressAt"] = *progressAt
		}
		return report(map[string]string{job.StepSnapshot: mustJSON(doc)})
	}
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	for _, tt := range []struct {
		name    string
		phase   dpv1alpha1.BackupMemberPhase
		report  job.Report
		snap    job.State
		stalled bool
		requeue time.Duration // 0: none
		actions []ActionKind
	}{
		{name: "no progress for longer than stallTimeout", phase: dpv1alpha1.BackupMemberExecute,
			report: waiting(at(-2*time.Hour - time.Second)), snap: active(snapName), stalled: true},
		{name: "exactly stallTimeout without progress", phase: dpv1alpha1.BackupMemberExecute,
			report: waiting(at(-2 * time.Hour)), snap: active(snapName), stalled: true},
		{name: "progress within the window: requeued at progressAt+stallTimeout", phase: dpv1alpha1.BackupMemberExecute,
			report: waiting(at(-90 * time.Minute)), snap: active(snapName), requeue: 30 * time.Minute},
		{name: "no progressAt (the step stamps one on every Waiting report): not judged", phase: dpv1alpha1.BackupMemberExecute,
			report: waiting(nil), snap: active(snapName)},
		{name: "a Job already ending (deleted) is not judged", phase: dpv1alpha1.BackupMemberExecute,
			report: waiting(at(-3 * time.Hour)), snap: func() job.State { s := active(snapName); s.Deleting = true; return s }()},
		{name: "the teardown that follows stops the stalled step; the reason stays", phase: dpv1alpha1.BackupMemberTeardown,
			report: waiting(at(-3 * time.Hour)), snap: active(snapName), stalled: true, actions: []ActionKind{DeleteJob}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := obs(member(tt.phase, execute), func(o *Observed) { o.Snapshot, o.Report = tt.snap, tt.report })
			r := planned(t, o)
			f := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition)
			switch {
			case tt.stalled && (f == nil || f.Reason != dpv1alpha1.ProgressStalledReason):
				t.Fatalf("Failed = %+v, want reason %s", f, dpv1alpha1.ProgressStalledReason)
			case tt.stalled:
				for _, part := range []string{"snapshot step", "1 of 4 snapshots completed", "37.50%", "2h0m0s", "stallTimeout"} {
					if !strings.Contains(f.Message, part) {
						t.Errorf("message %q does not say %q", f.Message, part)
					}
				}
			case f != nil && f.Status == metav1.ConditionTrue:
				t.Errorf("Failed = %+v, want none", f)
			}
			if r.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter %s, want %s", r.RequeueAfter, tt.requeue)
			}
			if got := kinds(r.Actions); len(got) != len(tt.actions) || len(got) > 0 && got[0] != tt.actions[0] {
				t.Errorf("actions %v, want %v", got, tt.actions)
			}
		})
	}
}
