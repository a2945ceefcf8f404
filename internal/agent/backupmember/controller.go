package backupmember

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	"github.com/fedbr/fedbr/internal/loop"
	"github.com/fedbr/fedbr/internal/ownwrite"
)

// Reconciler reconciles the VolumeBackupMembers of this data plane.
type Reconciler struct {
	// writes tells a cached member that predates this agent's last status write.
	writes ownwrite.Tracker
	Client client.Client
	// APIReader reads the TiKV pods, claims, volumes and nodes once per backup without caching
	// them (the agent caches only its own objects); Client when nil.
	APIReader client.Reader
	Recorder  apply.Recorder
	Metrics   *metrics.Metrics
	Env       job.Env
	// ClusterName is this data plane's k8sClusterName; members naming another are ignored.
	ClusterName string
	// Policy is the operator's policy over what a member may make the agent run; nil is
	// policy.Default for Env.Image.
	Policy *policy.Policy
	// Cloud describes the snapshots a completion report names, to confirm them before the
	// member is Complete; nil confirms nothing (the member waits, CloudUnreachable).
	Cloud Snapshots
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumebackupmembers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumebackupmembers/status,verbs=get;update;patch;confirm
// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumebackupmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;update
// +kubebuilder:rbac:groups=pingcap.com,resources=tidbclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// Reconcile drives one member through the reconcile skeleton (loop.Loop).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ap := &apply.Applier{Client: r.Client, Recorder: r.Recorder, Metrics: r.Metrics, Kind: Kind}
	l := loop.Loop[*dpv1alpha1.VolumeBackupMember, Action]{
		Finalizer: Finalizer, Client: r.Client, Now: r.Now, Writes: &r.writes,
		New:                func() *dpv1alpha1.VolumeBackupMember { return &dpv1alpha1.VolumeBackupMember{} },
		ObservedGeneration: func(m *dpv1alpha1.VolumeBackupMember) *int64 { return &m.Status.ObservedGeneration },
		Gone:               func(req reconcile.Request) { r.Metrics.SetPhase(Kind, req.Namespace, req.Name, "") },
		Skip: func(_ context.Context, m *dpv1alpha1.VolumeBackupMember) bool {
			return apply.OtherCluster(r.Recorder, m, m.Spec.K8sClusterName, r.ClusterName)
		},
		Decide: r.decide,
		Apply: func(ctx context.Context, m *dpv1alpha1.VolumeBackupMember, as []Action, _ time.Time) error {
			return r.apply(ctx, ap, m, as)
		},
		Changed: func(ctx context.Context, before, after *dpv1alpha1.VolumeBackupMember) {
			for _, t := range condition.Transitions(before.Status.Conditions, after.Status.Conditions) {
				apply.ConditionEvent(ctx, r.Recorder, after, t, t.Type == dpv1alpha1.BackupMemberFailedCondition && t.Status == "True" ||
					t.Type == dpv1alpha1.BackupMemberCleanedCondition && t.Reason == dpv1alpha1.BackupMemberCleanFailedReason ||
					t.Type == dpv1alpha1.BackupMemberGCResumedCondition && t.Reason == dpv1alpha1.BackupMemberLiftFailedReason)
			}
		},
		Released: func(_ context.Context, m *dpv1alpha1.VolumeBackupMember) {
			r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, "FinalizerRemoved", "Delete", "the data plane let go of the backup")
			r.Metrics.SetPhase(Kind, m.Namespace, m.Name, "")
		},
	}
	return l.Reconcile(ctx, req)
}

