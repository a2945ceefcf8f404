package volumebackup

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// other is another backup named name, created at created, of the TidbClusters in clusters
// ("az1/tidb/tc", …), changed by muts.
func other(name string, created time.Time, clusters []string, muts ...func(*fedv1alpha1.VolumeBackup)) *fedv1alpha1.VolumeBackup {
	a := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(created)}}
	for _, c := range clusters {
		p := strings.Split(c, "/")
		a.Spec.Clusters = append(a.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p[0], TCNamespace: p[1], TCName: p[2]})
	}
	for _, m := range muts {
		m(a)
	}
	return a
}

var sameTC = []string{"az1/tidb/tc", "az2/tidb/tc", "az3/tidb/tc"}

func passed(a *fedv1alpha1.VolumeBackup) { a.Status.Initializer = a.Spec.Clusters[0].K8sClusterName }

func gcPaused(s metav1.ConditionStatus) func(*fedv1alpha1.VolumeBackup) {
	return gcPausedSince(s, t0.Add(-time.Minute))
}

func gcPausedSince(s metav1.ConditionStatus, at time.Time) func(*fedv1alpha1.VolumeBackup) {
	return func(a *fedv1alpha1.VolumeBackup) {
		a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: s, Reason: "R",
			LastTransitionTime: metav1.NewTime(at)})
	}
}

func endedAs(t string) func(*fedv1alpha1.VolumeBackup) {
	return func(a *fedv1alpha1.VolumeBackup) {
		a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "R"})
	}
}

func beingDeleted(a *fedv1alpha1.VolumeBackup) { now := metav1.NewTime(t0); a.DeletionTimestamp = &now }

