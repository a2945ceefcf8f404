// Package restoremember is the agent's VolumeRestoreMember controller: one data plane's part
// of a federated volume-snapshot restore.
//
// As for backups, the decisions are one pure function, Plan, over what the reconciler
// observed: the member, the target TidbCluster and its TiKV pods, the step Jobs and their
// reports in status.steps (restore-volumes' report is all the agent learns of the backup: it
// reads no storage), and the PVs/PVCs the agent created.
//
// The member's protocol:
//   - restore-volume: validate (TidbCluster exists in recovery mode, BR options sane), run
//     `fedbr br restore-volumes`, which reads the backup with the operation's identity and
//     reports it; check the target against that report (TiKV count equals the backup's store
//     count, TiKV encryption at rest, volume layout, claims: TargetChecked, which the step waits for before it creates
//     any volume); rebuild the TiKV PVs/PVCs from the reported backup and the step's result
//     for the target TidbCluster (VolumeComplete), warm up (WarmUpComplete), annotate the TidbCluster tikv-volumes-ready and wait until its
//     stores are up (TikvComplete);
//   - restore-data (one member): run `fedbr br restore-data` for the whole cluster
//     (DataComplete). The manager marks that member (spec.dataMember) early; its step is then
//     started armed (--wait-start) as soon as the volumes are restored, and goes on the
//     member's phase restore-data, which the manager sets once TiKV runs everywhere;
//   - restore-finish: clear spec.recoveryMode, restart the TiKV pods that ran in recovery
//     mode, and wait until they are back and their stores up (Complete);
//   - deletion of an unfinished restore: stop the steps, delete the PVCs and PVs created and
//     every EBS volume tagged with the restore id (VolumesCleaned), then drop the finalizer. A
//     complete restore's volumes belong to the TidbCluster and are never touched.
//   - a scratch restore (template.scratch) first makes its TidbCluster from the one the backup
//     saved (the tidbcluster step reports it; TidbClusterCreated), and its deletion, complete or
//     not, removes that TidbCluster and its claims before the rest (scratch.go).
package restoremember

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

// Kind is the member kind this package reconciles.
const Kind = "VolumeRestoreMember"

// Finalizer keeps a member until the volumes of an unfinished restore are deleted.
const Finalizer = "dataplane.fedbr.io/agent"

// ForceRemoveAnnotation set to "true" drops the finalizer without deleting anything.
const ForceRemoveAnnotation = "fedbr.io/force-remove"

// AnnotationRecoveryPods records, when restore-finish begins, the uids of the TiKV pods that
// ran in recovery mode: they are restarted, and the restore completes once none is left.
const AnnotationRecoveryPods = "dataplane.fedbr.io/recovery-pods"

// ReasonTagsDropped is the Warning event's reason when restored volumes lose tags copied from
// their snapshots to stay within AWS's 50 tags per volume.
const ReasonTagsDropped = "TagsDropped"

// ReasonWithoutFSR is the Warning event's reason when restore-volumes restored data volumes
// without the fast snapshot restore asked for (the region's FSR quota was full, a snapshot
// over 16 TiB, AWS refused it); the warm-up reads those volumes instead.
const ReasonWithoutFSR = "WithoutFSR"

// Phases of status.phase, derived by phaseOf.
const (
	PhasePending          = "Pending"
	PhaseRestoringVolumes = "RestoringVolumes"
	PhaseVolumeComplete   = "VolumeComplete"
	PhaseTikvComplete     = "TikvComplete"
	PhaseRestoringData    = "RestoringData"
	PhaseDataComplete     = "DataComplete"
	PhaseFinishing        = "Finishing"
	PhaseComplete         = "Complete"
	PhaseFailed           = "Failed"
	PhaseCleaning         = "Cleaning"
	PhaseCleanFailed      = "CleanFailed"
)

// Phases are every Phase* above (held to them by TestPhasesListsEveryPhase).
var Phases = []string{PhasePending, PhaseRestoringVolumes, PhaseVolumeComplete, PhaseTikvComplete, PhaseRestoringData,
	PhaseDataComplete, PhaseFinishing, PhaseComplete, PhaseFailed, PhaseCleaning, PhaseCleanFailed}

