package volumerestore

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func restore() *fedv1alpha1.VolumeRestore {
	return &fedv1alpha1.VolumeRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "default", Generation: 1},
		Spec: fedv1alpha1.VolumeRestoreSpec{
			Clusters: []fedv1alpha1.VolumeRestoreMemberCluster{
				{K8sClusterName: "az1", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "az2", TCName: "tc", TCNamespace: "tidb"},
			},
			Template: fedv1alpha1.VolumeRestoreMemberSpec{StepTimeout: &metav1.Duration{Duration: time.Hour}},
		},
	}
}

func member(phase dpv1alpha1.RestoreMemberPhase, ts string, conds ...string) Member {
	m := Member{Exists: true, Phase: phase, PhaseSince: t0}
	m.Status.CommitTs = ts
	for _, c := range conds {
		if c == data {
			m.Status.RestoredTS = ts // restore-data's echo of the decided ts
		}
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "R"})
	}
	return m
}

// warmFailed is m with a warm-up whose Jobs failed.
func warmFailed(m Member) Member {
	m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: warm, Status: metav1.ConditionTrue, Reason: dpv1alpha1.RestoreMemberWarmUpFailedReason, Message: "job x failed"})
	return m
}

// withCondition is m with one more condition.
func withCondition(m Member, t string, status metav1.ConditionStatus, reason, msg string) Member {
	m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg})
	return m
}

// marked is m with spec.dataMember set.
func marked(m Member) Member {
	m.DataMember = true
	return m
}

const (
	tikv        = dpv1alpha1.RestoreMemberTikvCompleteCondition
	warm        = dpv1alpha1.RestoreMemberWarmUpCompleteCondition
	warmStarted = dpv1alpha1.RestoreMemberWarmUpStartedCondition
	data        = dpv1alpha1.RestoreMemberDataCompleteCondition
	done        = dpv1alpha1.RestoreMemberCompleteCondition
	failedC     = dpv1alpha1.RestoreMemberFailedCondition
)

func both() map[string]bool { return map[string]bool{"az1": true, "az2": true} }

