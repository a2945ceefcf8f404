package volumebackupschedule

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/metrics"
)

// The retention-blocked series is 1 exactly while the schedule's Retention condition says a
// failing clean holds it, and goes with the schedule.
func TestRetentionBlockedFollowsTheCondition(t *testing.T) {
	s := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	with := func(status metav1.ConditionStatus, reason string) Result {
		return Result{Status: fedv1alpha1.VolumeBackupScheduleStatus{Conditions: []metav1.Condition{{
			Type: fedv1alpha1.VolumeBackupScheduleRetentionCondition, Status: status, Reason: reason}}}}
	}
	series := func() int { return testutil.CollectAndCount(metrics.ScheduleRetentionBlocked) }

	report(s, with(metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDeletingReason))
	if n := series(); n != 0 {
		t.Fatalf("%d series while retention deletes", n)
	}
	report(s, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanFailedReason))
	if got := testutil.ToFloat64(metrics.ScheduleRetentionBlocked.WithLabelValues("ns", "nightly")); got != 1 {
		t.Fatalf("blocked = %v, want 1", got)
	}
	report(s, with(metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleIdleReason))
	if n := series(); n != 0 {
		t.Fatalf("%d series once retention moves again", n)
	}
	report(s, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanFailedReason))
	forget(s.Namespace, s.Name)
	if n := series(); n != 0 {
		t.Fatalf("%d series after the schedule went", n)
	}
}

// The drill-failed series is 1, with the reason, exactly while the Drill condition is False, and
// goes with the schedule.
func TestDrillFailedFollowsTheCondition(t *testing.T) {
	s := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "drilled"}}
	with := func(status metav1.ConditionStatus, reason string) Result {
		return Result{Status: fedv1alpha1.VolumeBackupScheduleStatus{Conditions: []metav1.Condition{{
			Type: fedv1alpha1.VolumeBackupScheduleDrillCondition, Status: status, Reason: reason}}}}
	}
	series := func() int { return testutil.CollectAndCount(metrics.ScheduleDrillFailed) }
	report(s, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason))
	if got := testutil.ToFloat64(metrics.ScheduleDrillFailed.WithLabelValues("ns", "drilled", fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason)); got != 1 {
		t.Fatalf("drill failed = %v, want 1", got)
	}
	report(s, with(metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillRunningReason))
	if n := series(); n != 0 {
		t.Fatalf("%d series once a drill runs again", n)
	}
	report(s, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason))
	forget(s.Namespace, s.Name)
	if n := series(); n != 0 {
		t.Fatalf("%d series after the schedule went", n)
	}
}