// MetricsKind is this kind's phases and step Jobs for the agent's metrics.
func MetricsKind() metrics.Kind {
	return metrics.Kind{Name: Kind, Phases: Phases, Steps: []string{job.StepTidbCluster, job.StepRestoreVolumes, job.StepRestoreData, job.StepWarmup, job.StepVerify, job.StepCheck}}
}

// cloudRecheck is how soon what cannot be watched (EC2) is looked at again.
const cloudRecheck = 10 * time.Second

// TiKVPod is what Plan needs of one TiKV pod.
type TiKVPod struct {
	Name     string
	UID      types.UID
	Ready    bool
	Deleting bool
	// Node is the node it runs on ("" before it is scheduled).
	Node string
	// Claims are the PVCs it mounts.
	Claims []string
}

// Observed is everything Plan decides from.
type Observed struct {
	Member *dpv1alpha1.VolumeRestoreMember
	// TC is the target TidbCluster; nil when it does not exist.
	TC *pcv1alpha1.TidbCluster
	// BackupMeta is the backup as the restore-volumes step reported it in its entry
	// (ReportedBackup: bounded and validated), before it creates any volume; BackupMetaErr
	// says why the report was refused. The agent reads no backup storage itself.
	BackupMeta    *meta.Record
	BackupMetaErr error
	// RestoreMeta is the restoremeta the claims are rebuilt from: BackupMeta with the restored
	// volumes of the step's result (ReportedRestore), once restore-volumes succeeded;
	// RestoreMetaErr says why it was refused.
	RestoreMeta    *meta.Record
	RestoreMetaErr error
	// RestoreVolumes, RestoreData, Verify, Check and TidbCluster (a scratch restore's) are the
	// step Jobs; Warmups the warm-up Jobs by name.
	RestoreVolumes, RestoreData, Verify, Check, TidbCluster job.State
	Warmups                                                 map[string]job.State
	Report                                                  job.Report
	// PVCs and PVs are those the agent created for this restore, by name.
	PVCs map[string]*corev1.PersistentVolumeClaim
	PVs  map[string]*corev1.PersistentVolume
	// TargetClaims are every claim in the target namespace, by name, read from the API server
	// while the restore is about to create volumes or claims (NeedsTargetClaims); nil when not
	// read.
	TargetClaims map[string]*corev1.PersistentVolumeClaim
	// OperatorClaims are the claims tidb-operator made for a scratch restore's TidbCluster (its
	// app.kubernetes.io/instance, managed by tidb-operator, not the restore's own), by name, and
	// OperatorPVs the PVs they are bound to, by name: read only while a scratch restore that
	// made its TidbCluster is deleted, once that TidbCluster is gone.
	OperatorClaims map[string]*corev1.PersistentVolumeClaim
	OperatorPVs    map[string]*corev1.PersistentVolume
	// Pods are the target TidbCluster's TiKV pods.
	Pods []TiKVPod
	// RestoredVolumes are the volumes the restoremeta names, by id, described while their
	// claims are about to be created (RestoredVolumesErr says why they could not be): each must
	// carry the restore's identity before a PV binds it (meta.CheckRestoredVolume), and the
	// operator tags before the volumes are complete. A volume EC2 did not describe is absent.
	RestoredVolumes    map[string]cloud.Volume
	RestoredVolumesErr error
	// CloudVolumes are the EBS volumes tagged with the restore id, listed only while deleting
	// an unfinished restore once its PVs are gone; CloudErr says why they could not be.
	CloudVolumes []string
	CloudListed  bool
	CloudErr     error
	Env          job.Env
	// Refusals are the agent's policy's verdict on the member (policy.Policy.Check): a member
	// that breaks a rule fails before any Job is planned for it, and no Job is ever created
	// for it.
	Refusals []policy.Violation
	// Policy judges the pod of every Job as it is built (policy.Policy.CheckPod); nil judges
	// nothing.
	Policy *policy.Policy
}

// NeedsCheck says Plan is about to check the target against the backup restore-volumes
// reported (its entry's backup, in phase AwaitingCheck): the step waits for TargetChecked.
func NeedsCheck(m *dpv1alpha1.VolumeRestoreMember, r job.Report) bool {
	st, reported := r.Step(job.StepRestoreVolumes)
	return reported && st.Backup != nil && m.DeletionTimestamp == nil && !isTrue(m, dpv1alpha1.RestoreMemberTargetCheckedCondition) &&
		!isTrue(m, dpv1alpha1.RestoreMemberVolumeCompleteCondition) && !isTrue(m, dpv1alpha1.RestoreMemberFailedCondition)
}

