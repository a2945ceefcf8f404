package volumerestore

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// checkPhase is the property every Plan result has: its phase is the one phaseOf derives from
// the rest of its status, so no branch of Plan sets the phase. The Plan table checks it on
// every row.
func checkPhase(t *testing.T, r Result) {
	t.Helper()
	if want := phaseOf(&r.Status); r.Status.Phase != want {
		t.Errorf("phase %q, but the rest of the status gives %q", r.Status.Phase, want)
	}
}

// TestPhaseOf is phaseOf's table, every phase reached at least once.
func TestPhaseOf(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason}
	}
	var (
		ready    = c(fedv1alpha1.VolumeRestoreReadyCondition, metav1.ConditionFalse, fedv1alpha1.VolumeRestoreRestoringVolumesReason)
		volumes  = c(fedv1alpha1.VolumeRestoreVolumeCompleteCondition, metav1.ConditionTrue, "R")
		warm     = c(fedv1alpha1.VolumeRestoreWarmUpCompleteCondition, metav1.ConditionTrue, fedv1alpha1.VolumeRestoreWarmedUpReason)
		tikv     = c(fedv1alpha1.VolumeRestoreTikvCompleteCondition, metav1.ConditionTrue, fedv1alpha1.VolumeRestoreRestoringVolumesReason)
		data     = c(fedv1alpha1.VolumeRestoreDataCompleteCondition, metav1.ConditionTrue, fedv1alpha1.VolumeRestoreRestoringDataReason)
		complete = c(fedv1alpha1.VolumeRestoreCompleteCondition, metav1.ConditionTrue, fedv1alpha1.AllCompleteReason)
		failed   = c(fedv1alpha1.VolumeRestoreFailedCondition, metav1.ConditionTrue, fedv1alpha1.MemberFailedReason)
		tikvNot  = c(fedv1alpha1.VolumeRestoreTikvCompleteCondition, metav1.ConditionFalse, "R")
	)
	start := &metav1.Time{Time: t0}
	st := func(conds ...metav1.Condition) fedv1alpha1.VolumeRestoreStatus {
		return fedv1alpha1.VolumeRestoreStatus{TimeStarted: start, Conditions: conds}
	}
	tests := []struct {
		name string
		st   fedv1alpha1.VolumeRestoreStatus
		want fedv1alpha1.VolumeRestorePhase
	}{
		{"never planned", fedv1alpha1.VolumeRestoreStatus{}, fedv1alpha1.VolumeRestorePending},
		{"started: creating members", st(ready), fedv1alpha1.VolumeRestoreRunning},
		{"a sync warm-up done, TiKV not up everywhere yet", st(warm, ready), fedv1alpha1.VolumeRestoreRunning},
		{"TikvComplete not True counts for nothing", st(tikvNot, ready), fedv1alpha1.VolumeRestoreRunning},
		{"every volume created", st(volumes), fedv1alpha1.VolumeRestoreVolumeComplete},
		{"every TiKV up: restoring data", st(tikv, ready), fedv1alpha1.VolumeRestoreTikvComplete},
		{"every TiKV up, VolumeComplete too", st(volumes, tikv), fedv1alpha1.VolumeRestoreTikvComplete},
		{"data recovered: finishing", st(tikv, data), fedv1alpha1.VolumeRestoreDataComplete},
		{"data recovered, an async warm-up reads", st(tikv, data, c(fedv1alpha1.VolumeRestoreReadyCondition, metav1.ConditionFalse, fedv1alpha1.VolumeRestoreWarmingUpReason)),
			fedv1alpha1.VolumeRestoreDataComplete},
		{"complete", st(tikv, data, warm, complete), fedv1alpha1.VolumeRestoreComplete},
		{"failed while restoring data", st(tikv, failed), fedv1alpha1.VolumeRestoreFailed},
		{"failed before it started (the start is stamped with the failure)", fedv1alpha1.VolumeRestoreStatus{Conditions: []metav1.Condition{failed}},
			fedv1alpha1.VolumeRestoreFailed},
	}
	seen := map[fedv1alpha1.VolumeRestorePhase]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := phaseOf(&tc.st); got != tc.want {
				t.Errorf("phaseOf = %s, want %s", got, tc.want)
			}
		})
		seen[tc.want] = true
	}
	for _, p := range []fedv1alpha1.VolumeRestorePhase{fedv1alpha1.VolumeRestorePending, fedv1alpha1.VolumeRestoreRunning,
		fedv1alpha1.VolumeRestoreVolumeComplete, fedv1alpha1.VolumeRestoreTikvComplete, fedv1alpha1.VolumeRestoreDataComplete,
		fedv1alpha1.VolumeRestoreComplete, fedv1alpha1.VolumeRestoreFailed} {
		if !seen[p] {
			t.Errorf("no row gives phase %s", p)
		}
	}
}