// decide observes the member and plans. The plan's RemoveFinalizer is the loop's to
// carry out, after the status; the steps' own entries of status.steps are theirs, never the
// agent's to write.
func (r *Reconciler) decide(ctx context.Context, m *dpv1alpha1.VolumeBackupMember, now time.Time) (loop.Decision[*dpv1alpha1.VolumeBackupMember, Action], error) {
	o, err := r.observe(ctx, m)
	if err != nil {
		return loop.Decision[*dpv1alpha1.VolumeBackupMember, Action]{}, err
	}
	res := Plan(o, now)
	log.FromContext(ctx).V(1).Info("Planned", "actions", res.Actions, "phase", res.Status.Phase)
	return loop.Decision[*dpv1alpha1.VolumeBackupMember, Action]{
		Actions: res.Actions, RemoveFinalizer: res.RemoveFinalizer, RequeueAfter: res.RequeueAfter,
		SetStatus: func(m *dpv1alpha1.VolumeBackupMember) {
			steps := m.Status.Steps
			m.Status = *res.Status.DeepCopy()
			m.Status.Steps = steps
		},
		Done: func(error) {
			for step, s := range map[string]job.State{job.StepPause: o.Pause, job.StepSnapshot: o.Snapshot, job.StepSize: o.Size, job.StepClean: o.Clean, job.StepLift: o.Lift} {
				r.Metrics.ObserveStep(Kind, step, s.Name+string(m.UID), s.Phase == job.Succeeded, s.Started, s.Finished)
			}
			if !res.RemoveFinalizer {
				r.Metrics.SetPhase(Kind, m.Namespace, m.Name, res.Status.Phase)
			}
		},
	}, nil
}

// observe reads everything Plan needs.
func (r *Reconciler) observe(ctx context.Context, m *dpv1alpha1.VolumeBackupMember) (Observed, error) {
	pol := r.Policy
	if pol == nil {
		pol = policy.Default(r.Env.Image, job.ServiceAccountName)
	}
	o := Observed{Member: m, Env: r.Env, Policy: pol, Refusals: pol.Check(policy.ForBackup(m))}
	tc, err := tidbcluster.Get(ctx, r.Client, r.APIReader, m.Spec.TCNamespace, m.Spec.TCName)
	if err != nil {
		return o, err
	}
	o.TC = tc
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(m.Namespace), client.MatchingLabels(job.Selector(m.Name))); err != nil {
		return o, fmt.Errorf("list Jobs of %s/%s: %w", m.Namespace, m.Name, err)
	}
	owned, foreign := job.Owned(m, Kind, jobs.Items)
	o.Refusals = append(o.Refusals, policy.ForeignJobs(foreign)...)
	r.classifyJobs(m, owned, &o)
	o.Report = job.ReportOf(m.Status.Steps)
	if o.TC != nil && len(o.Refusals) == 0 && NeedsDiscovery(m, o.Snapshot, o.Report) {
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		c, err := ObserveCluster(ctx, reader, o.TC)
		if err != nil {
			return o, err
		}
		o.Cluster = c
	}
	if len(o.Refusals) == 0 && NeedsConfirmation(m, o.Snapshot, o.Report) {
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		o.Confirm = ObserveConfirmation(ctx, reader, r.Cloud, o)
	}
	return o, nil
}

// classifyJobs sorts the member's Jobs into its steps; of the clean attempts the newest counts.
func (r *Reconciler) classifyJobs(m *dpv1alpha1.VolumeBackupMember, jobs []batchv1.Job, o *Observed) {
	o.Pause, o.Snapshot, o.Size, o.Clean, o.Lift = job.StateOf(nil), job.StateOf(nil), job.StateOf(nil), job.StateOf(nil), job.StateOf(nil)
	for i := range jobs {
		j := &jobs[i]
		switch j.Labels[job.LabelStep] {
		case job.StepPause:
			o.Pause = job.StateOf(j)
		case job.StepSnapshot:
			o.Snapshot = job.StateOf(j)
		case job.StepSize:
			o.Size = job.StateOf(j)
		case job.StepLift:
			o.Lift = job.StateOf(j)
		case job.StepClean:
			n, err := strconv.Atoi(j.Name[strings.LastIndex(j.Name, "-")+1:])
			if err == nil && n > o.CleanAttempt {
				o.CleanAttempt, o.Clean = n, job.StateOf(j)
			}
		}
	}
}

