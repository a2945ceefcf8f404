// Package volumerestore is the manager's VolumeRestore controller. As for VolumeBackup, its
// decisions are one pure function, Plan, over the VolumeRestore, its members and which data
// planes are reachable.
//
// The protocol, and where it differs from upstream:
//   - every member restores its volumes and starts TiKV in recovery mode (restore-volume); as
//     soon as every member reported its backup's resolved ts, the one that will run
//     restore-data is marked (spec.dataMember), so its agent starts the step armed while TiKV
//     starts;
//   - once every member reports TikvComplete (and WarmUpComplete for a sync warm-up), exactly one
//     member — the one whose backup has the smallest resolved ts, so the whole cluster is flashed
//     back to a ts every member's data contains — runs restore-data for the whole cluster;
//   - once data is recovered, every member finishes (restarts TiKV, leaves recovery mode);
//   - a failure anywhere fails the restore and deletes every member, whose agents then delete the
//     volumes they created (upstream left other planes' volumes behind);
//   - step timeouts, unknown and unreachable planes as for VolumeBackup.
package volumerestore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
)

// Member is what the manager observed of one data plane's member.
type Member struct {
	Exists     bool
	Phase      dpv1alpha1.RestoreMemberPhase
	DataMember bool
	// ResolvedTS is the member's spec.resolvedTS: the ts the manager decided, once handed over.
	ResolvedTS string
	PhaseSince time.Time
	Status     dpv1alpha1.VolumeRestoreMemberStatus
}

// Observed is everything Plan decides from.
type Observed struct {
	Restore   *fedv1alpha1.VolumeRestore
	Members   map[string]Member
	Known     map[string]bool
	Reachable map[string]bool
	// Namespaces are the data-plane namespaces the manager watches (its --dataplane-namespaces);
	// nil: every namespace.
	Namespaces []string
	// ForceRemove lets a deleted restore go although some planes could not confirm their
	// members are gone.
	ForceRemove bool
}

// ActionKind says what an Action does to a member.
type ActionKind string

const (
	CreateMember ActionKind = "CreateMember"
	SetPhase     ActionKind = "SetPhase"
	// MarkDataMember sets spec.dataMember on the member that will run restore-data, with the
	// ts it restores to (spec.resolvedTS).
	MarkDataMember ActionKind = "MarkDataMember"
	DeleteMember   ActionKind = "DeleteMember"
)

// Action is one idempotent change to a member.
type Action struct {
	Kind    ActionKind
	Cluster string
	Phase   dpv1alpha1.RestoreMemberPhase
	// From is the member's spec phase a SetPhase was planned from: the move tests it.
	From dpv1alpha1.RestoreMemberPhase
	// ResolvedTS is the ts the manager decided the cluster is restored to: a MarkDataMember and
	// a SetPhase to restore-data carry it to the data member's spec.resolvedTS.
	ResolvedTS uint64
}

// Result is Plan's decision.
type Result struct {
	Actions         []Action
	Status          fedv1alpha1.VolumeRestoreStatus
	RemoveFinalizer bool
	RequeueAfter    time.Duration
}

const (
	restoreVolume = dpv1alpha1.RestoreMemberRestoreVolume
	restoreData   = dpv1alpha1.RestoreMemberRestoreData
	restoreFinish = dpv1alpha1.RestoreMemberRestoreFinish
)

// Plan decides the next actions and the status of one VolumeRestore at now. Every branch sets
// conditions and status fields only; the phase is derived from them last (phaseOf).
func Plan(o Observed, now time.Time) Result {
	res := decide(o, now)
	res.Status.Phase = phaseOf(&res.Status)
	return res
}

