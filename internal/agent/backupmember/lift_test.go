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

// TestPlanLift: a pause that ended without lifting what it recorded placing in PD gets one lift
// Job, and GCResumed is True only once the pause or the lift reports PD holds nothing of it.
func TestPlanLift(t *testing.T) {
	liftName := job.Name("fed-b1", job.StepLift)
	identity := map[string]any{"serviceSafePoint": "fedbr-1", "pausedSchedulers": []string{"balance-leader-scheduler"},
		"scheduleConfig": []map[string]string{{"key": "schedule.leader-schedule-limit", "original": "4", "paused": "0"}}}
	pauseDoc := func(phase string, extra map[string]any) string {
		doc := map[string]any{"phase": phase, "backupTS": backupTS, "stores": 3, "gcPausedAt": pausedAt}
		for k, v := range extra {
			doc[k] = v
		}
		return mustJSON(doc)
	}
	with := func(a, b map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	killed := pauseDoc("Ready", identity) // the pause's last report before it died
	ready := withCond(dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
	resume := func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS, m.Spec.ResumeGC = tsText, true }
	liftedCond := withCond(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberLiftedReason)
	gcResumed := dpv1alpha1.BackupMemberGCResumedCondition
	liftedAtLift := t0.Add(time.Minute)
	// lobs observes the member with its snapshot step running.
	lobs := func(m *dpv1alpha1.VolumeBackupMember, mut func(*Observed)) Observed {
		return obs(m, func(o *Observed) { o.Snapshot = active(snapName) }, mut)
	}

	for _, tt := range []struct {
		name string
		o    Observed
		want want
	}{
		{
			name: "pause killed while holding: the member fails, one lift Job starts, GC not resumed",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = tsText }), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: killed})
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, notTrue: []string{gcResumed}, phase: PhaseFailed,
				reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftingReason,
					dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseJobFailedReason},
				check: func(t *testing.T, r Result) {
					j := jobOf(t, r, job.StepLift).Job
					args := j.Spec.Template.Spec.Containers[0].Args
					if j.Name != liftName || strings.Join(args[:2], " ") != "br lift" || argValue(args, "--pd") != "http://pd0:2379" ||
						argValue(args, "--member") != "fed-b1" || *j.Spec.BackoffLimit != liftBackoffLimit || len(j.OwnerReferences) != 1 {
						t.Errorf("lift Job %s args %v backoff %d owners %v", j.Name, args, *j.Spec.BackoffLimit, j.OwnerReferences)
					}
					if c := apimeta.FindStatusCondition(r.Status.Conditions, gcResumed); !strings.Contains(c.Message, "fedbr-1") {
						t.Errorf("GCResumed message %q does not name the safepoint", c.Message)
					}
				}},
		},
		{
			name: "pause killed after the release (SIGKILL before it lifted): lift Job, no failure",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Pause.Suspended = true
				o.Report = report(map[string]string{job.StepPause: pauseDoc("Stopping", identity)})
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, notTrue: []string{gcResumed, dpv1alpha1.BackupMemberFailedCondition},
				reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftingReason}},
		},
		{
			name: "pause Job gone with an unlifted report: lift Job",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Report = report(map[string]string{job.StepPause: killed})
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftingReason}},
		},
		{
			name: "pause reported Failed without lifting while its Job still exits: wait for the Job",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Pause.Suspended = true
				o.Report = report(map[string]string{job.StepPause: pauseDoc("Failed", with(identity, map[string]any{"error": "remove service GC safepoint: timeout"}))})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}, check: func(t *testing.T, r Result) {
				if c := apimeta.FindStatusCondition(r.Status.Conditions, gcResumed); c != nil {
					t.Errorf("GCResumed %+v before the pause Job ended", c)
				}
			}},
		},
		{
			name: "lift running: no second Job, GC not resumed",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause, o.Lift = failed(pauseName, job.ReasonBackoffLimitExceeded), active(liftName)
				o.Report = report(map[string]string{job.StepPause: killed, job.StepLift: mustJSON(with(identity, map[string]any{"phase": "Lifting"}))})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftingReason}},
		},
		{
			name: "a lift attempt failed and its Job retries: still Lifting, no new Job",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause, o.Lift = failed(pauseName, job.ReasonBackoffLimitExceeded), active(liftName)
				o.Report = report(map[string]string{job.StepPause: killed,
					job.StepLift: mustJSON(with(identity, map[string]any{"phase": "Failed", "error": "read back what PD holds: connection refused"}))})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftingReason},
				failMatch: "connection refused"},
		},
		{
			name: "lift succeeded: GCResumed True at the lift's liftedAt",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause, o.Lift = failed(pauseName, job.ReasonBackoffLimitExceeded), succeeded(liftName)
				o.Report = report(map[string]string{job.StepPause: killed,
					job.StepLift:             mustJSON(with(identity, map[string]any{"phase": "Lifted", "liftedAt": liftedAtLift})),
					job.StepLift + ".result": mustJSON(with(identity, map[string]any{"phase": "Lifted", "liftedAt": liftedAtLift}))})
			}),
			want: want{actions: nil, true: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftedReason},
				check: func(t *testing.T, r Result) {
					if c := apimeta.FindStatusCondition(r.Status.Conditions, gcResumed); !c.LastTransitionTime.Time.Equal(liftedAtLift) {
						t.Errorf("GCResumed at %v, want the lift's liftedAt %v", c.LastTransitionTime, liftedAtLift)
					}
				}},
		},
		{
			name: "lift Job failed: LiftFailed, reported and not retried",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause, o.Lift = failed(pauseName, job.ReasonBackoffLimitExceeded), failed(liftName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: killed,
					job.StepLift: mustJSON(with(identity, map[string]any{"phase": "Failed", "error": "PD still holds paused schedulers balance-leader-scheduler"}))})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftFailedReason},
				failMatch: "PD still holds paused schedulers"},
		},
		{
			name: "lift Job gone after it failed: its report keeps LiftFailed, no new Job",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume, withCond(gcResumed, metav1.ConditionFalse, dpv1alpha1.BackupMemberLiftFailedReason)), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: killed, job.StepLift: mustJSON(map[string]any{"phase": "Failed", "error": "PD unreachable"})})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}},
		},
		{
			name: "pause lifted normally: no lift Job, GCResumed True at the pause's liftedAt",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause = succeeded(pauseName)
				o.Report = report(map[string]string{job.StepPause: pauseDoc("Stopped", with(identity, map[string]any{"liftedAt": liftedAt}))})
			}),
			want: want{actions: nil, true: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberPauseLiftedReason}},
		},
		{
			name: "pause broke and lifted itself (Failed with liftedAt): the member fails, no lift Job, GC resumed",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = tsText }), func(o *Observed) {
				o.Pause = failed(pauseName, "Error")
				o.Report = report(map[string]string{job.StepPause: pauseDoc("Failed", with(identity, map[string]any{"error": "store 2 lost its lease", "liftedAt": liftedAt}))})
			}),
			want: want{actions: nil, true: []string{gcResumed, dpv1alpha1.BackupMemberFailedCondition},
				reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberPauseLiftedReason, dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseFailedReason}},
		},
		{
			name: "pause killed without a recorded identity: nothing to lift by identity, resumed as before",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: pauseDoc("Ready", nil)})
			}),
			want: want{actions: nil, true: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberPauseEndedReason}},
		},
		{
			name: "pause killed and the TidbCluster gone: LiftFailed says why",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume), func(o *Observed) {
				o.TC = nil
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: killed})
			}),
			want: want{actions: nil, notTrue: []string{gcResumed}, reason: map[string]string{gcResumed: dpv1alpha1.BackupMemberLiftFailedReason},
				failMatch: "TidbCluster tidb/basic not found"},
		},
		{
			name: "GC resumed by the lift: nothing more",
			o: lobs(member(dpv1alpha1.BackupMemberExecute, ready, resume, liftedCond), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepPause: killed})
			}),
			want: want{actions: nil, true: []string{gcResumed}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, planned(t, tt.o), tt.want) })
	}
}
