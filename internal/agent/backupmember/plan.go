// Package backupmember is the agent's VolumeBackupMember controller: one data plane's part of
// a federated volume-snapshot backup.
//
// The decisions are one pure function, Plan, over what the reconciler observed (the member,
// the TidbCluster, the TiKV volumes, the step Jobs and their reports in status.steps). It
// returns the actions to apply and the member status to write; it reads no clock and no
// client, so every transition is a table test.
//
// The member's protocol:
//   - initialize (initializer only): run `fedbr br pause` and hold it; Initialized=True with
//     the pause's backup ts once it reports Ready;
//   - execute: run `fedbr br snapshot` at spec.backupTS; SnapshotsCreated=True once every
//     snapshot started, Complete=True when they all completed;
//   - then, off the critical path, `fedbr br size` per calcSizeLevel: Sized=True with the
//     full and incremental sizes (Sized=False on failure; the member stays Complete);
//   - resumeGC / teardown / failure: stop the pause at once; GCResumed=True when it reports
//     everything lifted;
//   - a pause that ended without lifting what it recorded placing in PD (killed): run `fedbr
//     br lift`; GCResumed=True once it reports PD holds none of it;
//   - deletion: lift the pause, stop a running snapshot, clean per cleanPolicy (`fedbr br
//     clean` with retries and backoff, surfaced as Cleaned=False), then drop the finalizer.
package backupmember

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
)

// Finalizer keeps a member until its data plane let go of everything (pause lifted, snapshots
// cleaned per cleanPolicy).
const Finalizer = "dataplane.fedbr.io/agent"

// ForceRemoveAnnotation set to "true" lets an SRE drop the finalizer of a member whose clean
// keeps failing; whatever was not cleaned stays (and is tagged with the backup id).
const ForceRemoveAnnotation = "fedbr.io/force-remove"

// MaxCleanAttemptsAnnotation on a member raises (or lowers) its bound on clean attempts; a
// member that gave up tries again once the bound is above the attempts it made.
const MaxCleanAttemptsAnnotation = "fedbr.io/max-clean-attempts"

// DefaultMaxCleanAttempts bounds a member's clean attempts: with the backoff (10 s doubling
// to 10 min) about 40 minutes of retries beside the attempts' own run time.
const DefaultMaxCleanAttempts = 10

// Kind is the member kind this package reconciles.
const Kind = "VolumeBackupMember"

// Files of the inputs ConfigMap mounted in the snapshot Job.
const (
	VolumesKey     = "volumes.json"
	TidbClusterKey = "tidbcluster.json"
	inputsMount    = "/etc/fedbr/backup"
	inputsVolume   = "fedbr-backup-inputs"
)

// Phases of status.phase, derived by phaseOf.
const (
	PhasePending      = "Pending"
	PhaseInitializing = "Initializing"
	PhasePaused       = "Paused"
	PhaseSnapshotting = "Snapshotting"
	// PhaseArmed: the snapshot step runs and waits for the backup ts.
	PhaseArmed            = "Armed"
	PhaseSnapshotsCreated = "SnapshotsCreated"
	PhaseComplete         = "Complete"
	PhaseFailed           = "Failed"
	PhaseCleaning         = "Cleaning"
	PhaseCleanFailed      = "CleanFailed"
)

// Phases are every Phase* above (held to them by TestPhasesListsEveryPhase).
var Phases = []string{PhasePending, PhaseArmed, PhaseInitializing, PhasePaused, PhaseSnapshotting, PhaseSnapshotsCreated,
	PhaseComplete, PhaseFailed, PhaseCleaning, PhaseCleanFailed}

// MetricsKind is this kind's phases and step Jobs for the agent's metrics.
func MetricsKind() metrics.Kind {
	return metrics.Kind{Name: Kind, Phases: Phases, Steps: []string{job.StepPause, job.StepSnapshot, job.StepSize, job.StepClean, job.StepLift}}
}

// Clean retries back off from cleanBackoffBase, doubling to cleanBackoffMax.
const (
	cleanBackoffBase = 10 * time.Second
	cleanBackoffMax  = 10 * time.Minute
)

