package volumebackup

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func backup() *fedv1alpha1.VolumeBackup {
	return &fedv1alpha1.VolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", Generation: 1},
		Spec: fedv1alpha1.VolumeBackupSpec{
			Clusters: []fedv1alpha1.VolumeBackupMemberCluster{
				{K8sClusterName: "az1", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "az2", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "az3", TCName: "tc", TCNamespace: "tidb"},
			},
			Template: fedv1alpha1.VolumeBackupMemberSpec{StepTimeout: &metav1.Duration{Duration: time.Hour}},
		},
	}
}

func all() map[string]bool { return map[string]bool{"az1": true, "az2": true, "az3": true} }

// member builds an observed member in phase with the given True conditions.
func member(phase dpv1alpha1.BackupMemberPhase, conds ...string) Member {
	m := Member{Exists: true, Phase: phase, PhaseSince: t0}
	if phase != init_ {
		m.BackupTS = "100" // a member in execute or teardown has its backup ts unless a test says otherwise
	}
	for _, c := range conds {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "R"})
		// The agent's conditions come from the steps' reports, which the manager reads.
		switch c {
		case armedC:
			m = stepArmed(m)
		case inited:
			m = withPauseReady(m, 100)
		case started:
			m = stepStarted(m)
		case done:
			m = stepCompleted(stepStarted(m), "100")
		}
	}
	return m
}

// withStep puts s into the member's status.steps in place of the entry of its name.
func withStep(m Member, s dpv1alpha1.StepReport) Member {
	m.Status.Steps = slices.DeleteFunc(slices.Clone(m.Status.Steps), func(x dpv1alpha1.StepReport) bool { return x.Name == s.Name })
	m.Status.Steps = append(m.Status.Steps, s)
	return m
}

// withPauseReady is a member whose pause step reports it holds ts.
func withPauseReady(m Member, ts uint64) Member {
	return withStep(m, dpv1alpha1.StepReport{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseReady, BackupTS: ts})
}

// armed is a member created ahead of the pause: execute, no backup ts yet.
func armed() Member { m := member(exec); m.BackupTS = ""; return m }

// armedWith is armed() with the given True conditions.
func armedWith(conds ...string) Member {
	m := member(exec, conds...)
	m.BackupTS = ""
	return m
}

// stepArmed is a member whose snapshot step reports itself, armed (unless it reported
// already).
func stepArmed(m Member) Member {
	if _, ok := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot); ok {
		return m
	}
	return withStep(m, dpv1alpha1.StepReport{Name: dpv1alpha1.StepSnapshot, Phase: "Armed"})
}

// stepStarted is a member whose snapshot step reports every snapshot started (before the
// agent's SnapshotsCreated condition, if any).
func stepStarted(m Member) Member {
	s, _ := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot)
	at := metav1.NewMicroTime(t0)
	s.Name, s.Phase, s.StartedAt = dpv1alpha1.StepSnapshot, "Started", &at
	return withStep(m, s)
}

// stepCompleted is a member whose snapshot step reports every snapshot completed at ts, with
// its result (before the agent's Complete condition, if any).
func stepCompleted(m Member, ts string) Member {
	s, _ := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot)
	at := metav1.NewMicroTime(t0)
	n, _ := strconv.ParseUint(ts, 10, 64) // "" reports no ts
	s.Name, s.Phase, s.CompletedAt, s.BackupTS = dpv1alpha1.StepSnapshot, "Completed", &at, n
	s.Result = &runtime.RawExtension{Raw: []byte(`{"resolvedTS":` + ts + `}`)}
	m.Status.CommitTs = ts
	return withStep(m, s)
}

// withTS is m with backup ts ts in its spec and as its agent reports it and, once its
// snapshots completed, as its snapshot step does.
func withTS(m Member, ts string) Member {
	m.BackupTS = ts
	m.Status.CommitTs = ts
	m.Status.BackupSize = 1500
	if s, ok := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot); ok && s.CompletedAt != nil {
		m = stepCompleted(m, ts)
	}
	return m
}

