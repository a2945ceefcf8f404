// Package volumebackup is the manager's VolumeBackup controller. Its decisions are one pure
// function, Plan: the reconciler observes the VolumeBackup, its members in every data plane and
// which planes are reachable, calls Plan, and applies the returned actions idempotently. Plan
// reads no clock and no client, so every transition is a table test.
//
// The protocol, and where it differs from upstream BR Federation:
//   - the first cluster's member initializes (pins GC, leases TiKV, pauses PD) while every other
//     member is created in execute without a backup ts, so its agent arms the snapshot step
//     ahead of the pause; once the initializer reports Initialized, every member gets its
//     backup ts (the initializer moving to execute) and snapshots at once;
//   - as soon as every member has started its snapshots, the initializer is asked to resume GC
//     (resumeGC) — the pause window ends at the slowest CreateSnapshots, not at completion;
//   - when every member completed, all members tear down; the backup's commit ts is the minimum
//     member resolved ts;
//   - a failed member fails the backup at once and every member is torn down, so the pause is
//     lifted immediately instead of at TTL (upstream left it to the init job's deadline);
//   - every member of a failed backup is told so (spec.backupFailed), so cleanPolicy OnFailure
//     cleans every plane, also those whose own snapshots completed (upstream cleaned only the
//     planes whose own Backup failed);
//   - a member step that runs past stepTimeout fails the backup (upstream stalled forever);
//   - an unknown or unreachable data plane is a condition with a reason, never a crash or a
//     silent requeue;
//   - a backup never pauses a TiDB cluster another backup pauses: it waits, naming that backup,
//     for at most pauseWaitTimeout (gate.go); upstream serialised only schedules of one group.
package volumebackup

import (
	"fmt"
	"slices"
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
	// Exists is false until the member was created.
	Exists bool
	// Phase, BackupTS, StartPause and ResumeGC are the member's spec as last written.
	Phase      dpv1alpha1.BackupMemberPhase
	BackupTS   string
	StartPause bool
	ResumeGC   bool
	// BackupFailed is the member's spec.backupFailed: it was told the backup failed.
	BackupFailed bool
	// PhaseSince is when the member entered its current spec phase (from its status), for
	// step timeouts; zero if unknown.
	PhaseSince time.Time
	// Status is the member's reported status.
	Status dpv1alpha1.VolumeBackupMemberStatus
}

// Observed is everything Plan decides from.
type Observed struct {
	Backup *fedv1alpha1.VolumeBackup
	// Members by k8sClusterName; missing means not created yet.
	Members map[string]Member
	// Known are the data planes in the manager's kubeconfig; Reachable the ones answering now.
	Known     map[string]bool
	Reachable map[string]bool
	// Namespaces are the data-plane namespaces the manager watches (its --dataplane-namespaces);
	// nil: every namespace.
	Namespaces []string
	// ForceRemove lets a deleted backup go although some planes could not confirm their
	// members are gone.
	ForceRemove bool
	// Others are the other VolumeBackups the manager sees, for the pause gate (gate.go);
	// observed only while NeedsOthers.
	Others []*fedv1alpha1.VolumeBackup
	// Restores are the VolumeRestores of the backup's namespace, of which those that verify it
	// (Verifies) give its Verified condition; observed only once it is Complete.
	Restores []*fedv1alpha1.VolumeRestore
}

// ActionKind says what an Action does to a member.
type ActionKind string

const (
	// CreateMember creates the member in Phase.
	CreateMember ActionKind = "CreateMember"
	// SetPhase moves the member to Phase.
	SetPhase ActionKind = "SetPhase"
	// StartPause tells the initializer to start the pause: every member is armed.
	StartPause ActionKind = "StartPause"
	// ResumeGC asks the initializer to lift the GC/PD pause.
	ResumeGC ActionKind = "ResumeGC"
	// DeleteMember deletes the member (its agent cleans per cleanPolicy).
	DeleteMember ActionKind = "DeleteMember"
	// MarkFailed tells the member the backup as a whole failed (spec.backupFailed), so that
	// cleanPolicy OnFailure cleans it even though its own snapshots completed.
	MarkFailed ActionKind = "MarkFailed"
)

