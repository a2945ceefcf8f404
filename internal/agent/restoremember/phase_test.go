package restoremember

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// planned is Plan at t0, checking the property every result has: its phase is the one phaseOf
// derives from the rest of its status, the member and whether the agent has begun, so no step
// of Plan sets the phase. The Plan tables run through it.
func planned(t *testing.T, o Observed) Result {
	t.Helper()
	r := Plan(o, t0)
	if want := phaseOf(&r.Status, o.Member, workingOf(o.Report)); r.Status.Phase != want {
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
		volumes  = c(dpv1alpha1.RestoreMemberVolumeCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberVolumesRestoredReason)
		warm     = c(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmedUpReason)
		warming  = c(dpv1alpha1.RestoreMemberWarmUpStartedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmingUpReason)
		tikv     = c(dpv1alpha1.RestoreMemberTikvCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberTiKVStartedReason)
		data     = c(dpv1alpha1.RestoreMemberDataCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberDataRestoredReason)
		complete = c(dpv1alpha1.RestoreMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberRecoveryModeOffReason)
		failed   = c(dpv1alpha1.RestoreMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberRestoreVolumesFailedReason)
		cloud    = c(dpv1alpha1.RestoreMemberFailedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberCloudUnreachableReason)
	)
	cleaned := func(s metav1.ConditionStatus, reason string) metav1.Condition {
		return c(dpv1alpha1.RestoreMemberVolumesCleanedCondition, s, reason)
	}
	volume, dataPhase, finish := rmember(dpv1alpha1.RestoreMemberRestoreVolume), rmember(dpv1alpha1.RestoreMemberRestoreData), rmember(dpv1alpha1.RestoreMemberRestoreFinish)
	gone := rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) { m.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) })
	tests := []struct {
		name    string
		conds   []metav1.Condition
		m       *dpv1alpha1.VolumeRestoreMember
		working bool
		want    string
	}{
		{"a new member, nothing to do yet (PD has no address)", nil, volume, false, PhasePending},
		{"AWS cannot be reached yet", []metav1.Condition{cloud}, volume, false, PhasePending},
		{"restore-volumes starts", nil, volume, true, PhaseRestoringVolumes},
		{"restore-volumes runs", []metav1.Condition{cloud}, volume, true, PhaseRestoringVolumes},
		{"volumes restored, warming up", []metav1.Condition{volumes, warming}, volume, true, PhaseVolumeComplete},
		{"volumes restored, waiting for the stores", []metav1.Condition{volumes, warm}, volume, false, PhaseVolumeComplete},
		{"every store up", []metav1.Condition{volumes, warm, tikv}, volume, false, PhaseTikvComplete},
		{"restore-data asked", []metav1.Condition{volumes, warm, tikv}, dataPhase, true, PhaseRestoringData},
		{"data restored, restore-finish not asked yet", []metav1.Condition{volumes, warm, tikv, data}, dataPhase, false, PhaseDataComplete},
		{"data restored on another member, restore-finish asked", []metav1.Condition{volumes, warm, tikv}, finish, true, PhaseFinishing},
		{"the data member finishing", []metav1.Condition{volumes, warm, tikv, data}, finish, true, PhaseFinishing},
		{"complete", []metav1.Condition{volumes, warm, tikv, complete}, finish, false, PhaseComplete},
		{"failed", []metav1.Condition{volumes, failed}, volume, false, PhaseFailed},
		{"failed after restore-data was asked", []metav1.Condition{volumes, tikv, failed}, dataPhase, true, PhaseFailed},
		{"deleted", []metav1.Condition{failed, cleaned(metav1.ConditionFalse, dpv1alpha1.RestoreMemberCleaningReason)}, gone, true, PhaseCleaning},
		{"deleted, nothing said yet", nil, gone, false, PhaseCleaning},
		{"deleted, cleaned", []metav1.Condition{cleaned(metav1.ConditionTrue, dpv1alpha1.RestoreMemberCleanedReason)}, gone, true, PhaseCleaning},
		{"deleted, the volumes cannot be listed", []metav1.Condition{cleaned(metav1.ConditionFalse, dpv1alpha1.RestoreMemberCleanFailedReason)}, gone, false, PhaseCleanFailed},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := dpv1alpha1.VolumeRestoreMemberStatus{Conditions: tc.conds}
			if got := phaseOf(&st, tc.m, tc.working); got != tc.want {
				t.Errorf("phaseOf = %s, want %s", got, tc.want)
			}
		})
		seen[tc.want] = true
	}
	for _, p := range []string{PhasePending, PhaseRestoringVolumes, PhaseVolumeComplete, PhaseTikvComplete, PhaseRestoringData,
		PhaseDataComplete, PhaseFinishing, PhaseComplete, PhaseFailed, PhaseCleaning, PhaseCleanFailed} {
		if !seen[p] {
			t.Errorf("no row gives phase %s", p)
		}
	}
}
