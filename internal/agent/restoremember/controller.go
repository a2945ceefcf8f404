package restoremember

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/apply"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/loop"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/ownwrite"
)

// CloudVolumes is what the agent does with EBS volumes itself: check that the volumes
// restore-volumes reported are the restore's before binding them, and find and delete those of a
// failed restore (internal/cloud/aws implements it).
type CloudVolumes interface {
	DescribeVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error)
	ListVolumes(ctx context.Context, tags map[string]string) ([]cloud.Volume, error)
	DeleteVolumes(ctx context.Context, ids []string) error
	// TagVolume adds the operator tags to a restored volume once its PV exists; UntagVolumes
	// first removes copied tags that would take it past AWS's tag limit.
	TagVolume(ctx context.Context, id string, tags map[string]string) error
	UntagVolumes(ctx context.Context, ids, keys []string) error
}

// Reconciler reconciles the VolumeRestoreMembers of this data plane.
type Reconciler struct {
	// writes tells a cached member that predates this agent's last status write.
	writes ownwrite.Tracker
	Client client.Client
	// APIReader confirms with the API server that a TidbCluster the cache lacks is really
	// missing (it may have been created just before the member); nil trusts the cache.
	APIReader client.Reader
	Recorder  apply.Recorder
	Metrics   *metrics.Metrics
	Env       job.Env
	// ClusterName is this data plane's k8sClusterName; members naming another are ignored.
	ClusterName string
	// Cloud deletes the volumes of failed restores; nil reports that it cannot.
	Cloud CloudVolumes
	// Policy is the operator's policy over what a member may make the agent run; nil is
	// policy.Default for Env.Image.
	Policy *policy.Policy
	Now    func() time.Time
}

// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumerestoremembers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumerestoremembers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumerestoremembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;update
// +kubebuilder:rbac:groups=pingcap.com,resources=tidbclusters,verbs=get;list;watch;patch;create;delete
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// Reconcile drives one member through the reconcile skeleton (loop.Loop).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ap := &apply.Applier{Client: r.Client, Recorder: r.Recorder, Metrics: r.Metrics, Kind: Kind}
	l := loop.Loop[*dpv1alpha1.VolumeRestoreMember, Action]{
		Finalizer: Finalizer, Client: r.Client, Now: r.Now, Writes: &r.writes,
		New:                func() *dpv1alpha1.VolumeRestoreMember { return &dpv1alpha1.VolumeRestoreMember{} },
		ObservedGeneration: func(m *dpv1alpha1.VolumeRestoreMember) *int64 { return &m.Status.ObservedGeneration },
		Gone:               func(req reconcile.Request) { r.Metrics.SetPhase(Kind, req.Namespace, req.Name, "") },
		Skip: func(_ context.Context, m *dpv1alpha1.VolumeRestoreMember) bool {
			return apply.OtherCluster(r.Recorder, m, m.Spec.K8sClusterName, r.ClusterName)
		},
		Decide: r.decide,
		Apply: func(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, as []Action, _ time.Time) error {
			return r.apply(ctx, ap, m, as)
		},
		Changed: func(ctx context.Context, before, after *dpv1alpha1.VolumeRestoreMember) {
			for _, t := range condition.Transitions(before.Status.Conditions, after.Status.Conditions) {
				apply.ConditionEvent(ctx, r.Recorder, after, t, t.Type == dpv1alpha1.RestoreMemberFailedCondition && t.Status == "True" || t.Reason == dpv1alpha1.RestoreMemberCleanFailedReason ||
					t.Reason == dpv1alpha1.RestoreMemberCloudUnreachableReason || t.Reason == dpv1alpha1.RestoreMemberWarmUpFailedReason || t.Reason == dpv1alpha1.RestoreMemberWALCorruptedReason)
			}
		},
		Released: func(_ context.Context, m *dpv1alpha1.VolumeRestoreMember) {
			r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, "FinalizerRemoved", "Delete", "the data plane let go of the restore")
			r.Metrics.SetPhase(Kind, m.Namespace, m.Name, "")
		},
	}
	return l.Reconcile(ctx, req)
}