// phaseOf is the one-word phase the rest of the status gives, for print columns. The first
// row that holds wins:
//
//	Failed=True           Failed
//	Complete=True         Complete
//	DataComplete=True     DataComplete (TiKV restarts out of recovery mode, or an async warm-up reads)
//	TikvComplete=True     TikvComplete (the data member restores data)
//	VolumeComplete=True   VolumeComplete (never set: the manager goes from Running to TikvComplete)
//	no timeStarted        Pending (not planned yet)
//	otherwise             Running
//
// A deleted restore keeps the phase it had: deletion sets no condition.
func phaseOf(st *fedv1alpha1.VolumeRestoreStatus) fedv1alpha1.VolumeRestorePhase {
	is := func(t string) bool { return meta.IsStatusConditionTrue(st.Conditions, t) }
	switch {
	case is(fedv1alpha1.VolumeRestoreFailedCondition):
		return fedv1alpha1.VolumeRestoreFailed
	case is(fedv1alpha1.VolumeRestoreCompleteCondition):
		return fedv1alpha1.VolumeRestoreComplete
	case is(fedv1alpha1.VolumeRestoreDataCompleteCondition):
		return fedv1alpha1.VolumeRestoreDataComplete
	case is(fedv1alpha1.VolumeRestoreTikvCompleteCondition):
		return fedv1alpha1.VolumeRestoreTikvComplete
	case is(fedv1alpha1.VolumeRestoreVolumeCompleteCondition):
		return fedv1alpha1.VolumeRestoreVolumeComplete
	case st.TimeStarted == nil:
		return fedv1alpha1.VolumeRestorePending
	}
	return fedv1alpha1.VolumeRestoreRunning
}

// decide is Plan but for the phase.
func decide(o Observed, now time.Time) Result {
	r := o.Restore
	res := Result{Status: *r.Status.DeepCopy()}
	st := &res.Status
	st.ObservedGeneration = r.Generation

	if r.DeletionTimestamp != nil || meta.IsStatusConditionTrue(st.Conditions, fedv1alpha1.VolumeRestoreFailedCondition) {
		return deleteMembers(o, res)
	}
	if meta.IsStatusConditionTrue(st.Conditions, fedv1alpha1.VolumeRestoreCompleteCondition) {
		return res
	}
	for _, c := range r.Spec.Clusters {
		if !o.Known[c.K8sClusterName] {
			return fail(o, res, now, fedv1alpha1.UnknownClusterReason, fmt.Sprintf("no context %q in the manager's kubeconfig", c.K8sClusterName))
		}
		if msg := federation.NotWatched(o.Namespaces, c.K8sClusterName, c.TCNamespace); msg != "" {
			return fail(o, res, now, fedv1alpha1.NamespaceNotWatchedReason, msg)
		}
	}
	if st.TimeStarted == nil {
		t := metav1.NewTime(now)
		st.TimeStarted = &t
	}
	aggregate(o, st)
	for _, c := range r.Spec.Clusters {
		if f := meta.FindStatusCondition(o.Members[c.K8sClusterName].Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition); f != nil && f.Status == metav1.ConditionTrue {
			return fail(o, res, now, fedv1alpha1.MemberFailedReason, fmt.Sprintf("member in %s failed: %s: %s", c.K8sClusterName, f.Reason, f.Message))
		}
	}
	limit := r.Spec.Template.EffectiveStepTimeout()
	for _, c := range r.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if m.Exists && !m.PhaseSince.IsZero() && !memberTrue(m, dpv1alpha1.RestoreMemberCompleteCondition) && now.Sub(m.PhaseSince) > limit {
			return fail(o, res, now, fedv1alpha1.StepTimeoutReason, fmt.Sprintf("member in %s stayed in phase %s longer than stepTimeout (%s); if its step still progresses (fedbr describe shows it), raise spec.template.stepTimeout",
				c.K8sClusterName, m.Phase, limit))
		}
	}

	if hidden := hiddenMembers(o); len(hidden) > 0 && pastVolumes(r.Status.Phase) {
		// A member this manager cannot see now (its plane unreachable, or its cache not synced
		// yet after a restart) is not a member that was never created: what the restore reached
		// stands, and the phase never moves back.
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreReadyCondition, Status: metav1.ConditionFalse,
			Reason: fedv1alpha1.ClusterUnreachableReason, Message: fmt.Sprintf("waiting for data planes %v", hidden)}, now)
		res.RequeueAfter = nextTimeout(o, limit, now)
		return res
	}
	switch {
	case !all(o, func(m Member) bool { return m.Exists }):
		for _, c := range r.Spec.Clusters {
			if !o.Members[c.K8sClusterName].Exists {
				res.add(o, Action{Kind: CreateMember, Cluster: c.K8sClusterName, Phase: restoreVolume})
			}
		}
		progress(st, now, fedv1alpha1.VolumeRestoreRestoringVolumesReason, "creating volumes from the snapshots")
		step(st, "RestoreVolume", now, false)
	case !all(o, func(m Member) bool { return tikvReady(r, m) }):
		markData(o, &res)
		msg := "restoring volumes and starting TiKV in recovery mode"
		if !warmedUp(o, st, now) && r.Spec.Template.WarmsUpBeforeTiKV() {
			msg = "restoring volumes, warming them up, then starting TiKV in recovery mode"
		}
		progress(st, now, fedv1alpha1.VolumeRestoreRestoringVolumesReason, msg)
	default:
		planData(o, &res, now)
	}
	res.RequeueAfter = nextTimeout(o, limit, now)
	if down := unreachable(o); len(down) > 0 {
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreReadyCondition, Status: metav1.ConditionFalse,
			Reason: fedv1alpha1.ClusterUnreachableReason, Message: fmt.Sprintf("waiting for data planes %v", down)}, now)
	}
	return res
}