// Observed is everything Plan decides from.
type Observed struct {
	Member *dpv1alpha1.VolumeBackupMember
	// TC is the member's TidbCluster; nil when it does not exist.
	TC *pcv1alpha1.TidbCluster
	// Cluster is the TiKV side of TC, observed only when NeedsDiscovery says so.
	Cluster *Cluster
	// Pause, Snapshot, Size, Clean and Lift are the step Jobs; CleanAttempt numbers the clean
	// Job observed (the newest attempt; 0 when none ever ran).
	Pause, Snapshot, Size, Clean, Lift job.State
	CleanAttempt                       int
	// Report is what the member's steps reported (its status.steps).
	Report job.Report
	// Confirm is what the agent found itself of the snapshots a completion report names,
	// observed only when NeedsConfirmation says so; the member completes only on it.
	Confirm *Confirmation
	// Env is the agent's configuration.
	Env job.Env
	// Refusals are the agent's policy's verdict on the member (policy.Policy.Check): a member
	// that breaks a rule fails before any Job is planned for it, and no Job is ever created
	// for it.
	Refusals []policy.Violation
	// Policy judges the pod of every Job as it is built (policy.Policy.CheckPod); nil judges
	// nothing.
	Policy *policy.Policy
}

// ActionKind says what an Action does.
type ActionKind string

// Action kinds, applied in the order Plan returns them.
const (
	// EnsureConfigMap creates ConfigMap unless it exists (the snapshot step's inputs).
	EnsureConfigMap ActionKind = "EnsureConfigMap"
	// EnsureServiceAccount creates the steps' service account, Role and RoleBinding.
	EnsureServiceAccount ActionKind = "EnsureServiceAccount"
	// ResetStep removes the step Name's entry from the member's status.steps (before a retried
	// step reports).
	ResetStep ActionKind = "ResetStep"
	// CreateJob creates Job.
	CreateJob ActionKind = "CreateJob"
	// StopJob suspends the Job Name and deletes its pods: they get SIGTERM, on which the pause
	// lifts everything and a snapshot deletes what it created.
	StopJob ActionKind = "StopJob"
	// DeleteJob deletes the Job Name with its pods.
	DeleteJob ActionKind = "DeleteJob"
)

// Action is one idempotent change.
type Action struct {
	Kind      ActionKind
	Job       *batchv1.Job
	ConfigMap *corev1.ConfigMap
	Name      string
}

func (a Action) String() string {
	switch {
	case a.Job != nil:
		return string(a.Kind) + " " + a.Job.Name
	case a.ConfigMap != nil:
		return string(a.Kind) + " " + a.ConfigMap.Name
	case a.Name != "":
		return string(a.Kind) + " " + a.Name
	}
	return string(a.Kind)
}

// Result is Plan's decision.
type Result struct {
	Actions []Action
	Status  dpv1alpha1.VolumeBackupMemberStatus
	// RequeueAfter is set only when time alone changes the decision (a clean retry's backoff,
	// the end of a snapshot wait's stall window).
	RequeueAfter time.Duration
	// RemoveFinalizer releases the agent's finalizer: the loop does it after the status.
	RemoveFinalizer bool
}

// plan carries one planning step.
type plan struct {
	o   Observed
	m   *dpv1alpha1.VolumeBackupMember
	now time.Time
	res Result
	// ensured is set once ensureCommon added its actions to this plan.
	ensured bool
}

// Plan decides the actions and the status of one member at now. Every step sets conditions and
// status fields only; the phase is derived from them last (phaseOf).
func Plan(o Observed, now time.Time) Result {
	p := &plan{o: o, m: o.Member, now: now, res: Result{Status: *o.Member.Status.DeepCopy()}}
	p.res.Status.ObservedGeneration = p.m.Generation
	if p.res.Status.TimeStarted == nil {
		p.res.Status.TimeStarted = ptr.To(metav1.NewTime(now.UTC().Truncate(time.Second)))
	}
	if p.m.DeletionTimestamp != nil {
		p.planDeletion()
	} else {
		p.observePause()
		p.observeSnapshot()
		p.refuse()
		p.planPause()
		p.planLift()
		if len(o.Refusals) == 0 {
			p.planSnapshot() // it records the storage it would write to
		}
		p.planSize()
	}
	p.res.Status.Phase = phaseOf(&p.res.Status, p.m, runningOf(o.Report))
	p.res.Actions = prerequisitesFirst(p.res.Actions)
	return p.res
}

// running says which steps run for the member, by their own reports in status.steps: a step
// counts once it reported itself (its first report is before it does anything), never by its
// Job, so the phase is a function of the member alone and reads the same after any restart.
type running struct{ pause, snapshot bool }