// decide observes the member and plans. The plan's RemoveFinalizer is the loop's to
// carry out, after the status; the steps' own entries of status.steps are theirs, never the
// agent's to write.
func (r *Reconciler) decide(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, now time.Time) (loop.Decision[*dpv1alpha1.VolumeRestoreMember, Action], error) {
	o, err := r.observe(ctx, m)
	if err != nil {
		return loop.Decision[*dpv1alpha1.VolumeRestoreMember, Action]{}, err
	}
	res := Plan(o, now)
	log.FromContext(ctx).V(1).Info("Planned", "actions", res.Actions, "phase", res.Status.Phase)
	return loop.Decision[*dpv1alpha1.VolumeRestoreMember, Action]{
		Actions: res.Actions, RemoveFinalizer: res.RemoveFinalizer, RequeueAfter: res.RequeueAfter,
		SetStatus: func(m *dpv1alpha1.VolumeRestoreMember) {
			steps := m.Status.Steps
			m.Status = *res.Status.DeepCopy()
			m.Status.Steps = steps
		},
		Done: func(error) {
			for step, s := range map[string]job.State{job.StepTidbCluster: o.TidbCluster, job.StepRestoreVolumes: o.RestoreVolumes, job.StepRestoreData: o.RestoreData, job.StepVerify: o.Verify, job.StepCheck: o.Check} {
				r.Metrics.ObserveStep(Kind, step, s.Name+string(m.UID), s.Phase == job.Succeeded, s.Started, s.Finished)
			}
			for _, s := range o.Warmups {
				r.Metrics.ObserveStep(Kind, job.StepWarmup, s.Name+string(m.UID), s.Phase == job.Succeeded, s.Started, s.Finished)
			}
			if !res.RemoveFinalizer {
				r.Metrics.SetPhase(Kind, m.Namespace, m.Name, res.Status.Phase)
			}
		},
	}, nil
}

// observe reads everything Plan needs.
func (r *Reconciler) observe(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember) (Observed, error) {
	o := Observed{Member: m, Env: r.Env, PVCs: map[string]*corev1.PersistentVolumeClaim{}, PVs: map[string]*corev1.PersistentVolume{}}
	tc, err := tidbcluster.Get(ctx, r.Client, r.APIReader, m.Spec.TCNamespace, m.Spec.TCName)
	if err != nil {
		return o, err
	}
	o.TC = tc
	o.Policy = r.Policy
	if o.Policy == nil {
		o.Policy = policy.Default(r.Env.Image, job.ServiceAccountName)
	}
	o.Refusals = o.Policy.Check(policy.ForRestore(m, otherTiKVVolumes(tc)))
	if err := r.observeJobs(ctx, m, &o); err != nil {
		return o, err
	}
	if Refused(m, o.Refusals) {
		return o, nil // Plan fails it; the claims it names are not read
	}
	if err := r.observeKubernetes(ctx, m, &o); err != nil {
		return o, err
	}
	observeReport(&o)
	if o.TC != nil && NeedsTargetClaims(m, needsCheck(m, &o), volumesRestored(&o)) {
		if err := r.observeTargetClaims(ctx, m, &o); err != nil {
			return o, err
		}
		r.observeRestoredVolumes(ctx, &o)
	}
	scratch := m.Spec.Template.Scratch
	if m.DeletionTimestamp != nil && scratch && tc == nil {
		if err := r.observeOperatorClaims(ctx, m, &o); err != nil {
			return o, err
		}
	}
	running := func(s job.State) bool { return s.Exists() && !s.Done() }
	if m.DeletionTimestamp != nil && len(o.PVCs) == 0 && len(o.PVs) == 0 && len(o.OperatorClaims) == 0 && !running(o.RestoreVolumes) && !running(o.RestoreData) &&
		(scratch || !condition.IsTrue(m.Status.Conditions, dpv1alpha1.RestoreMemberCompleteCondition)) {
		r.observeCloud(ctx, m, &o)
	}
	return o, nil
}