// ObserveCluster reads a TidbCluster's TiKV pods and the claims, volumes and nodes they use.
// With a reader that is not a cache each read is one API round trip, and they sit before the
// snapshot step's start, so they go out in two rounds: the pods, the TiKV claims (by
// tidb-operator's labels), the whole TidbCluster and the operator objects at once; then the nodes, the volumes of the
// claims the pods use, and any such claim the labels missed.
func ObserveCluster(ctx context.Context, c client.Reader, tc *pcv1alpha1.TidbCluster) (*Cluster, error) {
	return observeCluster(ctx, c, tc, true)
}

// observeCluster is ObserveCluster; withObjects says whether to read the operator objects
// referencing tc too (only the snapshot step keeps them).
func observeCluster(ctx context.Context, c client.Reader, tc *pcv1alpha1.TidbCluster, withObjects bool) (*Cluster, error) {
	pods, labelled := &corev1.PodList{}, &corev1.PersistentVolumeClaimList{}
	out := &Cluster{TC: tc, PVCs: map[string]*corev1.PersistentVolumeClaim{},
		PVs: map[string]*corev1.PersistentVolume{}, Nodes: map[string]*corev1.Node{}}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := c.List(gctx, pods, client.InNamespace(tc.Namespace), client.MatchingLabels(tidbcluster.TiKVSelector(tc.Name))); err != nil {
			return fmt.Errorf("list TiKV pods of %s/%s: %w", tc.Namespace, tc.Name, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := c.List(gctx, labelled, client.InNamespace(tc.Namespace), client.MatchingLabels(tidbcluster.TiKVSelector(tc.Name))); err != nil {
			return fmt.Errorf("list TiKV claims of %s/%s: %w", tc.Namespace, tc.Name, err)
		}
		return nil
	})
	g.Go(func() error {
		if !withObjects {
			return nil
		}
		objs, err := ObserveOperatorObjects(gctx, c, tc)
		out.OperatorObjects = objs
		return err
	})
	g.Go(func() error {
		obj, err := getWhole(gctx, c, tc)
		out.Object = obj
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out.Pods = pods.Items
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].Name < out.Pods[j].Name })
	listed := map[string]*corev1.PersistentVolumeClaim{}
	for i := range labelled.Items {
		listed[labelled.Items[i].Name] = &labelled.Items[i]
	}
	nodes, claims := map[string]bool{}, map[string]bool{}
	for _, p := range out.Pods {
		if n := p.Spec.NodeName; n != "" {
			nodes[n] = true
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims[v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	var mu sync.Mutex
	g, gctx = errgroup.WithContext(ctx)
	for n := range nodes {
		g.Go(func() error {
			node := &corev1.Node{}
			if err := c.Get(gctx, types.NamespacedName{Name: n}, node); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("get node %s: %w", n, err)
			}
			mu.Lock()
			out.Nodes[n] = node
			mu.Unlock()
			return nil
		})
	}
	for name := range claims {
		g.Go(func() error {
			pvc, pv, err := observeClaim(gctx, c, tc.Namespace, name, listed[name])
			mu.Lock()
			defer mu.Unlock()
			if pvc != nil {
				out.PVCs[name] = pvc
			}
			if pv != nil {
				out.PVs[pv.Name] = pv
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// getWhole reads tc as the API server holds it, every field, unstructured: fedbr's reduced
// type would drop what it lacks (spec.tikv.config, spec.tiflash, ...). It is nil when the
// TidbCluster is gone (Discover says so).
func getWhole(ctx context.Context, c client.Reader, tc *pcv1alpha1.TidbCluster) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind("TidbCluster"))
	if err := c.Get(ctx, types.NamespacedName{Namespace: tc.Namespace, Name: tc.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get TidbCluster %s/%s: %w", tc.Namespace, tc.Name, err)
	}
	return u, nil
}

// observeClaim reads a claim (unless listed already has it) and its volume; either is nil
// when missing (Discover names what is missing).
func observeClaim(ctx context.Context, c client.Reader, ns, name string, listed *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, error) {
	pvc := listed
	if pvc == nil {
		pvc = &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, nil
			}
			return nil, nil, fmt.Errorf("get claim %s/%s: %w", ns, name, err)
		}
	}
	if pvc.Spec.VolumeName == "" {
		return pvc, nil, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return pvc, nil, nil
		}
		return pvc, nil, fmt.Errorf("get volume %s: %w", pvc.Spec.VolumeName, err)
	}
	return pvc, pv, nil
}

// apply runs the planned actions in order, except that Jobs planned one after another are
// created at once (the initializer's pause and snapshot steps both arm the backup).
func (r *Reconciler) apply(ctx context.Context, ap *apply.Applier, m *dpv1alpha1.VolumeBackupMember, actions []Action) error {
	for i := 0; i < len(actions); i++ {
		if n := independentRun(actions[i:]); n > 1 {
			// None of them touches the member.
			if err := apply.Concurrently(actions[i:i+n], func(a Action) error { return r.applyOne(ctx, ap, m, a) }); err != nil {
				return err
			}
			i += n - 1
			continue
		}
		if err := r.applyOne(ctx, ap, m, actions[i]); err != nil {
			return err
		}
	}
	return nil
}

// applyOne applies one action. ResetStep writes the member's status (locked to its version),
// leaving m as stored.
func (r *Reconciler) applyOne(ctx context.Context, ap *apply.Applier, m *dpv1alpha1.VolumeBackupMember, a Action) error {
	var err error
	switch a.Kind {
	case EnsureConfigMap:
		err = ap.EnsureConfigMap(ctx, a.ConfigMap)
	case EnsureServiceAccount:
		err = ap.EnsureServiceAccount(ctx, m.Namespace)
	case ResetStep:
		err = ap.PatchStatusLocked(ctx, m, func() {
			m.Status.Steps = slices.DeleteFunc(m.Status.Steps, func(s dpv1alpha1.StepReport) bool { return s.Name == a.Name })
		})
	case CreateJob:
		err = ap.CreateJob(ctx, m, a.Job)
	case StopJob:
		err = ap.StopJob(ctx, m, m.Namespace, a.Name)
	case DeleteJob:
		err = ap.DeleteJob(ctx, m, m.Namespace, a.Name)
	default:
		err = errors.New("unknown action")
	}
	if err != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, "ApplyFailed", "Reconcile", "%s: %v", a, err)
		return fmt.Errorf("%s: %w", a, err)
	}
	return nil
}

// independentRun counts the actions at the head of as that do not depend on one another:
// prerequisites (a ConfigMap, the steps' service account), or Jobs.
func independentRun(as []Action) int { return apply.Run(as, independent) }

var independent = apply.ByKind(func(a Action) ActionKind { return a.Kind },
	[]ActionKind{EnsureConfigMap, EnsureServiceAccount}, []ActionKind{CreateJob})

// SetupWithManager registers the controller: it reacts to its members (a step's report in the
// member's status.steps is an event, never a poll), to their Jobs and to their TidbClusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&dpv1alpha1.VolumeBackupMember{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(apply.MapOwner(Kind))).
		Watches(&pcv1alpha1.TidbCluster{}, handler.EnqueueRequestsFromMapFunc(r.membersOf)).
		Named("volumebackupmember").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(maxConcurrent, 1)}).
		Complete(r)
}

// membersOf maps a TidbCluster to the members that back it up.
func (r *Reconciler) membersOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &dpv1alpha1.VolumeBackupMemberList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Listing VolumeBackupMembers for a TidbCluster event", "tidbCluster", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if m.Spec.TCName == o.GetName() && m.Spec.TCNamespace == o.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return out
}