func runningOf(r job.Report) running {
	_, pause := r.Step(job.StepPause)
	_, snapshot := r.Step(job.StepSnapshot)
	return running{pause: pause, snapshot: snapshot}
}

// phaseOf is the one-word phase of member m with status st, for print columns and the
// members metric. The first row that holds wins:
//
//	deleted, Cleaned=False CleanFailed or CleanGaveUp   CleanFailed
//	deleted                                             Cleaning
//	Failed=True                                         Failed
//	Complete=True                                       Complete
//	SnapshotsCreated=True                               SnapshotsCreated
//	the snapshot step reported, spec.backupTS is set    Snapshotting
//	Initialized=True                                    Paused
//	the pause step reported, spec.startPause is set     Initializing
//	the snapshot step reported                          Armed (waiting for the backup ts)
//	otherwise                                           Pending
func phaseOf(st *dpv1alpha1.VolumeBackupMemberStatus, m *dpv1alpha1.VolumeBackupMember, run running) string {
	is := func(t string) bool { return condition.IsTrue(st.Conditions, t) }
	switch {
	case m.DeletionTimestamp != nil:
		if c := findCondition(st.Conditions, dpv1alpha1.BackupMemberCleanedCondition); c != nil &&
			(c.Reason == dpv1alpha1.BackupMemberCleanFailedReason || c.Reason == dpv1alpha1.BackupMemberCleanGaveUpReason) {
			return PhaseCleanFailed
		}
		return PhaseCleaning
	case is(dpv1alpha1.BackupMemberFailedCondition):
		return PhaseFailed
	case is(dpv1alpha1.BackupMemberCompleteCondition):
		return PhaseComplete
	case is(dpv1alpha1.BackupMemberSnapshotsCreatedCondition):
		return PhaseSnapshotsCreated
	case run.snapshot && m.Spec.BackupTS != "":
		return PhaseSnapshotting
	case is(dpv1alpha1.BackupMemberInitializedCondition):
		return PhasePaused
	case run.pause && m.Spec.StartPause:
		return PhaseInitializing
	case run.snapshot:
		return PhaseArmed
	}
	return PhasePending
}

// prerequisitesFirst moves the Ensure actions ahead of the others (keeping both groups'
// order): they only create what Jobs need, so moving them is safe, and the Jobs planned
// together then follow one another, which lets the controller create them at once.
func prerequisitesFirst(as []Action) []Action {
	out := make([]Action, 0, len(as))
	for _, a := range as {
		if a.Kind == EnsureConfigMap || a.Kind == EnsureServiceAccount {
			out = append(out, a)
		}
	}
	for _, a := range as {
		if a.Kind != EnsureConfigMap && a.Kind != EnsureServiceAccount {
			out = append(out, a)
		}
	}
	return out
}

// NeedsDiscovery says Plan is about to start the snapshot step and needs Observed.Cluster.
func NeedsDiscovery(m *dpv1alpha1.VolumeBackupMember, snapshot job.State, r job.Report) bool {
	_, reported := r.Step(job.StepSnapshot)
	// The snapshot step starts as soon as the member exists (also the initializer, beside its
	// pause): armed, it waits for the backup ts, so the pause window never holds a pod start.
	armable := m.Spec.Phase == dpv1alpha1.BackupMemberExecute || m.Spec.Phase == dpv1alpha1.BackupMemberInitialize
	return m.DeletionTimestamp == nil && armable && !snapshot.Exists() && !reported &&
		!condition.IsTrue(m.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition) &&
		!condition.IsTrue(m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition)
}

func (p *plan) add(a Action) { p.res.Actions = append(p.res.Actions, a) }

// requeueIn has the member looked at again in d at the latest.
func (p *plan) requeueIn(d time.Duration) {
	if d > 0 && (p.res.RequeueAfter == 0 || d < p.res.RequeueAfter) {
		p.res.RequeueAfter = d
	}
}

func (p *plan) set(t string, s metav1.ConditionStatus, reason, msg string, at time.Time) {
	condition.Set(&p.res.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg},
		p.m.Generation, at, p.now)
}

func (p *plan) isTrue(t string) bool { return condition.IsTrue(p.res.Status.Conditions, t) }