// Action is one idempotent change to a member.
type Action struct {
	Kind    ActionKind
	Cluster string
	Phase   dpv1alpha1.BackupMemberPhase
	// BackupTS goes with execute: the initializer's backup ts, shared by every member.
	BackupTS string
	// From is the member's spec phase the SetPhase was planned from: the move tests it.
	From dpv1alpha1.BackupMemberPhase
}

// Result is Plan's decision.
type Result struct {
	Actions []Action
	// Status is the VolumeBackup status to write.
	Status fedv1alpha1.VolumeBackupStatus
	// RemoveFinalizer is set once a deleted backup's members are all gone.
	RemoveFinalizer bool
	// RequeueAfter is set when only time can change the decision (a step timeout to check).
	RequeueAfter time.Duration
}

// Plan decides the next actions and the status of one VolumeBackup at now. Every branch sets
// conditions and status fields only; the phase is derived from them last (phaseOf).
func Plan(o Observed, now time.Time) Result {
	res := decide(o, now)
	res.Status.Phase = phaseOf(&res.Status)
	if res.Status.Phase == fedv1alpha1.VolumeBackupComplete && o.Backup.DeletionTimestamp == nil {
		verify(o, &res.Status, now)
	}
	return res
}

// phaseOf is the one-word phase the rest of the status gives, for print columns. The first
// row that holds wins:
//
//	Cleaned=True                                   Cleaned (never set: a backup whose members are gone is released)
//	Cleaned=False CleanFailed                      CleanFailed
//	Cleaned=False (any other reason)               Cleaning
//	Failed=True                                    Failed
//	Complete=True                                  Complete
//	SnapshotsCreated=True                          SnapshotsCreated
//	no timeStarted                                 Pending (not planned yet)
//	no initializer, Ready=False WaitingForBackup   Pending (waiting at the pause gate)
//	otherwise                                      Running
//
// Only a deleted backup has a Cleaned condition, so deletion needs no row of its own.
func phaseOf(st *fedv1alpha1.VolumeBackupStatus) fedv1alpha1.VolumeBackupPhase {
	is := func(t string) bool { return meta.IsStatusConditionTrue(st.Conditions, t) }
	cleaned := meta.FindStatusCondition(st.Conditions, fedv1alpha1.VolumeBackupCleanedCondition)
	ready := meta.FindStatusCondition(st.Conditions, fedv1alpha1.VolumeBackupReadyCondition)
	switch {
	case cleaned != nil && cleaned.Status == metav1.ConditionTrue:
		return fedv1alpha1.VolumeBackupCleaned
	case cleaned != nil && cleaned.Reason == fedv1alpha1.VolumeBackupCleanFailedReason:
		return fedv1alpha1.VolumeBackupCleanFailed
	case cleaned != nil:
		return fedv1alpha1.VolumeBackupCleaning
	case is(fedv1alpha1.VolumeBackupFailedCondition):
		return fedv1alpha1.VolumeBackupFailed
	case is(fedv1alpha1.VolumeBackupCompleteCondition):
		return fedv1alpha1.VolumeBackupComplete
	case is(fedv1alpha1.VolumeBackupSnapshotsCreatedCondition):
		return fedv1alpha1.VolumeBackupSnapshotsCreated
	case st.TimeStarted == nil,
		st.Initializer == "" && ready != nil && ready.Reason == fedv1alpha1.VolumeBackupWaitingForBackupReason:
		return fedv1alpha1.VolumeBackupPending
	}
	return fedv1alpha1.VolumeBackupRunning
}