// NeedsRestoreMeta says Plan is about to rebuild the PVs and PVCs.
func NeedsRestoreMeta(m *dpv1alpha1.VolumeRestoreMember) bool {
	return m.DeletionTimestamp == nil && !isTrue(m, dpv1alpha1.RestoreMemberFailedCondition)
}

// NeedsTargetClaims says Plan is about to check the target against the reported backup
// (needsCheck) or to create the claims of the restored volumes (volumesRestored): it then
// checks that none of the claims it needs exists already.
func NeedsTargetClaims(m *dpv1alpha1.VolumeRestoreMember, needsCheck, volumesRestored bool) bool {
	return needsCheck || volumesRestored && NeedsRestoreMeta(m) && !isTrue(m, dpv1alpha1.RestoreMemberVolumeCompleteCondition)
}

func isTrue(m *dpv1alpha1.VolumeRestoreMember, t string) bool {
	return condition.IsTrue(m.Status.Conditions, t)
}

// ActionKind says what an Action does.
type ActionKind string

// Action kinds, applied in the order Plan returns them.
const (
	EnsureServiceAccount ActionKind = "EnsureServiceAccount"
	CreateJob            ActionKind = "CreateJob"
	DeleteJob            ActionKind = "DeleteJob"
	// CreatePV and CreatePVC create a rebuilt claim's objects.
	CreatePV  ActionKind = "CreatePV"
	CreatePVC ActionKind = "CreatePVC"
	// AnnotateTC sets (Value non-empty) or removes the TidbCluster annotation Key.
	AnnotateTC ActionKind = "AnnotateTC"
	// LeaveRecoveryMode patches the TidbCluster's spec.recoveryMode to false.
	LeaveRecoveryMode ActionKind = "LeaveRecoveryMode"
	// AnnotateMember sets the member annotation Key to Value.
	AnnotateMember ActionKind = "AnnotateMember"
	// DeletePod deletes the TiKV pod Name (with UID as precondition).
	DeletePod ActionKind = "DeletePod"
	// DeletePVC and DeletePV delete objects the agent created.
	DeletePVC ActionKind = "DeletePVC"
	DeletePV  ActionKind = "DeletePV"
	// TagVolume adds Tags to the EBS volume Name, after removing the tag keys IDs (copied tags
	// dropped to stay within AWS's tag limit, with a Warning event naming them).
	TagVolume ActionKind = "TagVolume"
	// Warn emits a Warning event with reason Key and message Value.
	Warn ActionKind = "Warn"
	// DeleteVolumes deletes the EBS volumes IDs.
	DeleteVolumes ActionKind = "DeleteVolumes"
	// CreateTC creates a scratch restore's TidbCluster Object; DeleteTC deletes it (Name, with
	// UID as precondition).
	CreateTC ActionKind = "CreateTC"
	DeleteTC ActionKind = "DeleteTC"
	// ReclaimPV sets the PV Name's reclaim policy to Delete, before its claim is deleted.
	ReclaimPV ActionKind = "ReclaimPV"
)

// Action is one idempotent change.
type Action struct {
	Kind      ActionKind
	Job       *batchv1.Job
	Object    *unstructured.Unstructured
	ConfigMap *corev1.ConfigMap
	PV        *corev1.PersistentVolume
	PVC       *corev1.PersistentVolumeClaim
	Name      string
	UID       types.UID
	Key       string
	Value     string
	IDs       []string
	Tags      map[string]string
}

func (a Action) String() string {
	switch {
	case a.Job != nil:
		return string(a.Kind) + " " + a.Job.Name
	case a.Object != nil:
		return string(a.Kind) + " " + a.Object.GetNamespace() + "/" + a.Object.GetName()
	case a.PV != nil:
		return string(a.Kind) + " " + a.PV.Name
	case a.PVC != nil:
		return string(a.Kind) + " " + a.PVC.Name
	case a.Name != "":
		return string(a.Kind) + " " + a.Name
	case a.Key != "":
		return string(a.Kind) + " " + a.Key
	case len(a.IDs) > 0:
		return string(a.Kind) + " " + strings.Join(a.IDs, ",")
	}
	return string(a.Kind)
}