// TestPauseGate: a backup creates no member while another backup pauses (or is about to pause)
// the same TiDB cluster, says which in its Ready condition, and fails once pauseWaitTimeout
// has passed; before its own pause it checks again.
func TestPauseGate(t *testing.T) {
	created := t0.Add(-time.Hour) // this backup's creation; "earlier" and "later" are relative to it
	earlier, later := created.Add(-time.Minute), created.Add(time.Minute)
	allArmed := map[string]Member{"az1": member(init_, armedC), "az2": armedWith(armedC), "az3": armedWith(armedC)}
	createAll := []Action{{Kind: CreateMember, Cluster: "az1", Phase: init_}, {Kind: CreateMember, Cluster: "az2", Phase: exec}, {Kind: CreateMember, Cluster: "az3", Phase: exec}}
	tests := []struct {
		name    string
		others  []*fedv1alpha1.VolumeBackup
		members map[string]Member
		mutate  func(*fedv1alpha1.VolumeBackup)
		started time.Time // this backup's timeStarted; zero: not started
		now     time.Time
		// waitFor names the backup waited for ("": it goes on); wantFail that it fails.
		waitFor  string
		wantFail bool
		want     []Action
	}{
		{name: "alone: it goes", want: createAll},
		{name: "another backup holds the pause of the same cluster: it waits, naming it",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionTrue))}, waitFor: "default/a"},
		{name: "even when that one came later (it passed the gate first)",
			others: []*fedv1alpha1.VolumeBackup{other("a", later, sameTC, passed)}, waitFor: "default/a"},
		{name: "one TidbCluster in common is the same TiDB cluster",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, []string{"az2/tidb/tc"}, passed, gcPaused(metav1.ConditionUnknown))}, waitFor: "default/a"},
		{name: "another TidbCluster in the same planes is another cluster",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, []string{"az1/tidb/other", "az2/tidb/other"}, passed, gcPaused(metav1.ConditionTrue))}, want: createAll},
		{name: "the same TidbCluster name in another namespace is another cluster",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, []string{"az1/prod/tc"}, passed, gcPaused(metav1.ConditionTrue))}, want: createAll},
		{name: "the same TidbCluster name in another data plane is another cluster",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, []string{"az9/tidb/tc"}, passed, gcPaused(metav1.ConditionTrue))}, want: createAll},
		{name: "the other lifted its pause (its snapshots still complete): it goes",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionFalse))}, want: createAll},
		{name: "the other completed without a recorded pause: it goes",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, endedAs(fedv1alpha1.VolumeBackupCompleteCondition))}, want: createAll},
		{name: "the other failed while its pause is still being lifted: it waits",
			others:  []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionUnknown), endedAs(fedv1alpha1.VolumeBackupFailedCondition))},
			waitFor: "default/a"},
		{name: "the other says its pause holds, set longer ago than its pause Job may live and its hold lapse: it goes",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPausedSince(metav1.ConditionTrue, t0.Add(-14*time.Minute)),
				endedAs(fedv1alpha1.VolumeBackupCompleteCondition))}, want: createAll},
		{name: "the other's pause set within its pause Job's life and the lapse: it waits",
			others:  []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPausedSince(metav1.ConditionTrue, t0.Add(-12*time.Minute)))},
			waitFor: "default/a"},
		{name: "the other is being deleted with its pause held: it waits",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionTrue), beingDeleted)}, waitFor: "default/a"},
		{name: "an earlier backup still waiting goes first",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC)}, waitFor: "default/a"},
		{name: "a later backup still waiting goes after",
			others: []*fedv1alpha1.VolumeBackup{other("a", later, sameTC)}, want: createAll},
		{name: "created in the same second: the name decides",
			others: []*fedv1alpha1.VolumeBackup{other("a", created, sameTC)}, waitFor: "default/a"},
		{name: "created in the same second, named after it: it goes",
			others: []*fedv1alpha1.VolumeBackup{other("zz", created, sameTC)}, want: createAll},
		{name: "an earlier backup that failed before passing does not hold it",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, endedAs(fedv1alpha1.VolumeBackupFailedCondition))}, want: createAll},
		{name: "an earlier backup deleted before passing does not hold it",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, beingDeleted)}, want: createAll},
		{name: "waiting for several: the first is named",
			others: []*fedv1alpha1.VolumeBackup{other("b", earlier, sameTC), other("a", earlier.Add(-time.Minute), sameTC, passed)}, waitFor: "default/a"},
		{name: "waited as long as pauseWaitTimeout: it fails, naming the other",
			others:  []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionTrue))},
			started: t0.Add(-30 * time.Minute), wantFail: true, waitFor: "default/a"},
		{name: "pauseWaitTimeout is the spec's",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed, gcPaused(metav1.ConditionTrue))},
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Spec.PauseWaitTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			},
			started: t0.Add(-6 * time.Minute), wantFail: true, waitFor: "default/a"},

		// Before its own pause, a backup that passed checks again.
		{name: "armed, another passed that comes first: no pause yet",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC, passed)}, members: allArmed,
			mutate: passed, started: t0.Add(-time.Minute), waitFor: "default/a"},
		{name: "armed, a later one that passed already asked for its pause: no pause yet",
			others: []*fedv1alpha1.VolumeBackup{other("a", later, sameTC, passed, gcPaused(metav1.ConditionUnknown))}, members: allArmed,
			mutate: passed, started: t0.Add(-time.Minute), waitFor: "default/a"},
		{name: "armed, a later one that passed has not asked: the pause starts",
			others: []*fedv1alpha1.VolumeBackup{other("a", later, sameTC, passed)}, members: allArmed,
			mutate: passed, started: t0.Add(-time.Minute), want: []Action{{Kind: StartPause, Cluster: "az1"}}},
		{name: "armed, an earlier one still before the gate: the pause starts (it waits for this one)",
			others: []*fedv1alpha1.VolumeBackup{other("a", earlier, sameTC)}, members: allArmed,
			mutate: passed, started: t0.Add(-time.Minute), want: []Action{{Kind: StartPause, Cluster: "az1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := backup()
			b.UID, b.CreationTimestamp = "uid-self", metav1.NewTime(created)
			if !tc.started.IsZero() {
				s := metav1.NewTime(tc.started)
				b.Status.TimeStarted = &s
			}
			if tc.mutate != nil {
				tc.mutate(b)
			}
			o := Observed{Backup: b, Members: tc.members, Known: all(), Reachable: all(), Others: append(tc.others, b)} // itself is listed too
			if o.Members == nil {
				o.Members = map[string]Member{}
			}
			r := Plan(o, t0)
			checkPhase(t, r)
			ready := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition)
			failed := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition)
			switch {
			case tc.wantFail:
				if failed == nil || failed.Reason != fedv1alpha1.VolumeBackupPauseWaitTimeoutReason || !strings.Contains(failed.Message, tc.waitFor) || len(r.Actions) != 0 {
					t.Errorf("Failed = %+v, actions %v; want PauseWaitTimeout naming %s", failed, r.Actions, tc.waitFor)
				}
			case tc.waitFor != "":
				if ready == nil || ready.Reason != fedv1alpha1.VolumeBackupWaitingForBackupReason || !strings.Contains(ready.Message, tc.waitFor) || len(r.Actions) != 0 || failed != nil {
					t.Errorf("Ready = %+v, actions %v; want WaitingForBackup naming %s and nothing done", ready, r.Actions, tc.waitFor)
				}
				limit := b.Spec.EffectivePauseWaitTimeout()
				if left := r.Status.TimeStarted.Add(limit).Sub(t0); r.RequeueAfter != left {
					t.Errorf("RequeueAfter %v, want the %v left before it gives up", r.RequeueAfter, left)
				}
				if r.Status.Initializer != b.Status.Initializer {
					t.Errorf("initializer %q chosen while waiting", r.Status.Initializer)
				}
			default:
				if ready != nil && ready.Reason == fedv1alpha1.VolumeBackupWaitingForBackupReason || failed != nil {
					t.Errorf("Ready = %+v, Failed = %+v; want it to go on", ready, failed)
				}
				if fmt.Sprint(r.Actions) != fmt.Sprint(tc.want) {
					t.Errorf("actions %v, want %v", r.Actions, tc.want)
				}
			}
		})
	}
}