// decide is Plan but for the phase.
func decide(o Observed, now time.Time) Result {
	b := o.Backup
	res := Result{Status: *b.Status.DeepCopy()}
	st := &res.Status
	st.ObservedGeneration = b.Generation
	clusters := b.Spec.Clusters

	if b.DeletionTimestamp != nil {
		return planDeletion(o, res, now)
	}
	if meta.IsStatusConditionTrue(st.Conditions, fedv1alpha1.VolumeBackupFailedCondition) ||
		meta.IsStatusConditionTrue(st.Conditions, fedv1alpha1.VolumeBackupCompleteCondition) {
		return planTeardown(o, res, now) // terminal: only make sure every member let go
	}

	for _, c := range clusters {
		if !o.Known[c.K8sClusterName] {
			msg := fmt.Sprintf("no context %q in the manager's kubeconfig", c.K8sClusterName)
			return fail(o, res, now, fedv1alpha1.UnknownClusterReason, msg)
		}
		if msg := federation.NotWatched(o.Namespaces, c.K8sClusterName, c.TCNamespace); msg != "" {
			return fail(o, res, now, fedv1alpha1.NamespaceNotWatchedReason, msg)
		}
	}
	if st.TimeStarted == nil {
		t := metav1.NewTime(now)
		st.TimeStarted = &t
	}
	unreachable := []string{}
	for _, c := range clusters {
		if !o.Reachable[c.K8sClusterName] {
			unreachable = append(unreachable, c.K8sClusterName)
		}
	}
	if st.Initializer == "" && planGate(o, &res, now, beforeMembers) {
		return res
	}
	initializer, wait := chooseInitializer(o, st, now)
	if initializer == "" {
		first := clusters[0].K8sClusterName
		setProgress(st, now, fedv1alpha1.ClusterUnreachableReason,
			fmt.Sprintf("waiting up to %s for %s to answer before another data plane holds the pause", wait.Round(time.Second), first))
		res.RequeueAfter = wait // a plane becoming reachable wakes the reconcile sooner
		return res
	}
	aggregate(o, st)
	if c, name := firstFailed(o); c != nil {
		return fail(o, res, now, fedv1alpha1.MemberFailedReason, fmt.Sprintf("member in %s failed: %s: %s", name, c.Reason, c.Message))
	}
	if name, ok := timedOut(o, b, now); ok {
		return fail(o, res, now, fedv1alpha1.StepTimeoutReason, fmt.Sprintf("member in %s stayed in phase %s longer than stepTimeout (%s); if its step still progresses (fedbr describe shows it), raise spec.template.stepTimeout",
			name, o.Members[name].Phase, b.Spec.Template.EffectiveStepTimeout()))
	}

	if hidden := hiddenMembers(o); len(hidden) > 0 && b.Status.Phase == fedv1alpha1.VolumeBackupSnapshotsCreated {
		// A member this manager cannot see now (its plane unreachable, or its cache not synced
		// yet after a restart) is not a member that was never created: every member had started
		// its snapshots (the phase written last says so), that stands, and the phase never
		// moves back.
		snapshotsCreated(st, now)
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionFalse,
			Reason: fedv1alpha1.ClusterUnreachableReason, Message: fmt.Sprintf("waiting for data planes %v", hidden)}, now)
		res.RequeueAfter = nextTimeout(o, b, now)
		return res
	}
	init := o.Members[initializer]
	armOthers := func() {
		// Every other member starts now, in execute without a backup ts: its agent starts the
		// snapshot step armed, so when the pause is ready only the ts has to travel.
		for _, c := range clusters {
			if c.K8sClusterName != initializer && !o.Members[c.K8sClusterName].Exists {
				res.add(o, Action{Kind: CreateMember, Cluster: c.K8sClusterName, Phase: dpv1alpha1.BackupMemberExecute})
			}
		}
	}
	switch {
	case !init.Exists:
		res.add(o, Action{Kind: CreateMember, Cluster: initializer, Phase: dpv1alpha1.BackupMemberInitialize})
		armOthers()
		setProgress(st, now, fedv1alpha1.VolumeBackupInitializingReason, "pausing GC and PD scheduling in "+initializer)
	case !pauseReady(init) && init.Phase == dpv1alpha1.BackupMemberInitialize:
		armOthers()
		if init.StartPause {
			pauseStarting(st, now, initializer)
			break
		}
		// The pause waits until every snapshot step is armed, so that its window holds no
		// pod start (the slowest part of a step on a busy node).
		var waiting []string
		for _, c := range clusters {
			if !snapshotArmed(o.Members[c.K8sClusterName]) {
				waiting = append(waiting, c.K8sClusterName)
			}
		}
		if len(waiting) == 0 {
			if planGate(o, &res, now, beforePause) {
				return res
			}
			res.add(o, Action{Kind: StartPause, Cluster: initializer})
			pauseStarting(st, now, initializer)
			break
		}
		setProgress(st, now, fedv1alpha1.VolumeBackupArmingReason, fmt.Sprintf("starting the snapshot steps; waiting for %v", waiting))
	default:
		ts := pausedTS(init)
		if ts == 0 {
			return fail(o, res, now, fedv1alpha1.VolumeBackupBadBackupTSReason, fmt.Sprintf("initializer %s is in phase %s, but its pause step reports no backup ts it holds",
				initializer, init.Phase))
		}
		backupTS := strconv.FormatUint(ts, 10)
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionTrue,
			Reason: fedv1alpha1.VolumeBackupInitializingReason, Message: "GC and PD scheduling paused by " + initializer}, now)
		planExecute(o, &res, now, initializer, backupTS)
	}
	if len(unreachable) > 0 {
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionFalse,
			Reason: fedv1alpha1.ClusterUnreachableReason, Message: fmt.Sprintf("waiting for data planes %v", unreachable)}, now)
	}
	res.RequeueAfter = nextTimeout(o, b, now)
	return res
}