// Result is Plan's decision.
type Result struct {
	Actions []Action
	Status  dpv1alpha1.VolumeRestoreMemberStatus
	// RequeueAfter is set only for what cannot be watched (cloud volumes) and when time alone
	// changes the decision (the end of a warm-up's stall window).
	RequeueAfter time.Duration
	// RemoveFinalizer releases the agent's finalizer: the loop does it after the status.
	RemoveFinalizer bool
}

type plan struct {
	o   Observed
	m   *dpv1alpha1.VolumeRestoreMember
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
	switch {
	case p.m.DeletionTimestamp != nil:
		p.planDeletion()
	case p.isTrue(dpv1alpha1.RestoreMemberFailedCondition):
		// Terminal: the manager deletes a failed restore's members.
	case p.isTrue(dpv1alpha1.RestoreMemberCompleteCondition):
		// TiKV serves; only an async warm-up and the data member's checks may still have work
		// beside it.
		p.planAsyncWarmup()
		p.planVerify()
	case Refused(p.m, o.Refusals):
		p.fail(policy.Reason(o.Refusals), policy.Message(o.Refusals))
	case p.scratch() && !p.planScratchTC():
		// Its TidbCluster is being made, or it failed.
	case o.TC == nil:
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, p.tcMissing())
	default:
		if p.planVolumes() {
			switch p.m.Spec.Phase {
			case dpv1alpha1.RestoreMemberRestoreData:
				p.planData()
			case dpv1alpha1.RestoreMemberRestoreFinish:
				p.planFinish()
			}
		}
	}
	p.res.Status.Phase = phaseOf(&p.res.Status, p.m, workingOf(o.Report))
	return p.res
}

// workingOf says restoring volumes has begun: the restore-volumes step reported itself (its first
// report is before it creates anything). A step's report, never its Job, so the phase is a
// function of the member alone and reads the same after any restart.
func workingOf(r job.Report) bool {
	_, reported := r.Step(job.StepRestoreVolumes)
	return reported
}

// phaseOf is the one-word phase of member m with status st, for print columns and the members
// metric; working says restore-volumes reported itself (workingOf). The first row that
// holds wins:
//
//	deleted, VolumesCleaned=False CleanFailed         CleanFailed
//	deleted                                           Cleaning
//	Failed=True                                       Failed
//	Complete=True                                     Complete
//	spec.phase restore-finish, TikvComplete=True      Finishing
//	DataComplete=True                                 DataComplete
//	spec.phase restore-data, TikvComplete=True        RestoringData
//	TikvComplete=True                                 TikvComplete
//	VolumeComplete=True                               VolumeComplete
//	restore-volumes reported                          RestoringVolumes
//	otherwise                                         Pending
func phaseOf(st *dpv1alpha1.VolumeRestoreMemberStatus, m *dpv1alpha1.VolumeRestoreMember, working bool) string {
	is := func(t string) bool { return condition.IsTrue(st.Conditions, t) }
	switch {
	case m.DeletionTimestamp != nil:
		if c := findCondition(st.Conditions, dpv1alpha1.RestoreMemberVolumesCleanedCondition); c != nil && c.Reason == dpv1alpha1.RestoreMemberCleanFailedReason {
			return PhaseCleanFailed
		}
		return PhaseCleaning
	case is(dpv1alpha1.RestoreMemberFailedCondition):
		return PhaseFailed
	case is(dpv1alpha1.RestoreMemberCompleteCondition):
		return PhaseComplete
	case m.Spec.Phase == dpv1alpha1.RestoreMemberRestoreFinish && is(dpv1alpha1.RestoreMemberTikvCompleteCondition):
		return PhaseFinishing
	case is(dpv1alpha1.RestoreMemberDataCompleteCondition):
		return PhaseDataComplete
	case m.Spec.Phase == dpv1alpha1.RestoreMemberRestoreData && is(dpv1alpha1.RestoreMemberTikvCompleteCondition):
		return PhaseRestoringData
	case is(dpv1alpha1.RestoreMemberTikvCompleteCondition):
		return PhaseTikvComplete
	case is(dpv1alpha1.RestoreMemberVolumeCompleteCondition):
		return PhaseVolumeComplete
	case working:
		return PhaseRestoringVolumes
	}
	return PhasePending
}