// planData runs restore-data on one member, then restore-finish everywhere.
func planData(o Observed, res *Result, now time.Time) {
	st := &res.Status
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreTikvCompleteCondition, Status: metav1.ConditionTrue,
		Reason: fedv1alpha1.VolumeRestoreRestoringVolumesReason, Message: "every TiKV runs in recovery mode on restored volumes"}, now)
	step(st, "RestoreVolume", now, true)
	chosen, ts, err := dataMember(o)
	if err != nil {
		*res = fail(o, *res, now, fedv1alpha1.VolumeRestoreBadCommitTSReason, err.Error())
		return
	}
	data := o.Members[chosen]
	if !memberTrue(data, dpv1alpha1.RestoreMemberDataCompleteCondition) {
		if data.Phase == restoreVolume {
			res.add(o, Action{Kind: SetPhase, Cluster: chosen, Phase: restoreData, From: data.Phase, ResolvedTS: ts})
		}
		progress(st, now, fedv1alpha1.VolumeRestoreRestoringDataReason, fmt.Sprintf("%s recovers the cluster's data to %d", chosen, ts))
		step(st, "RestoreData", now, false)
		return
	}
	// The echo: the ts the data member's step reports it restored to must be the one decided.
	if restored := data.Status.RestoredTS; restored != strconv.FormatUint(ts, 10) {
		*res = fail(o, *res, now, fedv1alpha1.VolumeRestoreRestoredTSMismatchReason,
			fmt.Sprintf("member in %s reports the data restored to ts %q, but the restore decided %d (its spec.resolvedTS)", chosen, restored, ts))
		return
	}
	st.CommitTs = strconv.FormatUint(ts, 10)
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreDataCompleteCondition, Status: metav1.ConditionTrue,
		Reason: fedv1alpha1.VolumeRestoreRestoringDataReason, Message: "data recovered to " + st.CommitTs}, now)
	step(st, "RestoreData", now, true)
	for _, c := range o.Restore.Spec.Clusters {
		if m := o.Members[c.K8sClusterName]; m.Phase != restoreFinish {
			res.add(o, Action{Kind: SetPhase, Cluster: c.K8sClusterName, Phase: restoreFinish, From: m.Phase})
		}
	}
	if !all(o, func(m Member) bool { return memberTrue(m, dpv1alpha1.RestoreMemberCompleteCondition) }) {
		progress(st, now, fedv1alpha1.VolumeRestoreFinishingReason, "restarting TiKV out of recovery mode")
		step(st, "RestartTiKV", now, false)
		return
	}
	step(st, "RestartTiKV", now, true)
	if !warmedUp(o, st, now) {
		progress(st, now, fedv1alpha1.VolumeRestoreWarmingUpReason,
			fmt.Sprintf("TiKV serves the restored data; the %s warm-up is still reading volumes", o.Restore.Spec.Template.Warmup))
		return
	}
	if !checked(o, st, chosen, now) {
		progress(st, now, fedv1alpha1.VolumeRestoreCheckingReason, fmt.Sprintf("TiKV serves the restored data; %s checks the restored cluster from PD", chosen))
		return
	}
	done := metav1.NewTime(now)
	st.TimeCompleted = &done
	st.TimeTaken = now.Sub(st.TimeStarted.Time).Round(time.Second).String()
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreCompleteCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.AllCompleteReason, Message: "restored to " + st.CommitTs}, now)
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreReadyCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.AllCompleteReason, Message: "restored to " + st.CommitTs}, now)
}