// pauseStarting records that the initializer was asked to pause: GCPaused Unknown until the
// pause holds, which the pause gate of other backups of the cluster reads.
func pauseStarting(st *fedv1alpha1.VolumeBackupStatus, now time.Time, initializer string) {
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionUnknown,
		Reason: fedv1alpha1.VolumeBackupPauseStartingReason, Message: "asked " + initializer + " to pause GC and PD scheduling"}, now)
	setProgress(st, now, fedv1alpha1.VolumeBackupInitializingReason, "pausing GC and PD scheduling in "+initializer)
}

// pauseReady says the initializer's pause holds (or held): its step's own report.
func pauseReady(init Member) bool { return pausedTS(init) != 0 }

// pausedTS is the backup ts the initializer's pause holds, from its step's own report; 0 until
// it took hold.
func pausedTS(init Member) uint64 {
	s, _ := dpv1alpha1.Step(init.Status.Steps, dpv1alpha1.StepPause)
	return dpv1alpha1.PauseHeld(s)
}

// snapshotArmed says the member's snapshot step runs (waiting for the backup ts, or further)
// and has not failed: its own report, which the agent's Armed condition repeats one hop later.
// A forged one only starts the pause early (docs/security.md).
func snapshotArmed(m Member) bool { return dpv1alpha1.SnapshotArmed(snapshotStep(m)) }

// snapshotStep is the member's snapshot step's own report.
func snapshotStep(m Member) dpv1alpha1.StepReport {
	s, _ := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot)
	return s
}

// snapshotsComplete says every snapshot of the member completed, with backupmeta final: the
// agent's Complete condition, which it sets only after it found every snapshot its step
// reports completed in AWS, owned by the account, tagged for this backup and taken of this
// cluster's TiKV volumes. The step's own report is writable by anyone who can act as the
// step's service account, so it never completes a backup.
// A member without a backup ts in its spec has snapshotted nothing the manager asked for.
func snapshotsComplete(m Member) bool {
	return memberTrue(m, dpv1alpha1.BackupMemberCompleteCondition) && memberTS(m) > 0
}

// memberTS is the backup ts of a member: the one the manager itself handed it in its spec
// (every member gets the initializer's); 0 when it has none.
func memberTS(m Member) uint64 {
	ts, err := strconv.ParseUint(m.BackupTS, 10, 64)
	if err != nil {
		return 0
	}
	return ts
}

