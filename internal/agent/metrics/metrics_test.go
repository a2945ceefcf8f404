package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	m := New()
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Members.WithLabelValues("VolumeBackupMember", "Complete")); got != 0 {
		t.Errorf("phases start at 0, got %v", got)
	}
	m.SetPhase("VolumeBackupMember", "ns", "a", "Initializing")
	m.SetPhase("VolumeBackupMember", "ns", "a", "Complete")
	m.SetPhase("VolumeBackupMember", "ns", "b", "Complete")
	if got := testutil.ToFloat64(m.Members.WithLabelValues("VolumeBackupMember", "Initializing")); got != 0 {
		t.Errorf("a moved on: Initializing %v", got)
	}
	if got := testutil.ToFloat64(m.Members.WithLabelValues("VolumeBackupMember", "Complete")); got != 2 {
		t.Errorf("Complete %v", got)
	}
	m.SetPhase("VolumeBackupMember", "ns", "a", "")
	if got := testutil.ToFloat64(m.Members.WithLabelValues("VolumeBackupMember", "Complete")); got != 1 {
		t.Errorf("after a was deleted: Complete %v", got)
	}
	start := time.Unix(0, 0)
	m.ObserveStep("VolumeBackupMember", "snapshot", "job-1", true, start, start.Add(3*time.Second))
	m.ObserveStep("VolumeBackupMember", "snapshot", "job-1", true, start, start.Add(3*time.Second))
	if n := testutil.CollectAndCount(m.StepDuration); n != 1 {
		t.Errorf("%d duration series", n)
	}
}