// warmedUp records the members' warm-up (the WarmUp step, WarmUpComplete) and says whether
// it finished. A sync warm-up finishes before TiKV starts; an async one runs beside the
// restarted TiKV, and the restore completes only after it (the cluster serves meanwhile).
func warmedUp(o Observed, st *fedv1alpha1.VolumeRestoreStatus, now time.Time) bool {
	if o.Restore.Spec.Template.Warmup == fedv1alpha1.RestoreWarmupNone {
		return true
	}
	var warming, failed []string
	started := false
	for _, c := range o.Restore.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		started = started || memberTrue(m, dpv1alpha1.RestoreMemberWarmUpStartedCondition)
		w := meta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.RestoreMemberWarmUpCompleteCondition)
		switch {
		case w == nil || w.Status != metav1.ConditionTrue:
			warming = append(warming, c.K8sClusterName)
		case w.Reason == dpv1alpha1.RestoreMemberWarmUpFailedReason, w.Reason == dpv1alpha1.RestoreMemberWALCorruptedReason:
			failed = append(failed, c.K8sClusterName+": "+w.Message)
		}
	}
	if len(warming) > 0 {
		if started {
			step(st, "WarmUp", now, false)
		}
		return false
	}
	step(st, "WarmUp", now, true)
	c := metav1.Condition{Type: fedv1alpha1.VolumeRestoreWarmUpCompleteCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.VolumeRestoreWarmedUpReason,
		Message: "every member read its restored volumes"}
	if len(failed) > 0 {
		c.Reason, c.Message = fedv1alpha1.VolumeRestoreWarmUpFailedReason, "warm-up failed on some volumes (they may be slow on first reads), or found corrupted RocksDB logs: "+strings.Join(failed, "; ")
	}
	setCondition(st, c, now)
	return true
}

// checked records the data member's verdict on the restored cluster (its Checked, when the
// template asks for verify) as the restore's Checked, and says whether it is in. A failed check
// never fails the restore: it completes with Checked False, its volumes and TidbClusters kept.
func checked(o Observed, st *fedv1alpha1.VolumeRestoreStatus, data string, now time.Time) bool {
	if !o.Restore.Spec.Template.Verify {
		return true
	}
	c := meta.FindStatusCondition(o.Members[data].Status.Conditions, dpv1alpha1.RestoreMemberCheckedCondition)
	if c == nil {
		step(st, "Verify", now, false)
		return false
	}
	step(st, "Verify", now, true)
	out := metav1.Condition{Type: fedv1alpha1.VolumeRestoreCheckedCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.VolumeRestoreChecksPassedReason,
		Message: data + ": " + c.Message}
	if c.Status != metav1.ConditionTrue {
		out.Status, out.Reason = metav1.ConditionFalse, fedv1alpha1.VolumeRestoreVerificationFailedReason
	}
	setCondition(st, out, now)
	return true
}