// planExecute runs the snapshot part once the initializer holds the pause.
func planExecute(o Observed, res *Result, now time.Time, initializer, backupTS string) {
	st := &res.Status
	allStarted, allComplete := true, true
	for _, c := range o.Backup.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		switch {
		case !m.Exists:
			res.add(o, Action{Kind: CreateMember, Cluster: c.K8sClusterName, Phase: dpv1alpha1.BackupMemberExecute, BackupTS: backupTS})
		case m.Phase == dpv1alpha1.BackupMemberInitialize || (m.Phase == dpv1alpha1.BackupMemberExecute && m.BackupTS == ""):
			res.add(o, Action{Kind: SetPhase, Cluster: c.K8sClusterName, Phase: dpv1alpha1.BackupMemberExecute, BackupTS: backupTS, From: m.Phase})
		}
		started := dpv1alpha1.SnapshotsStarted(snapshotStep(m))
		allStarted = allStarted && m.Exists && started
		allComplete = allComplete && m.Exists && snapshotsComplete(m)
	}
	init := o.Members[initializer]
	if allStarted {
		if !init.ResumeGC {
			res.add(o, Action{Kind: ResumeGC, Cluster: initializer})
		}
		snapshotsCreated(st, now)
	} else {
		setProgress(st, now, fedv1alpha1.VolumeBackupSnapshottingReason, "members are starting their snapshots")
	}
	markGCResumed(o, st, now)
	if allComplete {
		done := metav1.NewTime(now)
		st.TimeCompleted = &done
		st.TimeTaken = now.Sub(st.TimeStarted.Time).Round(time.Second).String()
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue,
			Reason: fedv1alpha1.AllCompleteReason, Message: "every snapshot completed"}, now)
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionTrue,
			Reason: fedv1alpha1.AllCompleteReason, Message: "backup complete at commit ts " + st.CommitTs}, now)
		teardownAll(o, res)
	}
}

// snapshotsCreated records that every member started its snapshots.
func snapshotsCreated(st *fedv1alpha1.VolumeBackupStatus, now time.Time) {
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupSnapshotsCreatedCondition, Status: metav1.ConditionTrue,
		Reason: fedv1alpha1.VolumeBackupAllSnapshotsStartedReason, Message: "every member started its snapshots"}, now)
}

// chooseInitializer returns the data plane that holds the pause, choosing it once: the first
// cluster, or, if that plane is unreachable when the backup starts, the first reachable one, so
// one plane being down at the start does not stall the backup (upstream always used the first).
//
// The first cluster gets initializerGrace from the backup's start to answer: when the manager
// starts, the planes become reachable one by one, and a plane not probed yet must not lose the
// role to a faster one. Until then it returns "" and how long is left.
func chooseInitializer(o Observed, st *fedv1alpha1.VolumeBackupStatus, now time.Time) (string, time.Duration) {
	if st.Initializer != "" {
		return st.Initializer, 0
	}
	first := o.Backup.Spec.Clusters[0].K8sClusterName
	if left := st.TimeStarted.Add(initializerGrace).Sub(now); !o.Reachable[first] && left > 0 {
		return "", left
	}
	st.Initializer = first
	for _, c := range o.Backup.Spec.Clusters {
		if o.Reachable[c.K8sClusterName] {
			st.Initializer = c.K8sClusterName
			break
		}
	}
	return st.Initializer, 0
}

// initializerGrace is how long a backup waits for its first data plane to answer before
// another plane may hold the pause.
const initializerGrace = 15 * time.Second

// markGCResumed records that the initializer lifted the pause. Snapshots can complete before
// the release is confirmed, so this runs for finished backups too.
func markGCResumed(o Observed, st *fedv1alpha1.VolumeBackupStatus, now time.Time) {
	if st.Initializer == "" || !memberTrue(o.Members[st.Initializer], dpv1alpha1.BackupMemberGCResumedCondition) {
		return
	}
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionFalse,
		Reason: fedv1alpha1.VolumeBackupGCResumedReason, Message: "GC and PD scheduling run again"}, now)
}

// markPauseGone records, for a deleted backup, that its pause is over: the initializer
// reports it lifted, or its member is gone (its agent lifts the pause before it lets the
// member go). Other backups of the same cluster wait for this (gate.go).
func markPauseGone(o Observed, st *fedv1alpha1.VolumeBackupStatus, now time.Time) {
	c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition)
	if st.Initializer == "" || c == nil || c.Status == metav1.ConditionFalse {
		return
	}
	markGCResumed(o, st, now)
	if o.Known[st.Initializer] && o.Reachable[st.Initializer] && !o.Members[st.Initializer].Exists {
		setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionFalse,
			Reason: fedv1alpha1.VolumeBackupGCResumedReason, Message: "the initializer's member is gone, and its pause with it"}, now)
	}
}

// planTeardown keeps a finished backup's members moving to teardown (and the pause lifted).
func planTeardown(o Observed, res Result, now time.Time) Result {
	aggregate(o, &res.Status)
	markGCResumed(o, &res.Status, now)
	teardownAll(o, &res)
	return res
}

