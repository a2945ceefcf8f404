package backupmember

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// planned is Plan at t0, checking the property every result has: its phase is the one phaseOf
// derives from the rest of its status, the member and the steps' reports, so no step of
// Plan sets the phase. The Plan tables run through it.
func planned(t *testing.T, o Observed) Result {
	t.Helper()
	r := Plan(o, t0)
	if want := phaseOf(&r.Status, o.Member, runningOf(o.Report)); r.Status.Phase != want {
		t.Errorf("phase %q, but the rest of the status gives %q", r.Status.Phase, want)
	}
	return r
}

// TestPhaseOf is phaseOf's table, every phase reached at least once.
func TestPhaseOf(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason}
	}
	var (
		armed       = c(dpv1alpha1.BackupMemberArmedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotArmedReason)
		initialized = c(dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
		created     = c(dpv1alpha1.BackupMemberSnapshotsCreatedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsStartedReason)
		resumed     = c(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseLiftedReason)
		complete    = c(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
		failed      = c(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason)
		sizing      = c(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizingReason)
	)
	cleaned := func(reason string) metav1.Condition {
		return c(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, reason)
	}
	spec := func(phase dpv1alpha1.BackupMemberPhase, startPause bool, ts string) *dpv1alpha1.VolumeBackupMember {
		return member(phase, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.StartPause, m.Spec.BackupTS = startPause, ts })
	}
	gone := func(m *dpv1alpha1.VolumeBackupMember) *dpv1alpha1.VolumeBackupMember {
		m.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		return m
	}
	var none, pause, snap, both = running{}, running{pause: true}, running{snapshot: true}, running{pause: true, snapshot: true}
	tests := []struct {
		name  string
		conds []metav1.Condition
		m     *dpv1alpha1.VolumeBackupMember
		run   running
		want  string
	}{
		{"a new member whose steps cannot start yet", nil, spec(dpv1alpha1.BackupMemberExecute, false, ""), none, PhasePending},
		{"an initializer whose armed pause reported, before the go", nil, spec(dpv1alpha1.BackupMemberInitialize, false, ""), pause, PhasePending},
		{"an initializer whose armed pause reported, its go given", nil, spec(dpv1alpha1.BackupMemberInitialize, true, ""), pause, PhaseInitializing},
		{"the go given, the pause step not reported (its Job may exist)", nil, spec(dpv1alpha1.BackupMemberInitialize, true, ""), none, PhasePending},
		{"the armed snapshot step reported", nil, spec(dpv1alpha1.BackupMemberExecute, false, ""), snap, PhaseArmed},
		{"the armed snapshot reports Armed", []metav1.Condition{armed}, spec(dpv1alpha1.BackupMemberInitialize, false, ""), both, PhaseArmed},
		{"both armed, the go given: the pause is taken", []metav1.Condition{armed}, spec(dpv1alpha1.BackupMemberInitialize, true, ""), both, PhaseInitializing},
		{"the pause holds", []metav1.Condition{armed, initialized}, spec(dpv1alpha1.BackupMemberInitialize, true, ""), both, PhasePaused},
		{"the pause holds, the snapshot step not reported", []metav1.Condition{initialized}, spec(dpv1alpha1.BackupMemberInitialize, true, ""), pause, PhasePaused},
		{"the backup ts given, the snapshot step reported", []metav1.Condition{armed, initialized}, spec(dpv1alpha1.BackupMemberExecute, true, "1"), both, PhaseSnapshotting},
		{"the backup ts given, no snapshot report", nil, spec(dpv1alpha1.BackupMemberExecute, false, "1"), none, PhasePending},
		{"every snapshot started", []metav1.Condition{armed, created, resumed}, spec(dpv1alpha1.BackupMemberExecute, false, "1"), snap, PhaseSnapshotsCreated},
		{"every snapshot completed, sizing", []metav1.Condition{armed, created, complete, sizing}, spec(dpv1alpha1.BackupMemberTeardown, false, "1"), none, PhaseComplete},
		{"failed", []metav1.Condition{armed, created, failed}, spec(dpv1alpha1.BackupMemberTeardown, false, "1"), snap, PhaseFailed},
		{"deleted", []metav1.Condition{complete, cleaned(dpv1alpha1.BackupMemberCleaningReason)}, gone(spec(dpv1alpha1.BackupMemberTeardown, false, "1")), none, PhaseCleaning},
		{"deleted before any clean was tried", []metav1.Condition{failed}, gone(spec(dpv1alpha1.BackupMemberTeardown, false, "1")), snap, PhaseCleaning},
		{"deleted, retained", []metav1.Condition{complete, cleaned(dpv1alpha1.BackupMemberRetainedReason)}, gone(spec(dpv1alpha1.BackupMemberTeardown, false, "1")), none, PhaseCleaning},
		{"deleted, a clean attempt failed", []metav1.Condition{cleaned(dpv1alpha1.BackupMemberCleanFailedReason)}, gone(spec(dpv1alpha1.BackupMemberTeardown, false, "1")), none, PhaseCleanFailed},
		{"deleted, the clean gave up", []metav1.Condition{cleaned(dpv1alpha1.BackupMemberCleanGaveUpReason)}, gone(spec(dpv1alpha1.BackupMemberTeardown, false, "1")), none, PhaseCleanFailed},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := dpv1alpha1.VolumeBackupMemberStatus{Conditions: tc.conds}
			if got := phaseOf(&st, tc.m, tc.run); got != tc.want {
				t.Errorf("phaseOf = %s, want %s", got, tc.want)
			}
		})
		seen[tc.want] = true
	}
	for _, p := range []string{PhasePending, PhaseInitializing, PhasePaused, PhaseSnapshotting, PhaseArmed, PhaseSnapshotsCreated,
		PhaseComplete, PhaseFailed, PhaseCleaning, PhaseCleanFailed} {
		if !seen[p] {
			t.Errorf("no row gives phase %s", p)
		}
	}
}