// observeOperatorClaims reads, from the API server (the cache holds only the agent's own), the
// claims tidb-operator made for a scratch restore's TidbCluster and the PVs they are bound to.
func (r *Reconciler) observeOperatorClaims(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, o *Observed) error {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := reader.List(ctx, list, client.InNamespace(m.Spec.TCNamespace),
		client.MatchingLabels{tidbcluster.LabelInstance: m.Spec.TCName, tidbcluster.LabelManagedBy: tidbcluster.ManagedByOperator}); err != nil {
		return fmt.Errorf("list the claims of TidbCluster %s/%s: %w", m.Spec.TCNamespace, m.Spec.TCName, err)
	}
	o.OperatorClaims, o.OperatorPVs = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
	for i := range list.Items {
		pvc := &list.Items[i]
		if pvc.Labels[LabelRestore] != "" {
			continue // a restore's own claim
		}
		o.OperatorClaims[pvc.Name] = pvc
		if pvc.Spec.VolumeName == "" {
			continue
		}
		pv := &corev1.PersistentVolume{}
		switch err := reader.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("get PV %s: %w", pvc.Spec.VolumeName, err)
		default:
			o.OperatorPVs[pv.Name] = pv
		}
	}
	return nil
}

// otherTiKVVolumes are the pod volumes of tc's TiKV besides its data volume (a warm-up reads
// them block by block); nil without a TidbCluster.
func otherTiKVVolumes(tc *pcv1alpha1.TidbCluster) []string {
	if tc == nil {
		return nil
	}
	var out []string
	for _, v := range tidbcluster.TiKVVolumeNames(tc) {
		if v != tidbcluster.TiKVDataVolume {
			out = append(out, v)
		}
	}
	return out
}

func (r *Reconciler) observeJobs(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, o *Observed) error {
	o.RestoreVolumes, o.RestoreData, o.Verify, o.Check, o.TidbCluster, o.Warmups = job.StateOf(nil), job.StateOf(nil), job.StateOf(nil), job.StateOf(nil), job.StateOf(nil), map[string]job.State{}
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(m.Namespace), client.MatchingLabels(job.Selector(m.Name))); err != nil {
		return fmt.Errorf("list Jobs of %s/%s: %w", m.Namespace, m.Name, err)
	}
	owned, foreign := job.Owned(m, Kind, jobs.Items)
	o.Refusals = append(o.Refusals, policy.ForeignJobs(foreign)...)
	for i := range owned {
		switch owned[i].Labels[job.LabelStep] {
		case job.StepRestoreVolumes:
			o.RestoreVolumes = job.StateOf(&owned[i])
		case job.StepRestoreData:
			o.RestoreData = job.StateOf(&owned[i])
		case job.StepVerify:
			o.Verify = job.StateOf(&owned[i])
		case job.StepCheck:
			o.Check = job.StateOf(&owned[i])
		case job.StepTidbCluster:
			o.TidbCluster = job.StateOf(&owned[i])
		case job.StepWarmup:
			o.Warmups[owned[i].Name] = job.StateOf(&owned[i])
		}
	}
	o.Report = job.ReportOf(m.Status.Steps)
	return nil
}