// teardownAll moves every member to teardown (the initializer lifting its pause first) and,
// once the backup failed, tells each one so (markFailed).
func teardownAll(o Observed, res *Result) {
	if initializer := res.Status.Initializer; initializer != "" {
		if m := o.Members[initializer]; m.Exists && !m.ResumeGC {
			res.add(o, Action{Kind: ResumeGC, Cluster: initializer})
		}
	}
	for _, c := range o.Backup.Spec.Clusters {
		if m := o.Members[c.K8sClusterName]; m.Exists && m.Phase != dpv1alpha1.BackupMemberTeardown {
			res.add(o, Action{Kind: SetPhase, Cluster: c.K8sClusterName, Phase: dpv1alpha1.BackupMemberTeardown, From: m.Phase})
		}
		markFailed(o, res, c.K8sClusterName)
	}
}

// markFailed tells the member in cluster that the backup as a whole failed, unless it knows:
// its agent cleans it per cleanPolicy on deletion, and OnFailure must clean every plane of a
// failed backup, also the planes whose own snapshots completed, since the backup they belong
// to cannot be restored. Only the manager knows the backup failed (a member sees its own
// snapshots only), so it says so on every member it still sees; the deletion of a failed
// backup does it too before it deletes a member (the plane's actions apply in order), for a
// plane that was unreachable when the backup failed.
func markFailed(o Observed, res *Result, cluster string) {
	if !meta.IsStatusConditionTrue(res.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition) {
		return
	}
	if m := o.Members[cluster]; m.Exists && !m.BackupFailed {
		res.add(o, Action{Kind: MarkFailed, Cluster: cluster})
	}
}

// fail marks the backup failed and tears every member down.
func fail(o Observed, res Result, now time.Time, reason, msg string) Result {
	st := &res.Status
	if st.TimeStarted == nil {
		t := metav1.NewTime(now)
		st.TimeStarted = &t
	}
	done := metav1.NewTime(now)
	st.TimeCompleted = &done
	st.TimeTaken = now.Sub(st.TimeStarted.Time).Round(time.Second).String()
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupFailedCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg}, now)
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}, now)
	aggregate(o, st)
	teardownAll(o, &res)
	return res
}

// planDeletion deletes every member and releases the VolumeBackup once they are gone. A plane
// that is unreachable or no longer in the kubeconfig may still hold a member (and its
// snapshots), so it keeps the finalizer — said in the Ready condition — until the plane answers
// or an SRE sets the force-remove annotation.
func planDeletion(o Observed, res Result, now time.Time) Result {
	var deleting, waiting, failing []string
	for _, c := range o.Backup.Spec.Clusters {
		name := c.K8sClusterName
		switch {
		case !o.Known[name] || !o.Reachable[name]:
			waiting = append(waiting, name)
		case o.Members[name].Exists:
			deleting = append(deleting, name)
			markFailed(o, &res, name)
			res.add(o, Action{Kind: DeleteMember, Cluster: name})
			if f := memberCondition(o.Members[name], dpv1alpha1.BackupMemberCleanedCondition); f != nil && f.Status == metav1.ConditionFalse &&
				(f.Reason == dpv1alpha1.BackupMemberCleanFailedReason || f.Reason == dpv1alpha1.BackupMemberCleanGaveUpReason) {
				failing = append(failing, fmt.Sprintf("member %s/%s in %s: %s", c.TCNamespace, fedv1alpha1.MemberName(o.Backup.Name), name, f.Message))
			}
		}
	}
	if len(deleting) == 0 && (len(waiting) == 0 || o.ForceRemove) {
		res.RemoveFinalizer = true
		return res
	}
	markPauseGone(o, &res.Status, now)
	msg := fmt.Sprintf("deleting members in %v", deleting)
	if len(waiting) > 0 {
		msg = fmt.Sprintf("deleting members in %v; waiting for unreachable or unknown data planes %v (annotate %s=true to remove anyway, leaving their snapshots)", deleting, waiting, fedv1alpha1.AnnotationForceRemove)
	}
	reason, cleanMsg := fedv1alpha1.VolumeBackupCleaningReason, msg
	if len(failing) > 0 {
		// A clean that fails says so on the backup (and so on its schedule), with the member's
		// reason, instead of only in a data plane.
		reason, cleanMsg = fedv1alpha1.VolumeBackupCleanFailedReason, strings.Join(failing, "; ")
		msg = cleanMsg
	}
	setCondition(&res.Status, metav1.Condition{Type: fedv1alpha1.VolumeBackupCleanedCondition, Status: metav1.ConditionFalse, Reason: reason, Message: cleanMsg}, now)
	readyReason := fedv1alpha1.VolumeBackupDeletingReason
	if len(failing) > 0 {
		readyReason = fedv1alpha1.VolumeBackupCleanFailedReason
	}
	setCondition(&res.Status, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionFalse, Reason: readyReason, Message: msg}, now)
	return res
}