// fail sets Failed (once: the first failure is the one that explains the others).
func (p *plan) fail(reason, msg string) {
	if p.isTrue(dpv1alpha1.BackupMemberFailedCondition) {
		return
	}
	p.set(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, reason, msg, time.Time{})
	if p.res.Status.TimeCompleted == nil {
		p.res.Status.TimeCompleted = ptr.To(metav1.NewTime(p.now.UTC().Truncate(time.Second)))
	}
}

// stopRequested says the pause must be lifted now.
func (p *plan) stopRequested() bool {
	return p.m.Spec.ResumeGC || p.m.Spec.Phase == dpv1alpha1.BackupMemberTeardown || p.m.DeletionTimestamp != nil ||
		p.isTrue(dpv1alpha1.BackupMemberFailedCondition)
}

// observePause turns the pause's report and Job into Initialized, GCResumed and Failed.
func (p *plan) observePause() {
	st, reported := p.o.Report.Step(job.StepPause)
	if reported && st.BackupTS > 0 && (st.Phase == job.PhaseReady || st.Phase == job.PhaseStopping || st.Phase == job.PhaseStopped ||
		p.isTrue(dpv1alpha1.BackupMemberInitializedCondition)) {
		if st.Phase == job.PhaseReady || !p.isTrue(dpv1alpha1.BackupMemberInitializedCondition) {
			at := timeOf(st.GCPausedAt)
			p.set(dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason,
				fmt.Sprintf("GC safepoint, PD schedulers and TiKV leases of %d stores held at backup ts %d", st.Stores, st.BackupTS), at)
		}
	}
	if p.isTrue(dpv1alpha1.BackupMemberGCResumedCondition) {
		return
	}
	p.observePauseFailure(st, reported)
	p.observeResume(st, reported)
}

// observePauseFailure fails the member when the pause broke while nothing had asked it to stop.
func (p *plan) observePauseFailure(st dpv1alpha1.StepReport, reported bool) {
	pj := p.o.Pause
	if p.stopRequested() || pj.Suspended {
		return
	}
	switch {
	case reported && (st.Phase == job.PhaseStopped || st.Phase == job.PhaseStopping):
		// A pause stops on its own only on SIGTERM: its pod was deleted or evicted. It lifted
		// (or lifts) what it held, but the manager did not ask for it, so the snapshots may
		// not all have started under it.
		p.fail(dpv1alpha1.BackupMemberPauseEndedUnaskedReason, "the pause step stopped (its pod was deleted or evicted) before the manager asked it to lift: snapshots may have started after the pause ended")
	case pj.Phase == job.Succeeded:
		p.fail(dpv1alpha1.BackupMemberPauseEndedUnaskedReason, "the pause Job completed before the manager asked it to lift: snapshots may have started after the pause ended")
	case reported && st.Phase == job.PhaseFailed:
		p.fail(dpv1alpha1.BackupMemberPauseFailedReason, "the pause failed: "+st.Error)
	case pj.Phase == job.Failed && pj.Reason == job.ReasonDeadlineExceeded:
		p.fail(dpv1alpha1.DeadlineExceededReason, fmt.Sprintf("the pause was held longer than volumeBackupInitJobMaxActiveSeconds (%s) and was stopped: %s",
			p.m.Spec.Template.EffectiveInitJobDeadline(), pj.FailureText()))
	case pj.Phase == job.Failed:
		p.fail(dpv1alpha1.BackupMemberPauseJobFailedReason, pj.FailureText())
	}
}