func TestPlan(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*fedv1alpha1.VolumeRestore)
		members   map[string]Member
		known     map[string]bool
		watched   []string
		reachable map[string]bool
		force     bool
		now       time.Time
		want      []Action
		wantPhase fedv1alpha1.VolumeRestorePhase
		check     func(*testing.T, Result)
	}{
		{
			name:      "new restore: every member restores volumes",
			want:      []Action{{Kind: CreateMember, Cluster: "az1", Phase: restoreVolume}, {Kind: CreateMember, Cluster: "az2", Phase: restoreVolume}},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
		},
		{
			name:      "one TiKV not up yet: wait, with the data member marked so its step is armed meanwhile",
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": member(restoreVolume, "100")},
			want:      []Action{{Kind: MarkDataMember, Cluster: "az2", ResolvedTS: 100}},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
		},
		{
			name:      "a member has not read its backupmeta yet: nobody is marked",
			members:   map[string]Member{"az1": member(restoreVolume, "200"), "az2": member(restoreVolume, "")},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
		},
		{
			name:      "the marked member is not marked again",
			members:   map[string]Member{"az1": member(restoreVolume, "200"), "az2": marked(member(restoreVolume, "100"))},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
		},
		{
			name:      "the marked member restores data, even if another reports a smaller ts later",
			members:   map[string]Member{"az1": marked(member(restoreVolume, "200", tikv)), "az2": member(restoreVolume, "100", tikv)},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: restoreData, ResolvedTS: 200}},
			wantPhase: fedv1alpha1.VolumeRestoreTikvComplete,
		},
		{
			name:      "all TiKV up: the member with the smallest resolved ts restores data",
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": member(restoreVolume, "100", tikv)},
			want:      []Action{{Kind: SetPhase, Cluster: "az2", Phase: restoreData, ResolvedTS: 100}},
			wantPhase: fedv1alpha1.VolumeRestoreTikvComplete,
		},
		{
			name:      "sync warm-up gates restore-data",
			mutate:    func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupSync },
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv, warm), "az2": marked(member(restoreVolume, "100", tikv))},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
		},
		{
			name: "check-wal-only gates restore-data also with warmup async",
			mutate: func(r *fedv1alpha1.VolumeRestore) {
				r.Spec.Template.Warmup, r.Spec.Template.WarmupStrategy = fedv1alpha1.RestoreWarmupAsync, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly
			},
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv, warm), "az2": marked(member(restoreVolume, "100", tikv))},
			wantPhase: fedv1alpha1.VolumeRestoreRunning,
			check: func(t *testing.T, r Result) {
				if c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition); c == nil || !strings.Contains(c.Message, "warming them up") {
					t.Errorf("Ready %+v", c)
				}
			},
		},
		{
			name:      "the data member stays chosen even if another reports a smaller ts later",
			members:   map[string]Member{"az1": member(restoreData, "200", tikv), "az2": member(restoreVolume, "100", tikv)},
			wantPhase: fedv1alpha1.VolumeRestoreTikvComplete,
		},
		{
			name:      "data recovered: every member finishes",
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": member(restoreData, "100", tikv, data)},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: restoreFinish}, {Kind: SetPhase, Cluster: "az2", Phase: restoreFinish}},
			wantPhase: fedv1alpha1.VolumeRestoreDataComplete,
			check: func(t *testing.T, r Result) {
				if r.Status.CommitTs != "100" {
					t.Errorf("CommitTs = %s, want 100", r.Status.CommitTs)
				}
			},
		},
		{
			name: "the ts handed over stays the decision, whatever the members report later",
			members: map[string]Member{"az1": func() Member {
				m := marked(member(restoreVolume, "200", tikv))
				m.ResolvedTS = "200"
				return m
			}(), "az2": member(restoreVolume, "150", tikv)},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: restoreData, ResolvedTS: 200}},
			wantPhase: fedv1alpha1.VolumeRestoreTikvComplete,
		},
		{
			name: "the data member's echo is checked against the ts handed over, not against a commit ts reported since",
			members: map[string]Member{"az1": member(restoreVolume, "100", tikv), "az2": func() Member {
				m := member(restoreData, "120", tikv, data) // restore-volumes' result rebuilt the backup with another ts
				m.ResolvedTS, m.Status.RestoredTS = "100", "100"
				return m
			}()},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: restoreFinish}, {Kind: SetPhase, Cluster: "az2", Phase: restoreFinish}},
			wantPhase: fedv1alpha1.VolumeRestoreDataComplete,
			check: func(t *testing.T, r Result) {
				if r.Status.CommitTs != "100" {
					t.Errorf("CommitTs = %s, want the decided 100", r.Status.CommitTs)
				}
			},
		},
		{
			name: "the data member reports another ts than decided: the restore fails",
			members: map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": func() Member {
				m := member(restoreData, "100", tikv, data)
				m.Status.RestoredTS = "99"
				return m
			}()},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}, {Kind: DeleteMember, Cluster: "az2"}},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
			check: func(t *testing.T, r Result) {
				f := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition)
				if f == nil || f.Reason != fedv1alpha1.VolumeRestoreRestoredTSMismatchReason || !strings.Contains(f.Message, `restored to ts "99", but the restore decided 100`) {
					t.Errorf("Failed %+v", f)
				}
				if r.Status.CommitTs != "" {
					t.Errorf("CommitTs = %s, want none", r.Status.CommitTs)
				}
			},
		},
		{
			name: "the data member reports its data restored without a ts: the restore fails",
			members: map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": func() Member {
				m := member(restoreData, "100", tikv, data)
				m.Status.RestoredTS = ""
				return m
			}()},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}, {Kind: DeleteMember, Cluster: "az2"}},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
		},
		{
			name:      "all finished: complete, with step timings",
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done), "az2": member(restoreFinish, "100", tikv, data, done)},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				if !meta.IsStatusConditionTrue(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition) || r.Status.TimeCompleted == nil {
					t.Errorf("not complete: %+v", r.Status)
				}
				var names []string
				for _, s := range r.Status.Steps {
					names = append(names, s.StepName)
					if s.TimeCompleted == nil {
						t.Errorf("step %s not completed", s.StepName)
					}
				}
				if !reflect.DeepEqual(names, []string{"RestoreVolume", "RestoreData", "RestartTiKV"}) {
					t.Errorf("steps = %v", names)
				}
			},
		},
		{
			name:      "async warm-up still reading after TiKV restarted: not complete yet, and says the cluster serves",
			mutate:    func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupAsync },
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done, warm), "az2": member(restoreFinish, "100", tikv, data, done, warmStarted)},
			wantPhase: fedv1alpha1.VolumeRestoreDataComplete,
			check: func(t *testing.T, r Result) {
				ready := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition)
				if r.Status.TimeCompleted != nil || ready == nil || ready.Reason != fedv1alpha1.VolumeRestoreWarmingUpReason || !strings.Contains(ready.Message, "serves") {
					t.Errorf("completed %v, Ready %+v", r.Status.TimeCompleted, ready)
				}
				if s := r.Status.Steps[len(r.Status.Steps)-1]; s.StepName != "WarmUp" || s.TimeCompleted != nil {
					t.Errorf("last step %+v", s)
				}
			},
		},
		{
			name:      "async warm-up done everywhere: complete, a failed warm-up named but not fatal",
			mutate:    func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupAsync },
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done, warm), "az2": warmFailed(member(restoreFinish, "100", tikv, data, done))},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				w := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreWarmUpCompleteCondition)
				if w == nil || w.Reason != fedv1alpha1.VolumeRestoreWarmUpFailedReason || !strings.Contains(w.Message, "az2: job x failed") {
					t.Errorf("WarmUpComplete %+v", w)
				}
			},
		},
		{
			name:      "verify: TiKV restarted everywhere, the data member still checks: not complete, and says so",
			mutate:    func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Verify = true },
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done), "az2": member(restoreFinish, "100", tikv, data, done)},
			wantPhase: fedv1alpha1.VolumeRestoreDataComplete,
			check: func(t *testing.T, r Result) {
				ready := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition)
				if r.Status.TimeCompleted != nil || ready == nil || ready.Reason != fedv1alpha1.VolumeRestoreCheckingReason || !strings.Contains(ready.Message, "az2 checks") {
					t.Errorf("completed %v, Ready %+v", r.Status.TimeCompleted, ready)
				}
				if s := r.Status.Steps[len(r.Status.Steps)-1]; s.StepName != "Verify" || s.TimeCompleted != nil {
					t.Errorf("last step %+v", s)
				}
			},
		},
		{
			name:   "verify passed on the data member: complete, Checked True with its message",
			mutate: func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Verify = true },
			members: map[string]Member{"az1": member(restoreFinish, "200", tikv, done),
				"az2": withCondition(member(restoreFinish, "100", tikv, data, done), dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberChecksPassedReason, "3 stores, 9 regions")},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != fedv1alpha1.VolumeRestoreChecksPassedReason || c.Message != "az2: 3 stores, 9 regions" {
					t.Errorf("Checked %+v", c)
				}
			},
		},
		{
			name:   "verify failed: the restore completes all the same, Checked False naming the check, nothing deleted",
			mutate: func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Verify = true },
			members: map[string]Member{"az1": member(restoreFinish, "200", tikv, done),
				"az2": withCondition(member(restoreFinish, "100", tikv, data, done), dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason, "store 5 is Down")},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fedv1alpha1.VolumeRestoreVerificationFailedReason || !strings.Contains(c.Message, "store 5 is Down") {
					t.Errorf("Checked %+v", c)
				}
			},
		},
		{
			name:      "without verify no Checked condition nor Verify step",
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done), "az2": member(restoreFinish, "100", tikv, data, done)},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				if meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition) != nil {
					t.Errorf("Checked set: %+v", r.Status.Conditions)
				}
				for _, s := range r.Status.Steps {
					if s.StepName == "Verify" {
						t.Errorf("a Verify step: %+v", r.Status.Steps)
					}
				}
			},
		},
		{
			name:      "without warm-up the restore completes without a WarmUp step or condition",
			members:   map[string]Member{"az1": member(restoreFinish, "200", tikv, done), "az2": member(restoreFinish, "100", tikv, data, done)},
			wantPhase: fedv1alpha1.VolumeRestoreComplete,
			check: func(t *testing.T, r Result) {
				if meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreWarmUpCompleteCondition) != nil {
					t.Errorf("WarmUpComplete set: %+v", r.Status.Conditions)
				}
			},
		},
		{
			name:      "a member failed: the restore fails and every member is deleted (agents delete their volumes)",
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": member(restoreVolume, "100", failedC)},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1", Phase: ""}, {Kind: DeleteMember, Cluster: "az2", Phase: ""}},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
			check: func(t *testing.T, r Result) {
				c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.MemberFailedReason || !strings.Contains(c.Message, "az2") {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name:      "a member without a resolved ts is a clear failure",
			members:   map[string]Member{"az1": member(restoreVolume, "", tikv), "az2": member(restoreVolume, "100", tikv)},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1", Phase: ""}, {Kind: DeleteMember, Cluster: "az2", Phase: ""}},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
		},
		{
			name:      "a step past its timeout fails the restore",
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv), "az2": member(restoreVolume, "100")},
			now:       t0.Add(2 * time.Hour),
			want:      []Action{{Kind: DeleteMember, Cluster: "az1", Phase: ""}, {Kind: DeleteMember, Cluster: "az2", Phase: ""}},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
		},
		{
			name:      "a namespace the manager does not watch fails with the plane and the namespace, before any member",
			watched:   []string{"tidb-restored"},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
			check: func(t *testing.T, r Result) {
				c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.NamespaceNotWatchedReason || !strings.Contains(c.Message, `az1: namespace "tidb"`) {
					t.Errorf("Failed = %+v", c)
				}
				for _, a := range r.Actions {
					if a.Kind == CreateMember {
						t.Errorf("action %v, want no member made", a)
					}
				}
			},
		},
		{
			name:      "an unknown cluster fails with its name",
			known:     map[string]bool{"az1": true},
			wantPhase: fedv1alpha1.VolumeRestoreFailed,
			check: func(t *testing.T, r Result) {
				c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.UnknownClusterReason || !strings.Contains(c.Message, `"az2"`) {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name:      "an unreachable cluster: act on the other, say why it waits",
			reachable: map[string]bool{"az1": true},
			want:      []Action{{Kind: CreateMember, Cluster: "az1", Phase: restoreVolume}},
			check: func(t *testing.T, r Result) {
				if c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition); c == nil || c.Reason != fedv1alpha1.ClusterUnreachableReason {
					t.Errorf("Ready = %+v", c)
				}
			},
		},
		{
			// A restarted manager whose az2 cache has not synced yet: az2's member is not seen,
			// which must not read as "never created" (the restore would go back to Running).
			name: "a plane not seen yet after TikvComplete: the phase stands, nothing is created",
			mutate: func(r *fedv1alpha1.VolumeRestore) {
				r.Status.Phase = fedv1alpha1.VolumeRestoreTikvComplete
				r.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeRestoreTikvCompleteCondition, Status: metav1.ConditionTrue, Reason: "R"}}
			},
			members:   map[string]Member{"az1": member(restoreVolume, "200", tikv)},
			reachable: map[string]bool{"az1": true},
			wantPhase: fedv1alpha1.VolumeRestoreTikvComplete,
			check: func(t *testing.T, r Result) {
				if c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition); c == nil || c.Reason != fedv1alpha1.ClusterUnreachableReason ||
					!strings.Contains(c.Message, "az2") {
					t.Errorf("Ready = %+v, want ClusterUnreachable naming az2", c)
				}
				if !meta.IsStatusConditionTrue(r.Status.Conditions, fedv1alpha1.VolumeRestoreTikvCompleteCondition) {
					t.Errorf("TikvComplete went away: %+v", r.Status.Conditions)
				}
			},
		},
		{
			name: "deletion keeps the finalizer while an unreachable plane may hold a member with volumes",
			mutate: func(r *fedv1alpha1.VolumeRestore) {
				now := metav1.NewTime(t0)
				r.DeletionTimestamp = &now
			},
			members:   map[string]Member{"az1": member(restoreFinish, "10", done)},
			reachable: map[string]bool{"az1": true},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}},
			check: func(t *testing.T, r Result) {
				if r.RemoveFinalizer {
					t.Error("finalizer released while az2 is unreachable")
				}
			},
		},
		{
			name: "deletion forced past an unreachable plane releases the finalizer",
			mutate: func(r *fedv1alpha1.VolumeRestore) {
				now := metav1.NewTime(t0)
				r.DeletionTimestamp = &now
			},
			reachable: map[string]bool{"az1": true},
			force:     true,
			check: func(t *testing.T, r Result) {
				if !r.RemoveFinalizer {
					t.Error("finalizer kept")
				}
			},
		},
		{
			name: "deletion with members gone releases the finalizer",
			mutate: func(r *fedv1alpha1.VolumeRestore) {
				now := metav1.NewTime(t0)
				r.DeletionTimestamp = &now
			},
			check: func(t *testing.T, r Result) {
				if !r.RemoveFinalizer {
					t.Error("finalizer kept")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := restore()
			if tc.mutate != nil {
				tc.mutate(r)
			}
			o := Observed{Restore: r, Members: tc.members, Known: tc.known, Reachable: tc.reachable, Namespaces: tc.watched, ForceRemove: tc.force}
			if o.Members == nil {
				o.Members = map[string]Member{}
			}
			if o.Known == nil {
				o.Known = both()
			}
			if o.Reachable == nil {
				o.Reachable = both()
			}
			now := tc.now
			if now.IsZero() {
				now = t0.Add(time.Minute)
			}
			res := Plan(o, now)
			checkPhase(t, res)
			checkFrom(t, o, res.Actions)
			if !reflect.DeepEqual(res.Actions, tc.want) {
				t.Errorf("actions = %+v\nwant      %+v", res.Actions, tc.want)
			}
			if tc.wantPhase != "" && res.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", res.Status.Phase, tc.wantPhase)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// checkFrom: every phase move is planned from the phase the member was observed in (the move
// tests it, so a plan from a stale copy is refused), then clears From for the comparison of
// the rows.
func checkFrom(t *testing.T, o Observed, actions []Action) {
	t.Helper()
	for i, a := range actions {
		if a.Kind != SetPhase {
			continue
		}
		if want := o.Members[a.Cluster].Phase; a.From != want {
			t.Errorf("%s moves %s from %q, want the observed phase %q", a.Kind, a.Cluster, a.From, want)
		}
		actions[i].From = ""
	}
}

// TestSummaryKeepsWhatAPlaneNotAnsweringLastReported: a plane whose member the manager cannot
// read this pass keeps its entry in status.restores as last reported; a plane that answers
// without the member drops it.
func TestSummaryKeepsWhatAPlaneNotAnsweringLastReported(t *testing.T) {
	for _, tc := range []struct {
		reachable bool
		want      []string
	}{{false, []string{"az1", "az2"}}, {true, []string{"az1"}}} {
		r := restore()
		for _, c := range r.Spec.Clusters {
			r.Status.Restores = append(r.Status.Restores, fedv1alpha1.VolumeRestoreMemberStatus{K8sClusterName: c.K8sClusterName, TCName: c.TCName,
				TCNamespace: c.TCNamespace, RestoreName: fedv1alpha1.MemberName(r.Name), Phase: "Running"})
		}
		res := Plan(Observed{Restore: r, Members: map[string]Member{"az1": member(restoreVolume, "100")}, Known: map[string]bool{"az1": true, "az2": true},
			Reachable: map[string]bool{"az1": true, "az2": tc.reachable}}, t0)
		var got []string
		for _, m := range res.Status.Restores {
			got = append(got, m.K8sClusterName)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("az2 reachable %v: status.restores of %v, want %v", tc.reachable, got, tc.want)
		}
	}
}