// add appends an action unless its cluster is unreachable (it is retried on the next event).
func (r *Result) add(o Observed, a Action) {
	if !o.Reachable[a.Cluster] || slices.Contains(r.Actions, a) {
		return // an action planned twice (execute and teardown both resume GC) is applied once
	}
	r.Actions = append(r.Actions, a)
}

// aggregate copies member statuses into the backup's status. A plane that does not answer
// this pass (unreachable, or its cache not synced after the manager's start) keeps the entry it
// last reported and its share of the sizes: the summary says what is known, not what this pass
// could read.
func aggregate(o Observed, st *fedv1alpha1.VolumeBackupStatus) {
	last := map[string]fedv1alpha1.VolumeBackupMemberStatus{}
	for _, ms := range o.Backup.Status.Backups {
		last[ms.K8sClusterName] = ms
	}
	st.Backups = make([]fedv1alpha1.VolumeBackupMemberStatus, 0, len(o.Backup.Spec.Clusters))
	st.BackupSize, st.IncrementalBackupSize = 0, 0
	var minTS uint64
	allTS := true
	for _, c := range o.Backup.Spec.Clusters {
		m, ok := o.Members[c.K8sClusterName]
		if !ok || !m.Exists {
			allTS = false
			if ms, ok := last[c.K8sClusterName]; ok && !o.Reachable[c.K8sClusterName] {
				st.Backups = append(st.Backups, ms)
				st.BackupSize += ms.BackupSize
				st.IncrementalBackupSize += ms.IncrementalBackupSize
			}
			continue
		}
		ms := fedv1alpha1.VolumeBackupMemberStatus{
			K8sClusterName: c.K8sClusterName, TCName: c.TCName, TCNamespace: c.TCNamespace,
			BackupName: fedv1alpha1.MemberName(o.Backup.Name), Phase: m.Status.Phase, BackupPath: m.Status.BackupPath,
			BackupSize: m.Status.BackupSize, IncrementalBackupSize: m.Status.IncrementalBackupSize, CommitTs: m.Status.CommitTs,
		}
		if f := memberCondition(m, dpv1alpha1.BackupMemberFailedCondition); f != nil && f.Status == metav1.ConditionTrue {
			ms.Reason, ms.Message = f.Reason, f.Message
		}
		st.Backups = append(st.Backups, ms)
		st.BackupSize += m.Status.BackupSize
		st.IncrementalBackupSize += m.Status.IncrementalBackupSize
		// The backup's commit ts is the ts the manager handed its members (spec.backupTS), once
		// each member's agent confirmed its snapshots: never a value a step reported.
		ts := memberTS(m)
		if !snapshotsComplete(m) {
			allTS = false
			continue
		}
		if minTS == 0 || ts < minTS {
			minTS = ts
		}
	}
	if allTS && minTS > 0 {
		st.CommitTs = strconv.FormatUint(minTS, 10)
	}
	// The GC pause window as the pause itself measured it (a pause that was killed lifted
	// nothing: its hold lapsed within its TTL, and no window is given).
	if init, ok := o.Members[st.Initializer]; ok {
		if p, ok := dpv1alpha1.Step(init.Status.Steps, dpv1alpha1.StepPause); ok && p.GCPausedAt != nil && p.LiftedAt != nil {
			st.GCPauseSeconds = strconv.FormatFloat(p.LiftedAt.Sub(p.GCPausedAt.Time).Seconds(), 'f', 3, 64)
		}
	}
	st.BackupSizeReadable = readable(st.BackupSize)
	st.IncrementalBackupSizeReadable = readable(st.IncrementalBackupSize)
}