func (p *plan) add(a Action) { p.res.Actions = append(p.res.Actions, a) }

// requeueIn has the member looked at again in d at the latest.
func (p *plan) requeueIn(d time.Duration) {
	if d > 0 && (p.res.RequeueAfter == 0 || d < p.res.RequeueAfter) {
		p.res.RequeueAfter = d
	}
}

func (p *plan) set(t string, s metav1.ConditionStatus, reason, msg string) {
	condition.Set(&p.res.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg},
		p.m.Generation, time.Time{}, p.now)
}

func (p *plan) isTrue(t string) bool { return condition.IsTrue(p.res.Status.Conditions, t) }

func (p *plan) fail(reason, msg string) {
	if p.isTrue(dpv1alpha1.RestoreMemberFailedCondition) {
		return
	}
	p.set(dpv1alpha1.RestoreMemberFailedCondition, metav1.ConditionTrue, reason, msg)
	if p.res.Status.TimeCompleted == nil {
		p.res.Status.TimeCompleted = ptr.To(metav1.NewTime(p.now.UTC().Truncate(time.Second)))
	}
}

func ownerRef(m *dpv1alpha1.VolumeRestoreMember) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: dpv1alpha1.GroupVersion.String(), Kind: Kind, Name: m.Name, UID: m.UID, Controller: ptr.To(true)}
}

// Refused says the policy's verdict fails m now: it broke a rule and has neither failed nor
// completed yet (a complete member is left alone; createJob still refuses its async warm-up).
// The controller then reads nothing the refused member names (its storage, the target's claims).
func Refused(m *dpv1alpha1.VolumeRestoreMember, refusals []policy.Violation) bool {
	return len(refusals) > 0 && m.DeletionTimestamp == nil && !isTrue(m, dpv1alpha1.RestoreMemberFailedCondition) &&
		!isTrue(m, dpv1alpha1.RestoreMemberCompleteCondition)
}

// ensureCommon creates the steps' service account before a Job (without a template one), once
// per plan.
func (p *plan) ensureCommon() {
	if p.ensured {
		return
	}
	p.ensured = true
	if p.m.Spec.Template.ServiceAccount == "" {
		p.add(Action{Kind: EnsureServiceAccount, Name: job.ServiceAccountName})
	}
}

// createJob adds the Job of spec after what every step needs (ensureCommon), unless the
// agent's policy refuses the member (Observed.Refusals) or the Job's pod (the last line:
// job.BuildGuarded with the policy's CheckPod). A refused Job is not added: the member fails
// naming the rules, or, once complete, an async warm-up ends as failed (it never fails a
// restore); createJob then says false.
func (p *plan) createJob(spec job.Spec) bool {
	j, refusals := job.BuildGuarded(spec, p.o.Policy.CheckPod)
	if len(p.o.Refusals) > 0 {
		refusals = p.o.Refusals
	}
	switch {
	case len(refusals) == 0:
		p.ensureCommon()
		p.add(Action{Kind: CreateJob, Job: j})
		return true
	case spec.Step == job.StepVerify || spec.Step == job.StepCheck:
		// A check of a restored cluster that the policy refuses is a verification that failed.
		p.unchecked("the " + spec.Step + " step was not started: " + policy.Message(refusals))
	case p.isTrue(dpv1alpha1.RestoreMemberCompleteCondition):
		p.set(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberWarmUpFailedReason,
			"the warm-up was not started: "+policy.Message(refusals))
	default:
		p.fail(policy.Reason(refusals), policy.Message(refusals))
	}
	return false
}

// jobSpec is one `fedbr br` step's Job: the template's pods, reading the storage, retried
// backoff times unless the template's backoffLimit says otherwise.
func (p *plan) jobSpec(step string, args []string, st job.Storage, backoff int32) job.Spec {
	args = append(append(args, p.o.Env.CloudArgs()...), p.o.Env.LogArgs()...)
	return p.podJob(step, p.o.Env.ImageOr(p.m.Spec.Template.ToolImage), args, backoff,
		st.Env, st.Volumes, st.VolumeMounts)
}

