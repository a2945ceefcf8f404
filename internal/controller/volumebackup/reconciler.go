package volumebackup

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	memberobj "github.com/fedbr/fedbr/internal/controller/member"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/plane"
)

// Finalizer keeps a VolumeBackup until every member (and so every snapshot, per cleanPolicy) is
// gone from every data plane.
const Finalizer = "federation.pingcap.com/volumebackup-members"

// Reconciler is the VolumeBackup controller: observe, Plan, apply.
type Reconciler struct {
	// Client reaches the control plane.
	Client client.Client
	// Planes are the data planes.
	Planes *plane.Set
	// Recorder records Events on the VolumeBackup.
	Recorder events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	ctrl controller.Controller
}

// SetupWithManager registers the controller; member watches are added per plane once its cache
// has synced (WatchPlane).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&fedv1alpha1.VolumeBackup{}).
		Named("volumebackup").
		WatchesRawSource(source.Channel(r.Planes.Subscribe(), handler.EnqueueRequestsFromMapFunc(r.all))).
		Build(r)
	r.ctrl = c
	return err
}

// WatchPlane maps every member event of a plane to its VolumeBackup, so a member's progress is
// acted on at once.
func (r *Reconciler) WatchPlane(p *plane.Plane) error {
	return r.ctrl.Watch(source.Kind(p.Cluster.GetCache(), &dpv1alpha1.VolumeBackupMember{},
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, m *dpv1alpha1.VolumeBackupMember) []reconcile.Request {
			return memberobj.OwnerRequest(m)
		})))
}

// all enqueues every VolumeBackup (a data plane became reachable or unreachable).
func (r *Reconciler) all(ctx context.Context, _ client.Object) []reconcile.Request {
	var list fedv1alpha1.VolumeBackupList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing VolumeBackups")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile drives one VolumeBackup.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b fedv1alpha1.VolumeBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(&b, Finalizer) {
		patch := client.MergeFrom(b.DeepCopy())
		controllerutil.AddFinalizer(&b, Finalizer)
		if err := r.Client.Patch(ctx, &b, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	o, err := r.observe(ctx, &b)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := r.now()
	res := Plan(o, now)
	for _, a := range res.Actions {
		if err := r.apply(ctx, &b, a, now); err != nil {
			r.Recorder.Eventf(&b, nil, "Warning", "MemberUpdateFailed", string(a.Kind), "%s in %s: %v", a.Kind, a.Cluster, err)
			return reconcile.Result{}, fmt.Errorf("%s in %s: %w", a.Kind, a.Cluster, err)
		}
	}
	if err := r.writeStatus(ctx, &b, res.Status); err != nil {
		return reconcile.Result{}, err
	}
	if res.RemoveFinalizer && controllerutil.ContainsFinalizer(&b, Finalizer) {
		patch := client.MergeFrom(b.DeepCopy())
		controllerutil.RemoveFinalizer(&b, Finalizer)
		metrics.BackupSize.DeleteLabelValues(b.Namespace, b.Name)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, &b, patch))
	}
	return reconcile.Result{RequeueAfter: res.RequeueAfter}, nil
}

// observe reads every member from its plane's cache. A plane whose read fails counts as
// unreachable for this pass.
func (r *Reconciler) observe(ctx context.Context, b *fedv1alpha1.VolumeBackup) (Observed, error) {
	o := Observed{Backup: b, Members: map[string]Member{}, Known: r.Planes.Known(), Reachable: r.Planes.Reachable(),
		ForceRemove: b.Annotations[fedv1alpha1.AnnotationForceRemove] == "true"}
	for _, c := range b.Spec.Clusters {
		p, ok := r.Planes.Get(c.K8sClusterName)
		if !ok || !o.Reachable[c.K8sClusterName] {
			continue
		}
		var m dpv1alpha1.VolumeBackupMember
		err := p.Cluster.GetClient().Get(ctx, types.NamespacedName{Namespace: c.TCNamespace, Name: fedv1alpha1.MemberName(b.Name)}, &m)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			o.Reachable[c.K8sClusterName] = false
			continue
		}
		if err := memberobj.CheckOwner(&m, b, c.K8sClusterName); err != nil {
			return o, err
		}
		o.Members[c.K8sClusterName] = Member{Exists: true, Phase: m.Spec.Phase, ResumeGC: m.Spec.ResumeGC,
			PhaseSince: memberobj.PhaseSince(&m), Status: m.Status}
	}
	return o, nil
}