func readable(n int64) string {
	if n == 0 {
		return ""
	}
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

func firstFailed(o Observed) (*metav1.Condition, string) {
	for _, c := range o.Backup.Spec.Clusters {
		if f := memberCondition(o.Members[c.K8sClusterName], dpv1alpha1.BackupMemberFailedCondition); f != nil && f.Status == metav1.ConditionTrue {
			return f, c.K8sClusterName
		}
	}
	return nil, ""
}

// timedOut finds a member that has been in a non-teardown phase past the step timeout.
func timedOut(o Observed, b *fedv1alpha1.VolumeBackup, now time.Time) (string, bool) {
	limit := b.Spec.Template.EffectiveStepTimeout()
	for _, c := range b.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if !m.Exists || m.PhaseSince.IsZero() || m.Phase == dpv1alpha1.BackupMemberTeardown || snapshotsComplete(m) {
			continue
		}
		if now.Sub(m.PhaseSince) > limit {
			return c.K8sClusterName, true
		}
	}
	return "", false
}

// nextTimeout is how long until the earliest running step would time out (0: none running).
func nextTimeout(o Observed, b *fedv1alpha1.VolumeBackup, now time.Time) time.Duration {
	limit := b.Spec.Template.EffectiveStepTimeout()
	var next time.Duration
	for _, c := range b.Spec.Clusters {
		m := o.Members[c.K8sClusterName]
		if !m.Exists || m.PhaseSince.IsZero() || m.Phase == dpv1alpha1.BackupMemberTeardown {
			continue
		}
		left := m.PhaseSince.Add(limit).Sub(now)
		if next == 0 || left < next {
			next = left
		}
	}
	return max(next, 0)
}

func memberCondition(m Member, t string) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, t)
}

func memberTrue(m Member, t string) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, t)
}

// setCondition sets c with the status's generation; LastTransitionTime moves to now only when
// the condition's status changes.
func setCondition(st *fedv1alpha1.VolumeBackupStatus, c metav1.Condition, now time.Time) {
	c.Message = federation.CutMessage(c.Message)
	c.ObservedGeneration = st.ObservedGeneration
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&st.Conditions, c)
}

// setProgress says, in the Ready condition, what the backup waits for.
func setProgress(st *fedv1alpha1.VolumeBackupStatus, now time.Time, reason, msg string) {
	setCondition(st, metav1.Condition{Type: fedv1alpha1.VolumeBackupReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}, now)
}

// hiddenMembers are the planes whose member the manager does not see because it cannot read
// the plane right now.
func hiddenMembers(o Observed) []string {
	var out []string
	for _, c := range o.Backup.Spec.Clusters {
		if !o.Reachable[c.K8sClusterName] && !o.Members[c.K8sClusterName].Exists {
			out = append(out, c.K8sClusterName)
		}
	}
	return out
}

// RecordFirst says the plan makes a decision that its actions act on and that must be in the
// status before they run: the data plane that holds the pause (a pass repeated after a crash
// between creating its member and writing the status could choose another one, when
// reachability changed meanwhile), and that the pause was asked for (the pause gate of every
// other backup of the TiDB cluster reads it). A completion is recorded first too: it is
// what the user waits for, the members' teardown that follows changes nothing about it, and a
// Complete backup keeps tearing its members down (planTeardown) if the pass ends between the
// two.
func RecordFirst(before fedv1alpha1.VolumeBackupStatus, res Result) bool {
	if before.Initializer == "" && res.Status.Initializer != "" && len(res.Actions) > 0 {
		return true
	}
	if !meta.IsStatusConditionTrue(before.Conditions, fedv1alpha1.VolumeBackupCompleteCondition) &&
		meta.IsStatusConditionTrue(res.Status.Conditions, fedv1alpha1.VolumeBackupCompleteCondition) && len(res.Actions) > 0 {
		return true
	}
	return slices.ContainsFunc(res.Actions, func(a Action) bool { return a.Kind == StartPause })
}