// observeResume sets GCResumed: True only once the pause reports it lifted what it held, or
// the lift step reports that PD holds nothing of what the pause recorded placing — never
// because the pause Job merely stopped, and never from a Job that succeeded: both steps write
// their last status with their result before they exit 0, so their reports are the one source
// of a lift; the Jobs count only for a pause that ended without one. A pause that ended
// without lifting and recorded no identity (it placed nothing) counts as resumed: nothing can
// be lifted by identity, and what it may hold lapses within its TTL.
func (p *plan) observeResume(st dpv1alpha1.StepReport, reported bool) {
	pj := p.o.Pause
	lift, liftReported := p.o.Report.Step(job.StepLift)
	stopped := p.stopRequested() || pj.Suspended
	// ended: the pause will not lift anything any more (or its failure report says so).
	ended := pj.Phase == job.Failed || reported && !pj.Exists() || reported && st.Phase == job.PhaseFailed && stopped
	switch {
	case reported && st.LiftedAt != nil:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseLiftedReason,
			"GC safepoint, PD schedulers and TiKV leases lifted", timeOf(st.LiftedAt))
	case reported && st.Phase == job.PhaseStopped:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseLiftedReason,
			"the pause stopped before it pinned anything", timeOf(st.Since))
	case liftReported && lift.Phase == job.PhaseLifted:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberLiftedReason,
			p.unlifted(st)+"; the lift step removed it and PD holds none of it", timeOf(lift.LiftedAt))
	case !ended:
	case reported && dpv1alpha1.HasPauseIdentity(st):
		p.observeLift(st, lift, liftReported)
	case reported && st.Phase == job.PhaseFailed:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseEndedReason,
			"the pause ended with an error ("+st.Error+") without recording anything it placed in PD; whatever it still holds lapses within its TTL", timeOf(st.Since))
	default:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseEndedReason,
			pj.FailureText()+" without recording anything it placed in PD; whatever the pause still holds lapses within its TTL", pj.Finished)
	}
}

// planPause starts the pause for an initializer and stops it as soon as it may be lifted.
func (p *plan) planPause() {
	pj := p.o.Pause
	if pj.Exists() && !pj.Done() && p.stopRequested() {
		p.stopPause()
		return
	}
	_, reported := p.o.Report.Step(job.StepPause)
	// The pause Job starts at once, armed (--wait-start); it pins GC only once the manager
	// sets the member's spec.startPause (every member's snapshot step is armed): the GC pause
	// window then holds the ts hop and the snapshots, never a pod start.
	if p.m.Spec.Phase != dpv1alpha1.BackupMemberInitialize || pj.Exists() || reported || p.stopRequested() ||
		p.isTrue(dpv1alpha1.BackupMemberInitializedCondition) {
		return
	}
	if p.o.TC == nil {
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, p.tcMissing())
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.fail(dpv1alpha1.NoPDAddressReason, err.Error())
		return
	}
	args := []string{"br", job.StepPause, "--pd", strings.Join(pd, ","), "--member", p.m.Name, "--wait-start", "--watch-release"}
	spec := p.jobSpec(job.StepPause, args)
	spec.BackoffLimit = 0
	spec.ActiveDeadlineSeconds = int64(p.m.Spec.Template.EffectiveInitJobDeadline() / time.Second)
	p.createJob(spec)
}

// stopPause stops a running pause Job (SIGTERM through its pod's deletion) for what only the
// agent decides: a failed member the manager has not asked to lift yet. What the manager asks
// (spec.resumeGC, teardown) and the member's deletion reach the pause on one route, the member
// it watches (--watch-release); a pause that cannot watch it lifts everything and fails at once.
func (p *plan) stopPause() {
	asked := p.m.Spec.ResumeGC || p.m.Spec.Phase == dpv1alpha1.BackupMemberTeardown || p.m.DeletionTimestamp != nil
	if pj := p.o.Pause; pj.Exists() && !pj.Done() && !pj.Suspended && !asked && p.isTrue(dpv1alpha1.BackupMemberFailedCondition) {
		p.add(Action{Kind: StopJob, Name: pj.Name})
	}
}

func (p *plan) tcMissing() string {
	return fmt.Sprintf("TidbCluster %s/%s not found in data plane %s", p.m.Spec.TCNamespace, p.m.Spec.TCName, p.m.Spec.K8sClusterName)
}

// ensureCommon creates what every step needs before its Job: without a template service
// account, the steps' own (which may read its member and report in its status).
func (p *plan) ensureCommon() {
	if p.ensured {
		return
	}
	p.ensured = true
	if p.m.Spec.Template.ServiceAccount == "" {
		p.add(Action{Kind: EnsureServiceAccount, Name: job.ServiceAccountName})
	}
}

// refuse fails a member the agent's policy refuses (Observed.Refusals), unless it completed or
// failed already (the policy changed since); either way createJob creates no Job for it.
func (p *plan) refuse() {
	if len(p.o.Refusals) > 0 && !p.isTrue(dpv1alpha1.BackupMemberCompleteCondition) {
		p.fail(policy.Reason(p.o.Refusals), policy.Message(p.o.Refusals))
	}
}