// markData marks the member that will run restore-data once every member reported its
// backup's resolved ts: early, so its step is armed by the time TiKV runs everywhere. A bad
// resolved ts is left to planData, which fails the restore on it.
func markData(o Observed, res *Result) {
	chosen, ts, err := dataMember(o)
	if err != nil || o.Members[chosen].DataMember {
		return
	}
	res.add(o, Action{Kind: MarkDataMember, Cluster: chosen, ResolvedTS: ts})
}

// dataMember picks the member whose backup has the smallest resolved ts (ties: first in spec).
// A member already marked or in restore-data stays the choice, and the ts handed to it
// (spec.resolvedTS) stays the decision, so a late status update moves neither.
func dataMember(o Observed) (string, uint64, error) {
	var chosen string
	var min uint64
	for _, c := range o.Restore.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if (m.Phase == restoreData || m.DataMember) && m.ResolvedTS != "" {
			ts, err := strconv.ParseUint(m.ResolvedTS, 10, 64)
			if err != nil || ts == 0 {
				return "", 0, fmt.Errorf("member in %s has spec.resolvedTS %q, no ts", c.K8sClusterName, m.ResolvedTS)
			}
			return c.K8sClusterName, ts, nil
		}
		ts, err := strconv.ParseUint(m.Status.CommitTs, 10, 64)
		if err != nil || ts == 0 {
			return "", 0, fmt.Errorf("member in %s reports commit ts %q: its backupmeta gives no resolved ts", c.K8sClusterName, m.Status.CommitTs)
		}
		if m.Phase == restoreData || m.DataMember {
			return c.K8sClusterName, ts, nil
		}
		if chosen == "" || ts < min {
			chosen, min = c.K8sClusterName, ts
		}
	}
	return chosen, min, nil
}

func tikvReady(r *fedv1alpha1.VolumeRestore, m Member) bool {
	if !m.Exists || !memberTrue(m, dpv1alpha1.RestoreMemberTikvCompleteCondition) {
		return false
	}
	return !r.Spec.Template.WarmsUpBeforeTiKV() || memberTrue(m, dpv1alpha1.RestoreMemberWarmUpCompleteCondition)
}

func all(o Observed, f func(Member) bool) bool {
	for _, c := range o.Restore.Spec.Clusters {
		if !f(o.Members[c.K8sClusterName]) {
			return false
		}
	}
	return true
}

// hiddenMembers are the planes whose member the manager does not see because it cannot read
// the plane right now.
func hiddenMembers(o Observed) []string {
	var out []string
	for _, c := range o.Restore.Spec.Clusters {
		if !o.Reachable[c.K8sClusterName] && !o.Members[c.K8sClusterName].Exists {
			out = append(out, c.K8sClusterName)
		}
	}
	return out
}

// pastVolumes says a restore in phase p had created every member (a phase that only a restore
// whose every member was seen can reach).
func pastVolumes(p fedv1alpha1.VolumeRestorePhase) bool {
	switch p {
	case fedv1alpha1.VolumeRestoreVolumeComplete, fedv1alpha1.VolumeRestoreTikvComplete, fedv1alpha1.VolumeRestoreDataComplete:
		return true
	}
	return false
}

func unreachable(o Observed) []string {
	var out []string
	for _, c := range o.Restore.Spec.Clusters {
		if !o.Reachable[c.K8sClusterName] {
			out = append(out, c.K8sClusterName)
		}
	}
	return out
}

func (r *Result) add(o Observed, a Action) {
	if o.Reachable[a.Cluster] {
		r.Actions = append(r.Actions, a)
	}
}

// fail marks the restore failed; members are deleted on the next plan (their agents delete the
// volumes they created).
func fail(o Observed, res Result, now time.Time, reason, msg string) Result {
	st := &res.Status
	if st.TimeStarted == nil {
		t := metav1.NewTime(now)
		st.TimeStarted = &t
	}
	done := metav1.NewTime(now)
	st.TimeCompleted = &done
	st.TimeTaken = now.Sub(st.TimeStarted.Time).Round(time.Second).String()
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreFailedCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg}, now)
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}, now)
	aggregate(o, st)
	return deleteMembers(o, res)
}