func (r *Reconciler) apply(ctx context.Context, b *fedv1alpha1.VolumeBackup, a Action, now time.Time) error {
	p, ok := r.Planes.Get(a.Cluster)
	if !ok {
		return fmt.Errorf("no data plane %q", a.Cluster)
	}
	c := p.Cluster.GetClient()
	cl := clusterOf(b, a.Cluster)
	key := types.NamespacedName{Namespace: cl.TCNamespace, Name: fedv1alpha1.MemberName(b.Name)}
	ref := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	switch a.Kind {
	case CreateMember:
		m := &dpv1alpha1.VolumeBackupMember{
			ObjectMeta: memberobj.NewMeta(b, key.Name, key.Namespace, now),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: b.Name, K8sClusterName: a.Cluster, TCName: cl.TCName,
				TCNamespace: cl.TCNamespace, Phase: a.Phase, BackupTS: a.BackupTS, Template: *b.Spec.Template.DeepCopy()},
		}
		m.Spec.Template.StorageProvider = b.Spec.Template.MemberStorage(a.Cluster)
		if err := memberobj.Create(ctx, c, m); err != nil {
			return err
		}
		r.Recorder.Eventf(b, nil, "Normal", "MemberCreated", "Create", "member %s in %s, phase %s", key, a.Cluster, a.Phase)
		return nil
	case SetPhase:
		spec := map[string]any{"phase": a.Phase}
		if a.BackupTS != "" {
			spec["backupTS"] = a.BackupTS
		}
		return memberobj.SetSpec(ctx, c, ref, spec, true, now)
	case ResumeGC:
		return memberobj.SetSpec(ctx, c, ref, map[string]any{"resumeGC": true}, false, now)
	case DeleteMember:
		return memberobj.Delete(ctx, c, ref)
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// writeStatus writes the planned status when it changed, and counts terminal transitions.
func (r *Reconciler) writeStatus(ctx context.Context, b *fedv1alpha1.VolumeBackup, st fedv1alpha1.VolumeBackupStatus) error {
	if equality.Semantic.DeepEqual(b.Status, st) {
		return nil
	}
	old := b.DeepCopy()
	before := old.Status.Phase
	b.Status = st
	if err := r.Client.Status().Patch(ctx, b, client.MergeFrom(old)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if before == st.Phase {
		return nil
	}
	kind := "Normal"
	if st.Phase == fedv1alpha1.VolumeBackupFailed {
		kind = "Warning"
	}
	msg := string(st.Phase)
	if c := readyCondition(st.Conditions); c != nil {
		msg = c.Message
	}
	r.Recorder.Eventf(b, nil, kind, string(st.Phase), "Phase", "%s", msg)
	r.observeTerminal(b, before, st)
	return nil
}

func readyCondition(cs []metav1.Condition) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == fedv1alpha1.VolumeBackupFailedCondition && cs[i].Status == metav1.ConditionTrue {
			return &cs[i]
		}
	}
	for i := range cs {
		if cs[i].Type == fedv1alpha1.VolumeBackupReadyCondition {
			return &cs[i]
		}
	}
	return nil
}

func (r *Reconciler) observeTerminal(b *fedv1alpha1.VolumeBackup, before fedv1alpha1.VolumeBackupPhase, st fedv1alpha1.VolumeBackupStatus) {
	terminal := func(p fedv1alpha1.VolumeBackupPhase) bool {
		return p == fedv1alpha1.VolumeBackupComplete || p == fedv1alpha1.VolumeBackupFailed
	}
	if terminal(before) || !terminal(st.Phase) {
		return
	}
	outcome := metrics.OutcomeComplete
	if st.Phase == fedv1alpha1.VolumeBackupFailed {
		outcome = metrics.OutcomeFailed
	}
	metrics.BackupsFinished.WithLabelValues(outcome).Inc()
	if st.TimeStarted != nil && st.TimeCompleted != nil {
		metrics.BackupDuration.WithLabelValues(outcome).Observe(st.TimeCompleted.Sub(st.TimeStarted.Time).Seconds())
	}
	if outcome == metrics.OutcomeComplete {
		metrics.BackupSize.WithLabelValues(b.Namespace, b.Name).Set(float64(st.BackupSize))
		if s, err := strconv.ParseFloat(st.GCPauseSeconds, 64); err == nil {
			metrics.GCPause.Observe(s)
		}
	}
}

func clusterOf(b *fedv1alpha1.VolumeBackup, name string) fedv1alpha1.VolumeBackupMemberCluster {
	for _, c := range b.Spec.Clusters {
		if c.K8sClusterName == name {
			return c
		}
	}
	return fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: name}
}
