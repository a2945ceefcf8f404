package demo

import (
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// TestWritersOf: what a write changed names its writer, one per part of the member.
func TestWritersOf(t *testing.T) {
	base := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "1"}}
	base.Status.Steps = []dpv1alpha1.StepReport{{Name: "pause", Phase: "Ready"}}
	change := func(f func(m *dpv1alpha1.VolumeBackupMember)) *dpv1alpha1.VolumeBackupMember {
		m := base.DeepCopy()
		f(m)
		return m
	}
	for _, tt := range []struct {
		name       string
		prev, next *dpv1alpha1.VolumeBackupMember
		want       []string
	}{
		{"created", nil, base, []string{writerManager}},
		{"go signal", base, change(func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true }), []string{writerManager}},
		{"a step's report", base, change(func(m *dpv1alpha1.VolumeBackupMember) { m.Status.Steps[0].Phase = "Stopped" }), []string{"pause"}},
		{"a new step", base, change(func(m *dpv1alpha1.VolumeBackupMember) {
			m.Status.Steps = append(m.Status.Steps, dpv1alpha1.StepReport{Name: "snapshot", Phase: "Armed"})
		}), []string{"snapshot"}},
		{"the agent's condition", base, change(func(m *dpv1alpha1.VolumeBackupMember) {
			m.Status.Conditions = []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionTrue}}
		}), []string{writerAgent}},
		{"finalizer", base, change(func(m *dpv1alpha1.VolumeBackupMember) { m.Finalizers = []string{"f"} }), []string{writerMetadata}},
		{"nothing but the version", base, change(func(m *dpv1alpha1.VolumeBackupMember) { m.ResourceVersion = "2" }), nil},
	} {
		if got := writersOf(tt.prev, tt.next); !slices.Equal(got, tt.want) {
			t.Errorf("%s: writers %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestWritesWithin: only the member's writes seen inside the window count, each once in its
// plane's total and once per writer it names; a version seen again is not a write.
func TestWritesWithin(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	w := &memberWrites{last: map[string]*dpv1alpha1.VolumeBackupMember{}}
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "1"}}
	w.saw("az1", m, t0) // created, before the window
	m = m.DeepCopy()
	m.ResourceVersion, m.Spec.BackupTS = "2", "7"
	m.Status.Conditions = []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionTrue}}
	w.saw("az1", m, t0.Add(time.Second))
	w.saw("az1", m, t0.Add(1500*time.Millisecond)) // the same version again (a watch's relist)
	other := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: "3"}}
	w.saw("az1", other, t0.Add(time.Second))
	got := w.within("m", t0.Add(500*time.Millisecond), t0.Add(2*time.Second))
	if got.Total("") != 1 || got["az1"][writerManager] != 1 || got["az1"][writerAgent] != 1 {
		t.Errorf("writes in the window %v (total %d), want one by the manager and the agent", got, got.Total(""))
	}
	if got.String() != "az1 1 (agent 1, manager 1)" {
		t.Errorf("printed %q", got.String())
	}
}

// TestWritersOfMetadata: labels or annotations going from absent to empty are no write.
func TestWritersOfMetadata(t *testing.T) {
	prev := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "1"}}
	next := prev.DeepCopy()
	next.ResourceVersion, next.Labels, next.Spec.BackupTS = "2", map[string]string{}, "7"
	if got := writersOf(prev, next); !slices.Equal(got, []string{writerManager}) {
		t.Errorf("writers %v, want the manager's alone", got)
	}
	next.Labels = map[string]string{"team": "db"}
	if got := writersOf(prev, next); !slices.Equal(got, []string{writerManager, writerMetadata}) {
		t.Errorf("writers %v, want the manager and metadata", got)
	}
}

// TestFirstSeen: a fact is timed at the first write that showed it, per plane and member; a
// plane where it never held is absent.
func TestFirstSeen(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	w := &memberWrites{last: map[string]*dpv1alpha1.VolumeBackupMember{}}
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "1"}}
	w.saw("az1", m, t0)
	w.saw("az2", m, t0)
	m = m.DeepCopy()
	m.ResourceVersion, m.Spec.StartPause = "2", true
	w.saw("az1", m, t0.Add(time.Second))
	m = m.DeepCopy()
	m.ResourceVersion = "3"
	w.saw("az1", m, t0.Add(2*time.Second)) // still holds: not the first
	w.saw("az2", &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: "4"}, Spec: m.Spec}, t0.Add(3*time.Second))
	got := w.firstSeen("m", func(m *dpv1alpha1.VolumeBackupMember) bool { return m.Spec.StartPause })
	if want := map[string]time.Time{"az1": t0.Add(time.Second)}; !maps.Equal(got, want) {
		t.Errorf("first seen %v, want %v", got, want)
	}
}
