package volumebackup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// checkPhase is the property every Plan result has: its phase is the one phaseOf derives from
// the rest of its status, so no branch of Plan sets the phase. The Plan tables check it on
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
	ready := func(reason string) metav1.Condition {
		return c(fedv1alpha1.VolumeBackupReadyCondition, metav1.ConditionFalse, reason)
	}
	var (
		gcPaused     = c(fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupInitializingReason)
		created      = c(fedv1alpha1.VolumeBackupSnapshotsCreatedCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupAllSnapshotsStartedReason)
		complete     = c(fedv1alpha1.VolumeBackupCompleteCondition, metav1.ConditionTrue, fedv1alpha1.AllCompleteReason)
		failed       = c(fedv1alpha1.VolumeBackupFailedCondition, metav1.ConditionTrue, fedv1alpha1.MemberFailedReason)
		cleaning     = c(fedv1alpha1.VolumeBackupCleanedCondition, metav1.ConditionFalse, fedv1alpha1.VolumeBackupCleaningReason)
		cleanFailed  = c(fedv1alpha1.VolumeBackupCleanedCondition, metav1.ConditionFalse, fedv1alpha1.VolumeBackupCleanFailedReason)
		cleaned      = c(fedv1alpha1.VolumeBackupCleanedCondition, metav1.ConditionTrue, "Cleaned")
		createdFalse = c(fedv1alpha1.VolumeBackupSnapshotsCreatedCondition, metav1.ConditionFalse, "R")
	)
	start := &metav1.Time{Time: t0}
	st := func(initializer string, conds ...metav1.Condition) fedv1alpha1.VolumeBackupStatus {
		return fedv1alpha1.VolumeBackupStatus{TimeStarted: start, Initializer: initializer, Conditions: conds}
	}
	tests := []struct {
		name string
		st   fedv1alpha1.VolumeBackupStatus
		want fedv1alpha1.VolumeBackupPhase
	}{
		{"never planned", fedv1alpha1.VolumeBackupStatus{}, fedv1alpha1.VolumeBackupPending},
		{"never planned, deleted with a leftover Ready", fedv1alpha1.VolumeBackupStatus{Conditions: []metav1.Condition{ready(fedv1alpha1.VolumeBackupInitializingReason)}},
			fedv1alpha1.VolumeBackupPending},
		{"waiting at the pause gate before any member", st("", ready(fedv1alpha1.VolumeBackupWaitingForBackupReason)), fedv1alpha1.VolumeBackupPending},
		{"waiting at the pause gate before the pause (initializer chosen)", st("az1", ready(fedv1alpha1.VolumeBackupWaitingForBackupReason)), fedv1alpha1.VolumeBackupRunning},
		{"waiting for the first plane to answer before choosing the initializer", st("", ready(fedv1alpha1.ClusterUnreachableReason)), fedv1alpha1.VolumeBackupRunning},
		{"started, nothing said yet", st(""), fedv1alpha1.VolumeBackupRunning},
		{"initializing", st("az1", ready(fedv1alpha1.VolumeBackupInitializingReason)), fedv1alpha1.VolumeBackupRunning},
		{"arming", st("az1", ready(fedv1alpha1.VolumeBackupArmingReason)), fedv1alpha1.VolumeBackupRunning},
		{"snapshotting under the pause", st("az1", gcPaused, ready(fedv1alpha1.VolumeBackupSnapshottingReason)), fedv1alpha1.VolumeBackupRunning},
		{"SnapshotsCreated not True counts for nothing", st("az1", createdFalse, ready(fedv1alpha1.VolumeBackupSnapshottingReason)), fedv1alpha1.VolumeBackupRunning},
		{"every snapshot started", st("az1", gcPaused, created, ready(fedv1alpha1.VolumeBackupSnapshottingReason)), fedv1alpha1.VolumeBackupSnapshotsCreated},
		{"every snapshot started, a plane unreachable", st("az1", created, ready(fedv1alpha1.ClusterUnreachableReason)), fedv1alpha1.VolumeBackupSnapshotsCreated},
		{"complete", st("az1", created, complete), fedv1alpha1.VolumeBackupComplete},
		{"failed", st("az1", created, failed), fedv1alpha1.VolumeBackupFailed},
		{"failed before it started (the start is stamped with the failure)", st("", failed), fedv1alpha1.VolumeBackupFailed},
		{"a complete backup deleted", st("az1", created, complete, cleaning), fedv1alpha1.VolumeBackupCleaning},
		{"a failed backup deleted", st("az1", failed, cleaning), fedv1alpha1.VolumeBackupCleaning},
		{"a backup deleted while waiting at the gate", st("", ready(fedv1alpha1.VolumeBackupWaitingForBackupReason), cleaning), fedv1alpha1.VolumeBackupCleaning},
		{"a member's clean fails", st("az1", complete, cleanFailed), fedv1alpha1.VolumeBackupCleanFailed},
		{"cleaned", st("az1", complete, cleaned), fedv1alpha1.VolumeBackupCleaned},
	}
	seen := map[fedv1alpha1.VolumeBackupPhase]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := phaseOf(&tc.st); got != tc.want {
				t.Errorf("phaseOf = %s, want %s", got, tc.want)
			}
		})
		seen[tc.want] = true
	}
	for _, p := range []fedv1alpha1.VolumeBackupPhase{fedv1alpha1.VolumeBackupPending, fedv1alpha1.VolumeBackupRunning,
		fedv1alpha1.VolumeBackupSnapshotsCreated, fedv1alpha1.VolumeBackupComplete, fedv1alpha1.VolumeBackupFailed,
		fedv1alpha1.VolumeBackupCleaning, fedv1alpha1.VolumeBackupCleaned, fedv1alpha1.VolumeBackupCleanFailed} {
		if !seen[p] {
			t.Errorf("no row gives phase %s", p)
		}
	}
}