const (
	init_   = dpv1alpha1.BackupMemberInitialize
	exec    = dpv1alpha1.BackupMemberExecute
	tear    = dpv1alpha1.BackupMemberTeardown
	inited  = dpv1alpha1.BackupMemberInitializedCondition
	started = dpv1alpha1.BackupMemberSnapshotsCreatedCondition
	done    = dpv1alpha1.BackupMemberCompleteCondition
	resumed = dpv1alpha1.BackupMemberGCResumedCondition
	armedC  = dpv1alpha1.BackupMemberArmedCondition
	failedC = dpv1alpha1.BackupMemberFailedCondition
)

func cond(st fedv1alpha1.VolumeBackupStatus, t string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*fedv1alpha1.VolumeBackup)
		members   map[string]Member
		reachable map[string]bool
		known     map[string]bool
		watched   []string
		force     bool
		now       time.Time
		want      []Action
		wantPhase fedv1alpha1.VolumeBackupPhase
		check     func(t *testing.T, r Result)
	}{
		{
			name:      "new backup: the initializer pauses, the others start armed (execute without a ts)",
			want:      []Action{{Kind: CreateMember, Cluster: "az1", Phase: init_}, {Kind: CreateMember, Cluster: "az2", Phase: exec}, {Kind: CreateMember, Cluster: "az3", Phase: exec}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if r.Status.TimeStarted == nil {
					t.Error("timeStarted not set")
				}
			},
		},
		{
			name:      "snapshot steps starting, az3 not armed yet: the pause waits",
			members:   map[string]Member{"az1": member(init_, armedC), "az2": armedWith(armedC), "az3": armed()},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition); c == nil || c.Reason != fedv1alpha1.VolumeBackupArmingReason || !strings.Contains(c.Message, "az3") {
					t.Errorf("Ready = %+v, want Arming naming az3", c)
				}
			},
		},
		{
			name:      "the initializer's own step not armed yet: the pause waits",
			members:   map[string]Member{"az1": member(init_), "az2": armedWith(armedC), "az3": armedWith(armedC)},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:      "every snapshot step armed: the initializer starts its pause",
			members:   map[string]Member{"az1": member(init_, armedC), "az2": armedWith(armedC), "az3": armedWith(armedC)},
			want:      []Action{{Kind: StartPause, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			// The manager reads the snapshot steps' own entries, not the agents' Armed
			// condition, which repeats them one hop later.
			name: "every snapshot step reports itself, no agent has said Armed yet: the initializer starts its pause",
			members: map[string]Member{"az1": stepArmed(member(init_)), "az2": stepArmed(armed()),
				"az3": withStep(armed(), dpv1alpha1.StepReport{Name: dpv1alpha1.StepSnapshot, Phase: "Checking"})},
			want:      []Action{{Kind: StartPause, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name: "a snapshot step that reports Failed is not armed: the pause waits",
			members: map[string]Member{"az1": member(init_, armedC), "az2": armedWith(armedC),
				"az3": withStep(armed(), dpv1alpha1.StepReport{Name: dpv1alpha1.StepSnapshot, Phase: dpv1alpha1.StepPhaseFailed})},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:      "initializer still pausing: nothing to do",
			members:   map[string]Member{"az1": func() Member { m := member(init_, armedC); m.StartPause = true; return m }(), "az2": armedWith(armedC), "az3": armedWith(armedC)},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:    "initialized: it executes and the others are created executing, all at its backup ts",
			members: map[string]Member{"az1": withTS(member(init_, inited), "100")},
			want: []Action{
				{Kind: SetPhase, Cluster: "az1", Phase: exec, BackupTS: "100"},
				{Kind: CreateMember, Cluster: "az2", Phase: exec, BackupTS: "100"},
				{Kind: CreateMember, Cluster: "az3", Phase: exec, BackupTS: "100"},
			},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupGCPausedCondition); c == nil || c.Status != metav1.ConditionTrue {
					t.Errorf("GCPaused = %v", c)
				}
			},
		},
		{
			name:      "initializer still pausing, a member missing (plane was down): it is created armed",
			members:   map[string]Member{"az1": member(init_), "az2": armed()},
			want:      []Action{{Kind: CreateMember, Cluster: "az3", Phase: exec}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:    "initialized: the armed members get the backup ts",
			members: map[string]Member{"az1": withTS(member(init_, inited), "100"), "az2": armed(), "az3": armed()},
			want: []Action{
				{Kind: SetPhase, Cluster: "az1", Phase: exec, BackupTS: "100"},
				{Kind: SetPhase, Cluster: "az2", Phase: exec, BackupTS: "100"},
				{Kind: SetPhase, Cluster: "az3", Phase: exec, BackupTS: "100"},
			},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name: "the pause reports its ready ts before the agent's Initialized: the armed members get it",
			members: map[string]Member{"az1": func() Member { m := member(init_); m.StartPause = true; return withPauseReady(m, 200) }(),
				"az2": armed(), "az3": armed()},
			want: []Action{
				{Kind: SetPhase, Cluster: "az1", Phase: exec, BackupTS: "200"},
				{Kind: SetPhase, Cluster: "az2", Phase: exec, BackupTS: "200"},
				{Kind: SetPhase, Cluster: "az3", Phase: exec, BackupTS: "200"},
			},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			// A restarted manager whose az3 cache has not synced yet: az3's member is not seen,
			// which must not read as "never created" (the backup would go back to Running).
			name: "a plane not seen yet after SnapshotsCreated: the phase stands, nothing is created",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.Phase, b.Status.Initializer = fedv1alpha1.VolumeBackupSnapshotsCreated, "az1"
			},
			members:   map[string]Member{"az1": member(exec, inited, started), "az2": member(exec, started)},
			reachable: map[string]bool{"az1": true, "az2": true},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition); c == nil || c.Reason != fedv1alpha1.ClusterUnreachableReason || !strings.Contains(c.Message, "az3") {
					t.Errorf("Ready = %+v, want ClusterUnreachable naming az3", c)
				}
			},
		},
		{
			name:      "some snapshots started: wait",
			members:   map[string]Member{"az1": member(exec, inited, started), "az2": member(exec), "az3": member(exec, started)},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:      "every snapshot started: GC resumes at once, before completion",
			members:   map[string]Member{"az1": member(exec, inited, started), "az2": member(exec, started), "az3": member(exec, started)},
			want:      []Action{{Kind: ResumeGC, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
		},
		{
			name: "every snapshot started, two of them told by the steps themselves: GC resumes at once",
			members: map[string]Member{"az1": member(exec, inited, started), "az2": stepStarted(member(exec)),
				"az3": stepStarted(member(exec))},
			want:      []Action{{Kind: ResumeGC, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
		},
		{
			name:      "a step's stamp on one member does not stand for the others",
			members:   map[string]Member{"az1": stepStarted(member(exec, inited)), "az2": member(exec), "az3": member(exec, started)},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name: "GC resumed is reported",
			members: map[string]Member{"az1": func() Member { m := member(exec, inited, started, resumed); m.ResumeGC = true; return m }(),
				"az2": member(exec, started), "az3": member(exec, started)},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupGCPausedCondition); c == nil || c.Status != metav1.ConditionFalse {
					t.Errorf("GCPaused = %v, want False", c)
				}
			},
		},
		{
			// Snapshots can start and complete between two observations: the pause is
			// released once, then every member tears down.
			name: "started and complete in one observation: GC resumed once, then teardown",
			members: map[string]Member{
				"az1": withTS(member(exec, inited, started, done), "300"),
				"az2": withTS(member(exec, started, done), "200"), "az3": withTS(member(exec, started, done), "250")},
			want: []Action{{Kind: ResumeGC, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az1", Phase: tear},
				{Kind: SetPhase, Cluster: "az2", Phase: tear}, {Kind: SetPhase, Cluster: "az3", Phase: tear}},
			wantPhase: fedv1alpha1.VolumeBackupComplete,
		},
		{
			name: "all complete: teardown everywhere, commit ts is the minimum",
			members: map[string]Member{
				"az1": withTS(func() Member { m := member(exec, inited, started, done); m.ResumeGC = true; return m }(), "300"),
				"az2": withTS(member(exec, started, done), "200"), "az3": withTS(member(exec, started, done), "250")},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: SetPhase, Cluster: "az2", Phase: tear}, {Kind: SetPhase, Cluster: "az3", Phase: tear}},
			wantPhase: fedv1alpha1.VolumeBackupComplete,
			check: func(t *testing.T, r Result) {
				if r.Status.CommitTs != "200" || r.Status.BackupSize != 4500 || r.Status.BackupSizeReadable != "4.5 kB" {
					t.Errorf("aggregate: ts %s size %d %q", r.Status.CommitTs, r.Status.BackupSize, r.Status.BackupSizeReadable)
				}
				if c := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
					t.Errorf("Ready = %v", c)
				}
			},
		},
		{
			// A step's report is writable by whoever can act as the step's service account: a
			// Completed report the agent has not confirmed (no Complete condition) completes
			// nothing, and its ts is not the backup's.
			name: "two members' steps report Completed, unconfirmed by their agents: the backup does not complete",
			members: map[string]Member{
				"az1": withTS(func() Member { m := member(exec, inited, started, done); m.ResumeGC = true; return m }(), "300"),
				"az2": stepCompleted(member(exec, started), "200"), "az3": stepCompleted(member(exec, started), "250")},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
			check: func(t *testing.T, r Result) {
				if r.Status.CommitTs != "" || cond(r.Status, fedv1alpha1.VolumeBackupCompleteCondition) != nil {
					t.Errorf("commit ts %q, Complete %v: want neither", r.Status.CommitTs, cond(r.Status, fedv1alpha1.VolumeBackupCompleteCondition))
				}
			},
		},
		{
			name: "a Complete member without a backup ts in its spec does not complete the backup",
			members: map[string]Member{
				"az1": withTS(func() Member { m := member(exec, inited, started, done); m.ResumeGC = true; return m }(), "300"),
				"az2": func() Member { m := member(exec, started, done); m.BackupTS = ""; return m }(), "az3": withTS(member(exec, started, done), "250")},
			want:      []Action{{Kind: SetPhase, Cluster: "az2", Phase: exec, BackupTS: "100"}},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
		},
		{
			name:    "a member failed: the backup fails and every member tears down (pause lifted now)",
			members: map[string]Member{"az1": member(exec, inited), "az2": member(exec, failedC), "az3": member(exec)},
			want: []Action{{Kind: ResumeGC, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: MarkFailed, Cluster: "az1"},
				{Kind: SetPhase, Cluster: "az2", Phase: tear}, {Kind: MarkFailed, Cluster: "az2"}, {Kind: SetPhase, Cluster: "az3", Phase: tear}, {Kind: MarkFailed, Cluster: "az3"}},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
			check: func(t *testing.T, r Result) {
				c := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.MemberFailedReason || !strings.Contains(c.Message, "az2") {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name:      "the initializer's failure also fails the backup",
			members:   map[string]Member{"az1": member(init_, failedC)},
			want:      []Action{{Kind: ResumeGC, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: MarkFailed, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
		},
		{
			name:    "a step past its timeout fails the backup",
			members: map[string]Member{"az1": member(exec, inited, started), "az2": member(exec), "az3": member(exec, started)},
			now:     t0.Add(61 * time.Minute),
			want: []Action{{Kind: ResumeGC, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: MarkFailed, Cluster: "az1"},
				{Kind: SetPhase, Cluster: "az2", Phase: tear}, {Kind: MarkFailed, Cluster: "az2"}, {Kind: SetPhase, Cluster: "az3", Phase: tear}, {Kind: MarkFailed, Cluster: "az3"}},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition); c == nil || c.Reason != fedv1alpha1.StepTimeoutReason {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name:      "a running step asks to be looked at again when it would time out",
			members:   map[string]Member{"az1": member(exec, inited, started), "az2": member(exec), "az3": member(exec, started)},
			now:       t0.Add(40 * time.Minute),
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if r.RequeueAfter != 20*time.Minute {
					t.Errorf("RequeueAfter = %s, want 20m", r.RequeueAfter)
				}
			},
		},
		{
			name:      "an unknown cluster is a terminal, explained failure",
			known:     map[string]bool{"az1": true, "az2": true},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
			check: func(t *testing.T, r Result) {
				c := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.UnknownClusterReason || !strings.Contains(c.Message, `"az3"`) {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name:    "a namespace the manager does not watch is a terminal, explained failure before any member",
			watched: []string{"tidb-a", "tidb-b"},
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				for i := range b.Spec.Clusters {
					b.Spec.Clusters[i].TCNamespace = "tidb-a"
				}
				b.Spec.Clusters[1].TCNamespace = "tidb"
			},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
			check: func(t *testing.T, r Result) {
				c := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition)
				if c == nil || c.Reason != fedv1alpha1.NamespaceNotWatchedReason || !strings.Contains(c.Message, `az2: namespace "tidb"`) {
					t.Errorf("Failed = %+v", c)
				}
				if len(r.Actions) != 0 {
					t.Errorf("actions %v, want none", r.Actions)
				}
			},
		},
		{
			name:      "namespaces the manager watches: members as usual",
			watched:   []string{"other", "tidb"},
			want:      []Action{{Kind: CreateMember, Cluster: "az1", Phase: init_}, {Kind: CreateMember, Cluster: "az2", Phase: exec}, {Kind: CreateMember, Cluster: "az3", Phase: exec}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:      "an unreachable cluster: act on the others, say why it waits",
			members:   map[string]Member{"az1": withTS(member(init_, inited), "100")},
			reachable: map[string]bool{"az1": true, "az2": true},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: exec, BackupTS: "100"}, {Kind: CreateMember, Cluster: "az2", Phase: exec, BackupTS: "100"}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition); c == nil || c.Reason != fedv1alpha1.ClusterUnreachableReason {
					t.Errorf("Ready = %+v", c)
				}
			},
		},
		{
			name:      "the first plane does not answer yet (a manager just started): no initializer for a while, nothing created",
			reachable: map[string]bool{"az2": true, "az3": true},
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.TimeStarted = ptr.To(metav1.NewTime(t0.Add(time.Minute - 5*time.Second)))
			},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if r.Status.Initializer != "" || r.RequeueAfter != initializerGrace-5*time.Second {
					t.Errorf("initializer %q, requeue %v: want none yet, requeue after the rest of the grace", r.Status.Initializer, r.RequeueAfter)
				}
			},
		},
		{
			name:      "the first plane is unreachable past the grace: the next reachable one initializes",
			reachable: map[string]bool{"az2": true, "az3": true},
			mutate:    func(b *fedv1alpha1.VolumeBackup) { b.Status.TimeStarted = ptr.To(metav1.NewTime(t0)) },
			want:      []Action{{Kind: CreateMember, Cluster: "az2", Phase: init_}, {Kind: CreateMember, Cluster: "az3", Phase: exec}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
			check: func(t *testing.T, r Result) {
				if r.Status.Initializer != "az2" {
					t.Errorf("initializer = %q, want az2", r.Status.Initializer)
				}
			},
		},
		{
			name:      "the initializer, once chosen, stays even when the first plane comes back",
			mutate:    func(b *fedv1alpha1.VolumeBackup) { b.Status.Initializer = "az2" },
			members:   map[string]Member{"az2": withTS(member(init_, inited), "100")},
			want:      []Action{{Kind: CreateMember, Cluster: "az1", Phase: exec, BackupTS: "100"}, {Kind: SetPhase, Cluster: "az2", Phase: exec, BackupTS: "100"}, {Kind: CreateMember, Cluster: "az3", Phase: exec, BackupTS: "100"}},
			wantPhase: fedv1alpha1.VolumeBackupRunning,
		},
		{
			name:      "an initializer past initialize whose pause reports no backup ts fails the backup, pause lifted",
			members:   map[string]Member{"az1": withStep(member(exec, inited), dpv1alpha1.StepReport{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseReady})},
			want:      []Action{{Kind: ResumeGC, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: MarkFailed, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupFailedCondition); c == nil || c.Reason != fedv1alpha1.VolumeBackupBadBackupTSReason {
					t.Errorf("Failed = %+v", c)
				}
			},
		},
		{
			name: "a pause that never reported lifting (killed: its hold lapsed by TTL) gives no GC pause window",
			members: map[string]Member{"az1": func() Member {
				m := member(exec, inited, started, resumed)
				m.ResumeGC = true
				m.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
				m.Status.Conditions[2].LastTransitionTime = metav1.NewTime(t0.Add(1500 * time.Millisecond))
				return m
			}(), "az2": member(exec, started), "az3": member(exec, started)},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
			check: func(t *testing.T, r Result) {
				if r.Status.GCPauseSeconds != "" {
					t.Errorf("gcPauseSeconds = %q, want none", r.Status.GCPauseSeconds)
				}
			},
		},
		{
			name: "the GC pause window to the microsecond, from the pause's own report",
			members: map[string]Member{"az1": func() Member {
				m := member(exec, inited, started, resumed)
				m.ResumeGC = true
				p, r := metav1.NewMicroTime(t0.Add(250*time.Millisecond)), metav1.NewMicroTime(t0.Add(1737*time.Millisecond))
				return withStep(m, dpv1alpha1.StepReport{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseStopped, BackupTS: 100, GCPausedAt: &p, LiftedAt: &r})
			}(), "az2": member(exec, started), "az3": member(exec, started)},
			wantPhase: fedv1alpha1.VolumeBackupSnapshotsCreated,
			check: func(t *testing.T, r Result) {
				if r.Status.GCPauseSeconds != "1.487" {
					t.Errorf("gcPauseSeconds = %q, want 1.487", r.Status.GCPauseSeconds)
				}
			},
		},
		{
			name: "GC resumed confirmed after the backup completed: GCPaused turns False and the window is known",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.Phase, b.Status.Initializer = fedv1alpha1.VolumeBackupComplete, "az1"
				b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue, Reason: "X"},
					{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionTrue, Reason: "X"}}
			},
			members: map[string]Member{"az1": func() Member {
				m := member(tear, inited, started, done, resumed)
				m.ResumeGC = true
				p, r := metav1.NewMicroTime(t0), metav1.NewMicroTime(t0.Add(time.Second))
				return withStep(m, dpv1alpha1.StepReport{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseStopped, BackupTS: 100, GCPausedAt: &p, LiftedAt: &r})
			}(), "az2": member(tear, started, done), "az3": member(tear, started, done)},
			wantPhase: fedv1alpha1.VolumeBackupComplete,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupGCPausedCondition); c == nil || c.Status != metav1.ConditionFalse {
					t.Errorf("GCPaused = %+v, want False", c)
				}
				if r.Status.GCPauseSeconds != "1.000" {
					t.Errorf("gcPauseSeconds = %q", r.Status.GCPauseSeconds)
				}
			},
		},
		{
			name: "a failed backup keeps tearing down members that have not yet",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.Phase = fedv1alpha1.VolumeBackupFailed
				b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupFailedCondition, Status: metav1.ConditionTrue, Reason: "X"}}
			},
			members:   map[string]Member{"az1": func() Member { m := member(tear); m.ResumeGC, m.BackupFailed = true, true; return m }(), "az2": member(exec)},
			want:      []Action{{Kind: SetPhase, Cluster: "az2", Phase: tear}, {Kind: MarkFailed, Cluster: "az2"}},
			wantPhase: fedv1alpha1.VolumeBackupFailed,
		},
		{
			// The completion is recorded before the teardown (RecordFirst): a pass that ended
			// between the two leaves a Complete backup whose members still run.
			name: "a backup recorded Complete tears down the members that have not yet",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.Phase, b.Status.Initializer = fedv1alpha1.VolumeBackupComplete, "az1"
				b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue, Reason: "X"}}
			},
			members: map[string]Member{"az1": func() Member { m := withTS(member(exec, inited, started, done), "300"); m.ResumeGC = true; return m }(),
				"az2": withTS(member(exec, started, done), "300"), "az3": withTS(member(tear, started, done), "300")},
			want:      []Action{{Kind: SetPhase, Cluster: "az1", Phase: tear}, {Kind: SetPhase, Cluster: "az2", Phase: tear}},
			wantPhase: fedv1alpha1.VolumeBackupComplete,
		},
		{
			name: "deletion deletes the members that exist",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			members:   map[string]Member{"az1": member(tear), "az3": member(tear)},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}, {Kind: DeleteMember, Cluster: "az3"}},
			wantPhase: fedv1alpha1.VolumeBackupCleaning,
			check: func(t *testing.T, r Result) {
				if c := cond(r.Status, fedv1alpha1.VolumeBackupCleanedCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != fedv1alpha1.VolumeBackupCleaningReason {
					t.Errorf("Cleaned = %+v", c)
				}
			},
		},
		{
			name: "a member whose clean fails makes the backup CleanFailed, naming the member and why",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			members: map[string]Member{"az1": member(tear), "az2": func() Member {
				m := member(tear)
				m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.BackupMemberCleanedCondition, Status: metav1.ConditionFalse,
					Reason: dpv1alpha1.BackupMemberCleanGaveUpReason, Message: "clean failed 10 times, the last: UnauthorizedOperation"})
				return m
			}()},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}, {Kind: DeleteMember, Cluster: "az2"}},
			wantPhase: fedv1alpha1.VolumeBackupCleanFailed,
			check: func(t *testing.T, r Result) {
				c := cond(r.Status, fedv1alpha1.VolumeBackupCleanedCondition)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fedv1alpha1.VolumeBackupCleanFailedReason ||
					!strings.Contains(c.Message, "tidb/fed-nightly in az2") || !strings.Contains(c.Message, "UnauthorizedOperation") || strings.Contains(c.Message, "az1") {
					t.Errorf("Cleaned = %+v", c)
				}
			},
		},
		{
			name: "deletion waits for an unreachable plane, which may still hold a member, and says so",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			reachable: map[string]bool{"az1": true, "az2": true},
			wantPhase: fedv1alpha1.VolumeBackupCleaning,
			check: func(t *testing.T, r Result) {
				c := cond(r.Status, fedv1alpha1.VolumeBackupReadyCondition)
				if r.RemoveFinalizer || c == nil || !strings.Contains(c.Message, "[az3]") || !strings.Contains(c.Message, fedv1alpha1.AnnotationForceRemove) {
					t.Errorf("RemoveFinalizer %v, Ready %+v", r.RemoveFinalizer, c)
				}
			},
		},
		{
			name: "deletion forced past an unreachable plane still deletes the reachable members first",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			members:   map[string]Member{"az1": member(tear)},
			reachable: map[string]bool{"az1": true, "az2": true},
			want:      []Action{{Kind: DeleteMember, Cluster: "az1"}},
			wantPhase: fedv1alpha1.VolumeBackupCleaning,
		},
		{
			name: "deletion forced: an unreachable plane no longer holds the finalizer",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			reachable: map[string]bool{"az1": true},
			force:     true,
			check: func(t *testing.T, r Result) {
				if !r.RemoveFinalizer {
					t.Error("forced removal kept the finalizer")
				}
			},
		},
		{
			name: "deletion with every member gone releases the finalizer",
			mutate: func(b *fedv1alpha1.VolumeBackup) {
				now := metav1.NewTime(t0)
				b.DeletionTimestamp = &now
			},
			check: func(t *testing.T, r Result) {
				if !r.RemoveFinalizer || len(r.Actions) != 0 {
					t.Errorf("RemoveFinalizer %v, actions %v", r.RemoveFinalizer, r.Actions)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := backup()
			if tc.mutate != nil {
				tc.mutate(b)
			}
			o := Observed{Backup: b, Members: tc.members, Known: tc.known, Reachable: tc.reachable, Namespaces: tc.watched, ForceRemove: tc.force}
			if o.Members == nil {
				o.Members = map[string]Member{}
			}
			if o.Known == nil {
				o.Known = all()
			}
			if o.Reachable == nil {
				o.Reachable = all()
			}
			now := tc.now
			if now.IsZero() {
				now = t0.Add(time.Minute)
			}
			r := Plan(o, now)
			checkPhase(t, r)
			checkFrom(t, o, r.Actions)
			if !reflect.DeepEqual(r.Actions, tc.want) {
				t.Errorf("actions = %+v\nwant      %+v", r.Actions, tc.want)
			}
			if tc.wantPhase != "" && r.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", r.Status.Phase, tc.wantPhase)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestPlanWalksTheWholeProtocol applies each plan's actions to simulated members and reports
// their progress: the backup completes, no action repeats, and no member moves backwards.
func TestPlanWalksTheWholeProtocol(t *testing.T) {
	b := backup()
	o := Observed{Backup: b, Members: map[string]Member{}, Known: all(), Reachable: all()}
	apply := func(r Result) {
		for _, a := range r.Actions {
			m := o.Members[a.Cluster]
			if a.Kind == SetPhase && m.Phase == tear && a.Phase != tear {
				t.Fatalf("member %s moved back from teardown to %s", a.Cluster, a.Phase)
			}
			if a.Kind == SetPhase && m.BackupTS != "" && a.BackupTS != "" && a.BackupTS != m.BackupTS {
				t.Fatalf("member %s backup ts changed from %s to %s", a.Cluster, m.BackupTS, a.BackupTS)
			}
			o.Members[a.Cluster] = applied(m, a)
		}
		b.Status = r.Status
	}
	// report is the agent's condition with the step's own report under it (the manager reads
	// the step's).
	report := func(cluster string, c string, ts string) {
		m := o.Members[cluster]
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "R"})
		n, _ := strconv.ParseUint(ts, 10, 64)
		switch c {
		case armedC:
			m = stepArmed(m)
		case inited:
			m = withPauseReady(m, n)
		case started:
			m = stepStarted(m)
		case done:
			m = stepCompleted(m, ts) // the agent confirmed it: the Complete condition above
		}
		if ts != "" {
			m.Status.CommitTs = ts
		}
		o.Members[cluster] = m
	}
	step := func() Result { r := Plan(o, t0.Add(time.Minute)); checkPhase(t, r); apply(r); return r }

	step()
	report("az1", inited, "30")
	step()
	for _, c := range []string{"az1", "az2", "az3"} {
		report(c, started, "")
	}
	if r := step(); len(r.Actions) != 1 || r.Actions[0].Kind != ResumeGC {
		t.Fatalf("after all started: %+v", r.Actions)
	}
	if r := step(); len(r.Actions) != 0 {
		t.Fatalf("resume GC asked twice: %+v", r.Actions)
	}
	for i, c := range []string{"az1", "az2", "az3"} {
		report(c, done, []string{"30", "10", "20"}[i])
	}
	step()
	// The commit ts is the one the manager handed every member, whatever their steps reported.
	if b.Status.Phase != fedv1alpha1.VolumeBackupComplete || b.Status.CommitTs != "30" {
		t.Fatalf("final status %s %s", b.Status.Phase, b.Status.CommitTs)
	}
	for c, m := range o.Members {
		if m.Phase != tear {
			t.Errorf("member %s ended in %s, want teardown", c, m.Phase)
		}
	}
	if r := step(); len(r.Actions) != 0 {
		t.Errorf("a complete backup still acts: %+v", r.Actions)
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
// read this pass (its cache not synced after a restart, or unreachable) keeps its entry in
// status.backups and its share of the sizes, as last reported; only a plane that answers
// without the member drops it. A restarted manager used to write each finished backup's
// summary away and back, plane by plane, and its size metric dipped with it (issue 44).
func TestSummaryKeepsWhatAPlaneNotAnsweringLastReported(t *testing.T) {
	b := backup()
	for _, c := range b.Spec.Clusters {
		b.Status.Backups = append(b.Status.Backups, fedv1alpha1.VolumeBackupMemberStatus{K8sClusterName: c.K8sClusterName, TCName: c.TCName,
			TCNamespace: c.TCNamespace, BackupName: fedv1alpha1.MemberName(b.Name), Phase: "Complete", BackupSize: 1000, IncrementalBackupSize: 10})
	}
	az1 := withTS(member(tear, inited, started, done, resumed), "100")
	r := Plan(Observed{Backup: b, Members: map[string]Member{"az1": az1}, Known: all(), Reachable: map[string]bool{"az1": true, "az2": true}}, t0)
	var got []string
	for _, m := range r.Status.Backups {
		got = append(got, fmt.Sprintf("%s:%d", m.K8sClusterName, m.BackupSize))
	}
	if want := []string{"az1:1500", "az3:1000"}; !slices.Equal(got, want) {
		t.Errorf("status.backups %v, want %v (az2 answered without its member; az3 did not answer)", got, want)
	}
	if r.Status.BackupSize != 2500 || r.Status.IncrementalBackupSize != 10 {
		t.Errorf("sizes %d and %d, want 2500 and 10", r.Status.BackupSize, r.Status.IncrementalBackupSize)
	}
}

// applied is member m once the agent carried out the manager's action a on it, as the member's
// spec then says.
func applied(m Member, a Action) Member {
	switch a.Kind {
	case CreateMember:
		m = Member{Exists: true, Phase: a.Phase, BackupTS: a.BackupTS, PhaseSince: t0}
	case SetPhase:
		m.Phase = a.Phase
		if a.BackupTS != "" {
			m.BackupTS = a.BackupTS
		}
	case StartPause:
		m.StartPause = true
	case ResumeGC:
		m.ResumeGC = true
	case MarkFailed:
		m.BackupFailed = true
	}
	return m
}
