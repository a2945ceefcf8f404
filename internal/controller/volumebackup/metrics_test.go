package volumebackup

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/metrics"
)

// The paused-since gauge exists exactly while the backup's pause holds, at the time it began.
func TestGCPausedSinceFollowsTheCondition(t *testing.T) {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	since := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	with := func(status metav1.ConditionStatus) Result {
		return Result{Status: fedv1alpha1.VolumeBackupStatus{Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupGCPausedCondition,
			Status: status, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	series := func() int { return testutil.CollectAndCount(metrics.GCPausedSince) }

	observePause(b, with(metav1.ConditionUnknown)) // asked, not holding yet
	if n := series(); n != 0 {
		t.Fatalf("%d series before the pause holds", n)
	}
	observePause(b, with(metav1.ConditionTrue))
	if got := testutil.ToFloat64(metrics.GCPausedSince.WithLabelValues("ns", "b")); got != float64(since.Unix()) {
		t.Fatalf("paused since %v, want %v", got, since.Unix())
	}
	held := with(metav1.ConditionTrue)
	held.RemoveFinalizer = true // deleted while holding: the series goes with it
	observePause(b, held)
	if n := series(); n != 0 {
		t.Fatalf("%d series after the backup went", n)
	}
	observePause(b, with(metav1.ConditionTrue))
	observePause(b, with(metav1.ConditionFalse)) // lifted
	if n := series(); n != 0 {
		t.Fatalf("%d series after the pause was lifted", n)
	}
}

// The clean-failed-since gauge exists exactly while the deleted backup's clean fails, at the
// time it began to; a clean still under way or done has none.
func TestCleanFailedSinceFollowsTheCondition(t *testing.T) {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	since := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	with := func(status metav1.ConditionStatus, reason string) Result {
		return Result{Status: fedv1alpha1.VolumeBackupStatus{Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCleanedCondition,
			Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	series := func() int { return testutil.CollectAndCount(metrics.BackupCleanFailedSince) }

	observeClean(b, with(metav1.ConditionFalse, "Cleaning"))
	if n := series(); n != 0 {
		t.Fatalf("%d series while the clean runs", n)
	}
	observeClean(b, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupCleanFailedReason))
	if got := testutil.ToFloat64(metrics.BackupCleanFailedSince.WithLabelValues("ns", "b")); got != float64(since.Unix()) {
		t.Fatalf("failing since %v, want %v", got, since.Unix())
	}
	gone := with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupCleanFailedReason)
	gone.RemoveFinalizer = true // force-removed while failing: the series goes with it
	observeClean(b, gone)
	if n := series(); n != 0 {
		t.Fatalf("%d series after the backup went", n)
	}
	observeClean(b, with(metav1.ConditionFalse, fedv1alpha1.VolumeBackupCleanFailedReason))
	observeClean(b, with(metav1.ConditionTrue, "Cleaned")) // a retry cleaned it
	if n := series(); n != 0 {
		t.Fatalf("%d series after the clean succeeded", n)
	}
}