// createJob adds the Job of spec after what every step needs (ensureCommon) and first, unless
// the agent's policy refuses the member (Observed.Refusals) or the Job's pod (the last line:
// job.BuildGuarded with the policy's CheckPod). A refused Job is not added, and the condition of
// its step says why, naming the rules (refused); createJob then says false.
func (p *plan) createJob(spec job.Spec, first ...Action) bool {
	j, refusals := job.BuildGuarded(spec, p.o.Policy.CheckPod)
	if len(p.o.Refusals) > 0 {
		refusals = p.o.Refusals
	}
	if len(refusals) > 0 {
		p.refused(spec.Step, refusals)
		return false
	}
	p.ensureCommon()
	p.res.Actions = append(p.res.Actions, first...)
	p.add(Action{Kind: CreateJob, Job: j})
	return true
}

// refused records that the policy refused the Job of step: the member fails, except for the
// steps that report on their own condition (a clean, a size, a lift).
func (p *plan) refused(step string, vs []policy.Violation) {
	msg := policy.Message(vs)
	switch step {
	case job.StepClean:
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleanFailedReason,
			fmt.Sprintf("cannot clean: %s (annotation %s=true removes the member without cleaning)", msg, ForceRemoveAnnotation), time.Time{})
	case job.StepSize:
		p.sizeFailed(msg)
	case job.StepLift:
		p.liftFailed("cannot start the lift step: " + msg)
	default:
		p.fail(policy.Reason(vs), msg)
	}
}

// deadline is a step Job's activeDeadlineSeconds. The snapshot step runs in the phases the
// manager times (stepTimeout): its verdict fails the backup, the teardown stops the step, so its
// Job gets none (one bound, one enforcement). The size, clean and lift steps run where nothing
// else times them: their Job's deadline (stepTimeout) is their bound. The pause's is its own
// (volumeBackupInitJobMaxActiveSeconds, set by planPause).
func deadline(step string, t *fedv1alpha1.VolumeBackupMemberSpec) int64 {
	if step == job.StepSnapshot {
		return 0
	}
	return int64(t.EffectiveStepTimeout() / time.Second)
}

// jobSpec is the Job of one step with everything the template says about pods.
func (p *plan) jobSpec(step string, args []string) job.Spec {
	t := &p.m.Spec.Template
	sa := t.ServiceAccount
	if sa == "" {
		sa = job.ServiceAccountName
	}
	// A step that dials PD or TiKV of a TidbCluster with tlsCluster gets its client secret.
	return job.WithClusterTLS(job.Spec{
		Member: p.m.Name, Namespace: p.m.Namespace, Owner: ownerRef(p.m), OwnerKind: Kind, Step: step,
		Image: p.o.Env.ImageOr(t.ToolImage), Args: args,
		ActiveDeadlineSeconds:   deadline(step, t),
		TTLSecondsAfterFinished: p.o.Env.TTLSeconds(), ExitDelay: p.o.Env.StepExitDelay,
		Labels: p.m.Labels, Annotations: p.m.Annotations, AllowedAnnotations: p.o.Env.PodAnnotations,
		AllowedLabels: p.o.Env.PodLabels,
		Pod: job.PodTemplate{
			Env: t.Env, Resources: t.ResourceRequirements, Tolerations: t.Tolerations,
			PriorityClassName: t.PriorityClassName, ImagePullSecrets: t.ImagePullSecrets, ServiceAccount: sa,
			Volumes: append([]corev1.Volume(nil), t.AdditionalVolumes...), VolumeMounts: append([]corev1.VolumeMount(nil), t.AdditionalVolumeMounts...),
		},
	}, p.o.TC)
}

// withStorage adds the storage flag, mounts and credentials to a step.
func withStorage(spec *job.Spec, st job.Storage) {
	spec.Pod.Volumes = append(spec.Pod.Volumes, st.Volumes...)
	spec.Pod.VolumeMounts = append(spec.Pod.VolumeMounts, st.VolumeMounts...)
	spec.Pod.Env = append(append([]corev1.EnvVar(nil), st.Env...), spec.Pod.Env...)
}

func ownerRef(m *dpv1alpha1.VolumeBackupMember) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: dpv1alpha1.GroupVersion.String(), Kind: Kind,
		Name: m.Name, UID: m.UID, Controller: ptr.To(true)}
}

func timeOf(t *metav1.MicroTime) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// storageOf is the member's storage.
func storageOf(t *fedv1alpha1.VolumeBackupMemberSpec) (job.Storage, error) {
	return job.StorageFor(t.StorageProvider)
}
