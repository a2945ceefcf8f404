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

// TestEveryPhaseStartsAtZero: every phase and step of the kinds New is given has its series
// from the start (the planners' lists: backupmember and restoremember MetricsKind).
func TestEveryPhaseStartsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	kinds := []Kind{{Name: "VolumeBackupMember", Phases: []string{"Pending", "Complete"}, Steps: []string{"pause", "snapshot"}},
		{Name: "VolumeRestoreMember", Phases: []string{"RestoringData"}, Steps: []string{"warmup"}}}
	m := New(kinds...)
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			key := f.GetName()
			for _, l := range metric.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			if series[f.GetName()] == nil {
				series[f.GetName()] = map[string]bool{}
			}
			series[f.GetName()][key] = true
		}
	}
	for _, k := range kinds {
		for _, p := range k.Phases {
			if !series["fedbr_agent_members"]["fedbr_agent_members,kind="+k.Name+",phase="+p] {
				t.Errorf("no fedbr_agent_members series for %s phase %s", k.Name, p)
			}
		}
		for _, s := range k.Steps {
			if !series["fedbr_agent_jobs_created_total"]["fedbr_agent_jobs_created_total,kind="+k.Name+",step="+s] {
				t.Errorf("no fedbr_agent_jobs_created_total series for %s step %s", k.Name, s)
			}
		}
	}
	for _, kind := range []string{"snapshot", "volume"} {
		if !series["fedbr_agent_orphans_deleted_total"]["fedbr_agent_orphans_deleted_total,kind="+kind] {
			t.Errorf("no fedbr_agent_orphans_deleted_total series for kind %s", kind)
		}
	}
	if !series["fedbr_agent_orphan_sweep_errors_total"]["fedbr_agent_orphan_sweep_errors_total"] {
		t.Error("no fedbr_agent_orphan_sweep_errors_total series")
	}
}
