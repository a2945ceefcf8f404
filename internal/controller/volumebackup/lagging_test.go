package volumebackup

import (
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestPlanFromALaggingCacheOnlyRepeatsWrites walks the protocol planning each step twice: from
// the members as written and from a plane's cache one write behind (the manager plans from what
// its caches show, and a reconcile another event starts may come before the cache shows the
// manager's own last write). Every action the lagging plan adds repeats a write already made (a
// creation that exists, a phase the member already has or passed, a flag already on), which the
// apply makes a no-op (MovePhase finds the member there), and both plans give the backup the
// same phase.
func TestPlanFromALaggingCacheOnlyRepeatsWrites(t *testing.T) {
	b := backup()
	truth := map[string]Member{}
	var cache map[string]Member
	observed := func(ms map[string]Member) Observed {
		return Observed{Backup: b, Members: maps.Clone(ms), Known: all(), Reachable: all()}
	}
	done := func(m Member, a Action) bool {
		switch a.Kind {
		case CreateMember:
			return m.Exists
		case SetPhase:
			return phaseOrder[m.Phase] > phaseOrder[a.Phase] || m.Phase == a.Phase && (a.BackupTS == "" || m.BackupTS == a.BackupTS)
		case StartPause:
			return m.StartPause
		case ResumeGC:
			return m.ResumeGC
		case MarkFailed:
			return m.BackupFailed
		}
		return false
	}
	step := func(name string) {
		fresh := Plan(observed(truth), t0.Add(time.Minute))
		if cache != nil {
			lagging := Plan(observed(cache), t0.Add(time.Minute))
			for _, a := range lagging.Actions {
				if !slices.Contains(fresh.Actions, a) && !done(truth[a.Cluster], a) {
					t.Errorf("%s: the lagging plan's %+v is neither planned from the members as written nor done", name, a)
				}
			}
			if lagging.Status.Phase != fresh.Status.Phase {
				t.Errorf("%s: phase %s from the lagging cache, %s from the members as written", name, lagging.Status.Phase, fresh.Status.Phase)
			}
		}
		cache = maps.Clone(truth)
		for _, a := range fresh.Actions {
			truth[a.Cluster] = applied(truth[a.Cluster], a)
		}
		b.Status = fresh.Status
	}
	// report is a step's report, which the cache shows as soon as the members as written.
	report := func(cluster string, f func(Member) Member) {
		truth[cluster] = f(truth[cluster])
		if m, ok := cache[cluster]; ok {
			cache[cluster] = f(m)
		}
	}
	armed := func(m Member) Member {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.BackupMemberArmedCondition, Status: metav1.ConditionTrue, Reason: "R"})
		return stepArmed(m)
	}
	step("start")
	for _, c := range []string{"az1", "az2", "az3"} {
		report(c, armed)
	}
	step("armed")
	step("pause asked")
	report("az1", func(m Member) Member { return withPauseReady(m, 30) })
	step("pause ready")
	for _, c := range []string{"az1", "az2", "az3"} {
		report(c, stepStarted)
	}
	step("snapshots started")
	step("resume asked")
	for i, c := range []string{"az1", "az2", "az3"} {
		report(c, func(m Member) Member {
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.BackupMemberCompleteCondition, Status: metav1.ConditionTrue, Reason: "R"})
			return stepCompleted(m, []string{"30", "10", "20"}[i])
		})
	}
	step("snapshots complete")
	step("teardown")
	if b.Status.Phase != fedv1alpha1.VolumeBackupComplete {
		t.Fatalf("the walk ended in %s", b.Status.Phase)
	}
}