// podJob is a Job with everything the template says about pods, and the step's own
// environment (the template's comes after it, so a user's value wins), volumes and retries
// (the template's backoffLimit overrides backoff).
func (p *plan) podJob(step, image string, args []string, backoff int32, env []corev1.EnvVar, volumes []corev1.Volume, mounts []corev1.VolumeMount) job.Spec {
	t := &p.m.Spec.Template
	sa := t.ServiceAccount
	if sa == "" {
		sa = job.ServiceAccountName
	}
	if t.BackoffLimit != nil {
		backoff = *t.BackoffLimit
	}
	// A step that dials PD or TiKV of a TidbCluster with tlsCluster gets its client secret.
	return job.WithClusterTLS(job.Spec{
		Member: p.m.Name, Namespace: p.m.Namespace, Owner: ownerRef(p.m), OwnerKind: Kind, Step: step,
		Image: image, Args: args,
		BackoffLimit: backoff, ActiveDeadlineSeconds: p.deadline(),
		TTLSecondsAfterFinished: p.o.Env.TTLSeconds(), ExitDelay: p.o.Env.StepExitDelay,
		Labels: p.m.Labels, Annotations: p.m.Annotations, AllowedAnnotations: p.o.Env.PodAnnotations,
		AllowedLabels: p.o.Env.PodLabels,
		Pod: job.PodTemplate{
			Env: append(append([]corev1.EnvVar(nil), env...), t.Env...), Resources: t.ResourceRequirements, Tolerations: t.Tolerations,
			PriorityClassName: t.PriorityClassName, ImagePullSecrets: t.ImagePullSecrets, ServiceAccount: sa,
			Volumes:      append(append([]corev1.Volume(nil), t.AdditionalVolumes...), volumes...),
			VolumeMounts: append(append([]corev1.VolumeMount(nil), t.AdditionalVolumeMounts...), mounts...),
		},
	}, p.o.TC)
}

// deadline is a step Job's activeDeadlineSeconds. While the member is not Complete the manager
// times each of its phases (stepTimeout) and its verdict stops the steps (it deletes the
// members), so those Jobs get none: one bound, one enforcement. A Job started once the member
// completed (an async warm-up) runs where nothing else times it: its deadline (stepTimeout) is
// its bound.
func (p *plan) deadline() int64 {
	if p.isTrue(dpv1alpha1.RestoreMemberCompleteCondition) {
		return int64(p.m.Spec.Template.EffectiveStepTimeout() / time.Second)
	}
	return 0
}

// claims are the TiKV claims the restoremeta rebuilds for the target TidbCluster.
func (p *plan) claims() ([]Claim, error) {
	tc := p.o.TC
	return Rebuild(p.o.RestoreMeta, Target{TCName: tc.Name, Namespace: tc.Namespace, AZ: p.m.Spec.AZName,
		RestoreID: string(p.m.UID), Member: p.m.Name, MemberNamespace: p.m.Namespace})
}

// stepOutcome reads a step's Job and report: done (succeeded with a summary), failed (with a
// message, and failed as the reason unless the report itself is invalid) or still going.
func (p *plan) stepOutcome(step string, j job.State, failed string) (done bool, failReason, failMsg string) {
	st, reported := p.o.Report.Step(step)
	_, hasResult := p.o.Report.Results[step]
	switch {
	case hasResult && (j.Phase == job.Succeeded || reported && st.Phase == job.PhaseCompleted):
		return true, "", ""
	case reported && st.Phase == job.PhaseFailed && j.Phase == job.Active:
		// The Job decides whether an attempt that failed was the last (restore-data retries
		// dataRetries times, any step as often as the template's backoffLimit says): a failed
		// attempt counts once the Job has no attempt left, and a next attempt's report replaces
		// this one.
		return false, "", ""
	case reported && st.Phase == job.PhaseFailed:
		return false, failed, "the " + step + " step failed: " + st.Error
	case j.Phase == job.Failed:
		return false, failed, j.FailureText()
	case j.Phase == job.Succeeded:
		return false, dpv1alpha1.InvalidReportReason, fmt.Sprintf("Job %s succeeded without reporting its result in the member's status.steps (%s)", j.Name, step)
	}
	return false, "", ""
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