// deleteMembers deletes every member. A deleted VolumeRestore keeps its finalizer while a plane
// that is unreachable or unknown may still hold a member (and the volumes it created), unless an
// SRE set the force-remove annotation.
func deleteMembers(o Observed, res Result) Result {
	remaining, waiting := 0, 0
	for _, c := range o.Restore.Spec.Clusters {
		name := c.K8sClusterName
		switch {
		case !o.Known[name] || !o.Reachable[name]:
			waiting++
		case o.Members[name].Exists:
			remaining++
			res.add(o, Action{Kind: DeleteMember, Cluster: name})
		}
	}
	res.RemoveFinalizer = o.Restore.DeletionTimestamp != nil && remaining == 0 && (waiting == 0 || o.ForceRemove)
	return res
}

// aggregate copies member statuses into the restore's status. A plane that does not answer
// this pass (unreachable, or its cache not synced after the manager's start) keeps the entry it
// last reported.
func aggregate(o Observed, st *fedv1alpha1.VolumeRestoreStatus) {
	last := map[string]fedv1alpha1.VolumeRestoreMemberStatus{}
	for _, ms := range o.Restore.Status.Restores {
		last[ms.K8sClusterName] = ms
	}
	st.Restores = make([]fedv1alpha1.VolumeRestoreMemberStatus, 0, len(o.Restore.Spec.Clusters))
	for _, c := range o.Restore.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if !m.Exists {
			if ms, ok := last[c.K8sClusterName]; ok && !o.Reachable[c.K8sClusterName] {
				st.Restores = append(st.Restores, ms)
			}
			continue
		}
		ms := fedv1alpha1.VolumeRestoreMemberStatus{K8sClusterName: c.K8sClusterName, TCName: c.TCName, TCNamespace: c.TCNamespace,
			RestoreName: fedv1alpha1.MemberName(o.Restore.Name), Phase: m.Status.Phase, CommitTs: m.Status.CommitTs}
		if f := meta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition); f != nil && f.Status == metav1.ConditionTrue {
			ms.Reason, ms.Message = f.Reason, f.Message
		}
		st.Restores = append(st.Restores, ms)
	}
}

func nextTimeout(o Observed, limit time.Duration, now time.Time) time.Duration {
	var next time.Duration
	for _, c := range o.Restore.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if !m.Exists || m.PhaseSince.IsZero() || memberTrue(m, dpv1alpha1.RestoreMemberCompleteCondition) {
			continue
		}
		if left := m.PhaseSince.Add(limit).Sub(now); next == 0 || left < next {
			next = left
		}
	}
	return max(next, 0)
}

// step records a step's start (once) and, when finished, its completion (once).
func step(st *fedv1alpha1.VolumeRestoreStatus, name string, now time.Time, finished bool) {
	t := metav1.NewTime(now)
	for i := range st.Steps {
		s := &st.Steps[i]
		if s.StepName != name {
			continue
		}
		if finished && s.TimeCompleted == nil {
			s.TimeCompleted = &t
			s.TimeTaken = now.Sub(s.TimeStarted.Time).Round(time.Second).String()
		}
		return
	}
	s := fedv1alpha1.VolumeRestoreStep{StepName: name, TimeStarted: &t}
	if finished {
		s.TimeCompleted, s.TimeTaken = &t, "0s"
	}
	st.Steps = append(st.Steps, s)
}

func memberTrue(m Member, t string) bool { return meta.IsStatusConditionTrue(m.Status.Conditions, t) }

func setCondition(st *fedv1alpha1.VolumeRestoreStatus, c metav1.Condition, now time.Time) {
	c.Message = federation.CutMessage(c.Message)
	c.ObservedGeneration = st.ObservedGeneration
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&st.Conditions, c)
}

// progress says, in the Ready condition, what the restore waits for.
func progress(st *fedv1alpha1.VolumeRestoreStatus, now time.Time, reason, msg string) {
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeRestoreReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}, now)
}