// TestStartPauseMarksGCPausedUnknown: asking for the pause is visible to other backups'
// gates before the pause holds.
func TestStartPauseMarksGCPausedUnknown(t *testing.T) {
	b := backup()
	passed(b)
	s := metav1.NewTime(t0)
	b.Status.TimeStarted = &s
	o := Observed{Backup: b, Known: all(), Reachable: all(),
		Members: map[string]Member{"az1": member(init_, armedC), "az2": armedWith(armedC), "az3": armedWith(armedC)}}
	r := Plan(o, t0)
	checkPhase(t, r)
	if c := cond(r.Status, fedv1alpha1.VolumeBackupGCPausedCondition); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != fedv1alpha1.VolumeBackupPauseStartingReason {
		t.Fatalf("GCPaused = %+v", c)
	}
	if !pauseAsked(&fedv1alpha1.VolumeBackup{Status: r.Status}) || NeedsOthers(&fedv1alpha1.VolumeBackup{Status: r.Status}) {
		t.Fatal("a backup that asked for its pause does not count as asking")
	}
}

// TestDeletedBackupsPauseEnds: a backup deleted while its pause may be held says GCPaused=False
// once its initializer reports the pause lifted or its member is gone, so the backups waiting
// for it go on.
func TestDeletedBackupsPauseEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members map[string]Member
		want    metav1.ConditionStatus
	}{
		{"the initializer's member still holds it", map[string]Member{"az1": member(init_), "az2": armed()}, metav1.ConditionTrue},
		{"the initializer reports the pause lifted", map[string]Member{"az1": member(tear, resumed), "az2": armed()}, metav1.ConditionFalse},
		{"the initializer's member is gone", map[string]Member{"az2": armed()}, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backup()
			passed(b)
			beingDeleted(b)
			gcPaused(metav1.ConditionTrue)(b)
			r := Plan(Observed{Backup: b, Members: tc.members, Known: all(), Reachable: all()}, t0)
			checkPhase(t, r)
			if c := cond(r.Status, fedv1alpha1.VolumeBackupGCPausedCondition); c == nil || c.Status != tc.want {
				t.Errorf("GCPaused = %+v, want %s", c, tc.want)
			}
		})
	}
}

// TestGateLetsOneThrough: whatever the creation times and names of backups of one cluster that
// all wait at the gate, exactly one may go on; once one passed and holds the pause, none may;
// and of backups that all passed (a stale cache let them), at most one may start its pause.
func TestGateLetsOneThrough(t *testing.T) {
	f := func(seed uint64, n uint8) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		count := int(n%6) + 2
		var bs []*fedv1alpha1.VolumeBackup
		for i := range count {
			bs = append(bs, other(fmt.Sprintf("b%d", r.IntN(4)*10+i), t0.Add(time.Duration(r.IntN(3))*time.Second), sameTC))
		}
		through := func(stage gateStage) int {
			n := 0
			for _, b := range bs {
				if blocker(Observed{Backup: b, Others: bs}, stage, t0) == nil {
					n++
				}
			}
			return n
		}
		if through(beforeMembers) != 1 {
			return false
		}
		holder := bs[r.IntN(len(bs))]
		passed(holder)
		gcPaused(metav1.ConditionTrue)(holder)
		for _, b := range bs {
			if b != holder && blocker(Observed{Backup: b, Others: bs}, beforeMembers, t0) == nil {
				return false
			}
		}
		holder.Status.Conditions = nil
		for _, b := range bs {
			passed(b)
		}
		return through(beforePause) == 1
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 1000}); err != nil {
		t.Fatal(err)
	}
}