// observeKubernetes reads the claims and volumes this restore created and the TiKV pods.
func (r *Reconciler) observeKubernetes(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, o *Observed) error {
	sel := client.MatchingLabels{LabelRestore: string(m.UID)}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, pvcs, client.InNamespace(m.Spec.TCNamespace), sel); err != nil {
		return fmt.Errorf("list restored claims: %w", err)
	}
	for i := range pvcs.Items {
		o.PVCs[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := r.Client.List(ctx, pvs, sel); err != nil {
		return fmt.Errorf("list restored volumes: %w", err)
	}
	for i := range pvs.Items {
		o.PVs[pvs.Items[i].Name] = &pvs.Items[i]
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(m.Spec.TCNamespace), client.MatchingLabels(tidbcluster.TiKVSelector(m.Spec.TCName))); err != nil {
		return fmt.Errorf("list TiKV pods: %w", err)
	}
	for _, p := range pods.Items {
		tp := TiKVPod{Name: p.Name, UID: p.UID, Deleting: p.DeletionTimestamp != nil, Node: p.Spec.NodeName}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				tp.Ready = true
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				tp.Claims = append(tp.Claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		o.Pods = append(o.Pods, tp)
	}
	return nil
}

// observeReport reads what restore-volumes reported of the backup (its entry's backup) and,
// once it succeeded, the restoremeta that backup and its result make: the agent reads no
// storage itself. Errors are observations: Plan fails the member with them.
func observeReport(o *Observed) {
	st, reported := o.Report.Step(job.StepRestoreVolumes)
	if !reported {
		return
	}
	o.BackupMeta, o.BackupMetaErr = ReportedBackup(st)
	if !volumesRestored(o) {
		return
	}
	switch {
	case o.BackupMetaErr != nil:
		o.RestoreMetaErr = o.BackupMetaErr
	case o.BackupMeta == nil:
		o.RestoreMetaErr = fmt.Errorf("%w: restore-volumes succeeded without reporting the backup", ErrReport)
	default:
		o.RestoreMeta, o.RestoreMetaErr = ReportedRestore(o.BackupMeta, o.Report)
	}
}

// needsCheck says Plan is about to check the target against the backup restore-volumes
// reported (NeedsCheck; a TidbCluster out of recovery mode is refused first).
func needsCheck(m *dpv1alpha1.VolumeRestoreMember, o *Observed) bool {
	return NeedsCheck(m, o.Report) && o.TC != nil && o.TC.Spec.RecoveryMode
}

// volumesRestored says the restore-volumes step succeeded with its summary.
func volumesRestored(o *Observed) bool {
	st, reported := o.Report.Step(job.StepRestoreVolumes)
	_, hasResult := o.Report.Results[job.StepRestoreVolumes]
	return hasResult && (o.RestoreVolumes.Phase == job.Succeeded || reported && st.Phase == job.PhaseCompleted)
}

// observeTargetClaims reads every claim of the target namespace from the API server: the
// cache holds only the agent's own, and a claim someone else made under a name the restore
// needs is exactly what Plan must see.
func (r *Reconciler) observeTargetClaims(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, o *Observed) error {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := reader.List(ctx, list, client.InNamespace(m.Spec.TCNamespace)); err != nil {
		return fmt.Errorf("list claims in %s: %w", m.Spec.TCNamespace, err)
	}
	o.TargetClaims = make(map[string]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		o.TargetClaims[list.Items[i].Name] = &list.Items[i]
	}
	return nil
}

// observeRestoredVolumes describes the volumes the restoremeta names, for Plan to check that
// each is this restore's before a PV binds it.
func (r *Reconciler) observeRestoredVolumes(ctx context.Context, o *Observed) {
	if o.RestoreMeta == nil {
		return
	}
	if r.Cloud == nil {
		o.RestoredVolumesErr = errors.New("the agent has no AWS access configured")
		return
	}
	ids := slices.Sorted(maps.Values(o.RestoreMeta.RestoredVolumes()))
	vols, err := r.Cloud.DescribeVolumes(ctx, ids)
	if err != nil {
		o.RestoredVolumesErr = err
		return
	}
	o.RestoredVolumes = make(map[string]cloud.Volume, len(vols))
	for _, v := range vols {
		o.RestoredVolumes[v.ID] = v
	}
}

func (r *Reconciler) observeCloud(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, o *Observed) {
	if r.Cloud == nil {
		o.CloudErr = errors.New("the agent has no AWS access configured")
		return
	}
	vols, err := r.Cloud.ListVolumes(ctx, meta.RestoreTags(string(m.UID)))
	if err != nil {
		o.CloudErr = err
		return
	}
	o.CloudListed = true
	for _, v := range vols {
		o.CloudVolumes = append(o.CloudVolumes, v.ID)
	}
}

// apply runs the planned actions in order, those that do not depend on one another at once.
func (r *Reconciler) apply(ctx context.Context, ap *apply.Applier, m *dpv1alpha1.VolumeRestoreMember, actions []Action) error {
	for i := 0; i < len(actions); i++ {
		n := max(independentRun(actions[i:]), 1)
		if err := apply.Concurrently(actions[i:i+n], func(a Action) error {
			if err := r.applyOne(ctx, ap, m, a); err != nil {
				r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, "ApplyFailed", "Reconcile", "%s: %v", a, err)
				return fmt.Errorf("%s: %w", a, err)
			}
			return nil
		}); err != nil {
			return err
		}
		i += n - 1
	}
	return nil
}

// independentRun counts the actions at the head of as that do not depend on one another:
// prerequisites (the steps' service account), Jobs, volumes (PVs), claims (PVCs),
// or deletions of one kind.
func independentRun(as []Action) int { return apply.Run(as, independent) }

var independent = apply.ByKind(func(a Action) ActionKind { return a.Kind },
	[]ActionKind{EnsureServiceAccount}, []ActionKind{CreateJob},
	[]ActionKind{CreatePV}, []ActionKind{TagVolume}, []ActionKind{CreatePVC},
	[]ActionKind{DeletePod}, []ActionKind{DeletePVC}, []ActionKind{DeletePV})

func (r *Reconciler) applyOne(ctx context.Context, ap *apply.Applier, m *dpv1alpha1.VolumeRestoreMember, a Action) error {
	switch a.Kind {
	case EnsureServiceAccount:
		return ap.EnsureServiceAccount(ctx, m.Namespace)
	case CreateJob:
		return ap.CreateJob(ctx, m, a.Job)
	case DeleteJob:
		return ap.DeleteJob(ctx, m, m.Namespace, a.Name)
	case CreatePV:
		return ignoreExists(r.Client.Create(ctx, a.PV.DeepCopy()))
	case CreatePVC:
		return ignoreExists(r.Client.Create(ctx, a.PVC.DeepCopy()))
	case AnnotateTC:
		var v any
		if a.Value != "" {
			v = a.Value
		}
		return r.patchTC(ctx, m, map[string]any{"metadata": map[string]any{"annotations": map[string]any{a.Key: v}}})
	case LeaveRecoveryMode:
		return r.patchTC(ctx, m, map[string]any{"spec": map[string]any{"recoveryMode": false}})
	case AnnotateMember:
		orig := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[a.Key] = a.Value
		return r.Client.Patch(ctx, m, client.MergeFrom(orig))
	case DeletePod:
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = m.Spec.TCNamespace, a.Name
		return client.IgnoreNotFound(r.Client.Delete(ctx, pod, client.Preconditions{UID: &a.UID}))
	case DeletePVC:
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = m.Spec.TCNamespace, a.Name
		return client.IgnoreNotFound(r.Client.Delete(ctx, pvc))
	case DeletePV:
		pv := &corev1.PersistentVolume{}
		pv.Name = a.Name
		return client.IgnoreNotFound(r.Client.Delete(ctx, pv))
	case TagVolume:
		if r.Cloud == nil {
			return errors.New("the agent has no AWS access configured")
		}
		if len(a.IDs) > 0 {
			if err := r.Cloud.UntagVolumes(ctx, []string{a.Name}, a.IDs); err != nil {
				return err
			}
			r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, ReasonTagsDropped, "Tag",
				"volume %s: removed the tags %s copied from its snapshot, to stay within AWS's %d tags per volume with the operator tags",
				a.Name, strings.Join(a.IDs, ", "), cloud.MaxTags)
		}
		return r.Cloud.TagVolume(ctx, a.Name, a.Tags)
	case Warn:
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, a.Key, "Restore", "%s", a.Value)
		return nil
	case CreateTC:
		if err := ignoreExists(r.Client.Create(ctx, a.Object.DeepCopy())); err != nil {
			return fmt.Errorf("create TidbCluster %s/%s: %w", a.Object.GetNamespace(), a.Object.GetName(), err)
		}
		r.Recorder.Eventf(m, a.Object, corev1.EventTypeNormal, "TidbClusterCreated", "Create",
			"created TidbCluster %s/%s in recovery mode from the TidbCluster the backup saved", a.Object.GetNamespace(), a.Object.GetName())
		return nil
	case DeleteTC:
		tc := &pcv1alpha1.TidbCluster{}
		tc.Namespace, tc.Name = m.Spec.TCNamespace, a.Name
		return client.IgnoreNotFound(r.Client.Delete(ctx, tc, client.Preconditions{UID: &a.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	case ReclaimPV:
		pv := &corev1.PersistentVolume{}
		pv.Name = a.Name
		return client.IgnoreNotFound(r.Client.Patch(ctx, pv, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`))))
	case DeleteVolumes:
		if r.Cloud == nil {
			return errors.New("the agent has no AWS access configured")
		}
		log.FromContext(ctx).Info("Deleting volumes", "volumes", a.IDs)
		return r.Cloud.DeleteVolumes(ctx, a.IDs)
	}
	return fmt.Errorf("unknown action %s", a.Kind)
}

// patchTC merge-patches the member's TidbCluster (tidb-operator owns the object; fedbr only
// ever patches the fields it is entitled to).
func (r *Reconciler) patchTC(ctx context.Context, m *dpv1alpha1.VolumeRestoreMember, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	tc := &pcv1alpha1.TidbCluster{}
	tc.Namespace, tc.Name = m.Spec.TCNamespace, m.Spec.TCName
	if err := r.Client.Patch(ctx, tc, client.RawPatch(types.MergePatchType, b)); err != nil {
		return fmt.Errorf("patch TidbCluster %s/%s: %w", tc.Namespace, tc.Name, err)
	}
	r.Recorder.Eventf(m, tc, corev1.EventTypeNormal, "TidbClusterPatched", "Patch", "patched TidbCluster %s/%s: %s", tc.Namespace, tc.Name, b)
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// SetupWithManager registers the controller: it reacts to its members, their Jobs and status
// ConfigMaps, their TidbClusters and those clusters' TiKV pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&dpv1alpha1.VolumeRestoreMember{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(apply.MapOwner(Kind))).
		Watches(&pcv1alpha1.TidbCluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.membersOf(ctx, o.GetNamespace(), o.GetName())
		})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if o.GetLabels()[tidbcluster.LabelComponent] != tidbcluster.ComponentTiKV {
				return nil
			}
			return r.membersOf(ctx, o.GetNamespace(), o.GetLabels()[tidbcluster.LabelInstance])
		})).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(mapCreator)).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(mapCreator)).
		Named("volumerestoremember").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(maxConcurrent, 1)}).
		Complete(r)
}

// mapCreator maps a PV or PVC the agent created to its member.
func mapCreator(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[AnnotationMember], "/")
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// membersOf maps a TidbCluster to the members that restore into it.
func (r *Reconciler) membersOf(ctx context.Context, namespace, tc string) []reconcile.Request {
	list := &dpv1alpha1.VolumeRestoreMemberList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).Error(err, "Listing VolumeRestoreMembers for a TidbCluster event", "namespace", namespace, "tidbCluster", tc)
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if m.Spec.TCName == tc && m.Spec.TCNamespace == namespace {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return out
}
