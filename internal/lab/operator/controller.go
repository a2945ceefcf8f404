package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/tidb"
)

// Requeue intervals for what cannot be watched: PD's health and store list.
const (
	// pdWaitInterval is how soon to look again while TiKV waits for PD.
	pdWaitInterval = 2 * time.Second
	// statusRefreshInterval is how often PD's store list is copied into the status.
	statusRefreshInterval = 5 * time.Second
	// storesSettleInterval replaces it while some TiKV store is not up yet: the restore waits
	// on the status saying so, and a 5 s poll would add up to 5 s to every TiKV start.
	storesSettleInterval = 500 * time.Millisecond
)

// storeUp is the state PD's store list gives a serving store.
const storeUp = "Up"

// refreshInterval is when to copy PD's store list into the status again.
func refreshInterval(tc *pcv1alpha1.TidbCluster, st pcv1alpha1.TidbClusterStatus) time.Duration {
	if tc.Spec.TiKV == nil || tc.Spec.TiKV.Replicas == 0 {
		return statusRefreshInterval
	}
	up := 0
	for _, s := range st.TiKV.Stores {
		if s.State == storeUp {
			up++
		}
	}
	if up < int(tc.Spec.TiKV.Replicas) {
		return storesSettleInterval
	}
	return statusRefreshInterval
}

// Reconciler reconciles TidbClusters.
type Reconciler struct {
	Client client.Client
	Config Config
	PD     PDReader
	// DNS is the lab's cluster DNS; nil: none.
	DNS *DNS
}

// SetupWithManager registers the controller: TidbClusters, and the pods and Services they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.Config.Addressing.Validate(); err != nil {
		return err
	}
	if r.PD == nil {
		r.PD = NewPDReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("lab-tidbcluster").
		For(&pcv1alpha1.TidbCluster{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{SkipNameValidation: new(true)}).
		Complete(r)
}

// +kubebuilder:rbac:groups=pingcap.com,resources=tidbclusters;tidbclusters/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods;services;persistentvolumeclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile observes one TidbCluster, plans, and applies the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tc := &pcv1alpha1.TidbCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, tc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.DNS.forget(req.Namespace, req.Name)
		}
		return reconcile.Result{}, err
	}
	logger := log.FromContext(ctx).WithValues("TidbCluster", klog.KObj(tc))
	ctx = log.IntoContext(ctx, logger)
	view, err := r.addressed(ctx, tc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.DNS.publish(view, r.Config.Addressing); err != nil {
		return reconcile.Result{}, err
	}

	o, err := r.observe(ctx, view)
	if err != nil {
		return reconcile.Result{}, err
	}
	p, planErr := ComputePlan(r.Config, o)
	if errors.Is(planErr, ErrInvalidSpec) {
		logger.Error(planErr, "Refusing TidbCluster")
		return reconcile.Result{}, reconcile.TerminalError(planErr)
	}
	if err := r.apply(ctx, p.Actions); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.updateStatus(ctx, tc, p.Status); err != nil {
		return reconcile.Result{}, err
	}
	switch {
	case p.Wait == WaitPD:
		return reconcile.Result{RequeueAfter: pdWaitInterval}, nil
	case tc.DeletionTimestamp != nil, p.Wait == WaitPodsGone:
		// Pod deletions are watched.
		return reconcile.Result{}, nil
	}
	// PD's store list cannot be watched; the annotation that ends WaitVolumesReady can.
	if p.Wait == WaitVolumesReady {
		return reconcile.Result{RequeueAfter: statusRefreshInterval}, nil
	}
	return reconcile.Result{RequeueAfter: refreshInterval(tc, p.Status)}, nil
}

// addressed is tc with its namespace's address annotations (AnnotationIPPrefix,
// AnnotationBasePort, AnnotationStoreIDBase) under its own: TidbClusters another controller
// creates (a scratch restore's, from a saved manifest) get their address block from the
// namespace they are made in. tc itself is not changed.
func (r *Reconciler) addressed(ctx context.Context, tc *pcv1alpha1.TidbCluster) (*pcv1alpha1.TidbCluster, error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, types.NamespacedName{Name: tc.Namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return tc, nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", tc.Namespace, err)
	}
	var inherited map[string]string
	for _, k := range []string{AnnotationIPPrefix, AnnotationBasePort, AnnotationStoreIDBase} {
		if v, ok := ns.Annotations[k]; ok {
			if _, own := tc.Annotations[AnnotationIPPrefix]; own && k != AnnotationStoreIDBase {
				continue // the TidbCluster's own scheme wins whole
			}
			if _, own := tc.Annotations[AnnotationBasePort]; own && k != AnnotationStoreIDBase {
				continue
			}
			if _, own := tc.Annotations[k]; own {
				continue
			}
			if inherited == nil {
				inherited = map[string]string{}
			}
			inherited[k] = v
		}
	}
	if inherited == nil {
		return tc, nil
	}
	view := tc.DeepCopy()
	if view.Annotations == nil {
		view.Annotations = map[string]string{}
	}
	for k, v := range inherited {
		view.Annotations[k] = v
	}
	return view, nil
}

func (r *Reconciler) observe(ctx context.Context, tc *pcv1alpha1.TidbCluster) (Observed, error) {
	o := Observed{Cluster: tc, Pods: map[string]PodState{}, PVCs: map[string]bool{}}
	sel := client.MatchingLabels{LabelInstance: tc.Name, LabelManagedBy: managedByValue}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(tc.Namespace), sel); err != nil {
		return o, fmt.Errorf("list pods of TidbCluster %s: %w", klog.KObj(tc), err)
	}
	for _, p := range pods.Items {
		o.Pods[p.Name] = PodState{UID: p.UID, Deleting: p.DeletionTimestamp != nil,
			RecoveryMode: p.Annotations[AnnotationRecoveryMode] == "true"}
	}
	var claims corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(tc.Namespace), sel); err != nil {
		return o, fmt.Errorf("list PVCs of TidbCluster %s: %w", klog.KObj(tc), err)
	}
	for _, c := range claims.Items {
		o.PVCs[c.Name] = true
	}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: tc.Namespace, Name: ServiceName(tc.Name)}, &corev1.Service{})
	switch {
	case err == nil:
		o.Service = true
	case !apierrors.IsNotFound(err):
		return o, fmt.Errorf("get Service of TidbCluster %s: %w", klog.KObj(tc), err)
	}
	a, err := r.Config.Addressing.For(tc.Annotations)
	if err != nil {
		// ComputePlan refuses the TidbCluster.
		return o, nil
	}
	_, pdPod := o.Pods[MemberName(tc.Name, ComponentPD, 0)]
	if addr := pdAddress(a, tc); addr != "" && (pdPod || !hasLocalPD(tc)) {
		t, err := r.clientTLS(ctx, tc)
		if err != nil {
			return o, err
		}
		pd, err := r.PD.Read(ctx, r.DNS.resolve(addr), t)
		if err != nil {
			log.FromContext(ctx).V(1).Info("PD not ready", "err", err.Error())
		}
		o.PD = pd
	}
	return o, nil
}

// clientTLS is the client side of tc's TLS from its ClientSecret; nil for a TidbCluster
// without tlsCluster. A missing or unusable secret is an error: PD cannot be read without it.
func (r *Reconciler) clientTLS(ctx context.Context, tc *pcv1alpha1.TidbCluster) (*tidb.TLS, error) {
	if !TLSEnabled(tc) {
		return tidb.Plaintext, nil
	}
	var sec corev1.Secret
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: tc.Namespace, Name: ClientSecret(tc.Name)}, &sec); err != nil {
		return nil, fmt.Errorf("client secret of TidbCluster %s with tlsCluster: %w", klog.KObj(tc), err)
	}
	t, err := tidb.ParseTLS(sec.Data["ca.crt"], sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("client secret %s/%s: %w", tc.Namespace, sec.Name, err)
	}
	return t, nil
}

// apply runs the actions; each tolerates having been done already.
func (r *Reconciler) apply(ctx context.Context, actions []Action) error {
	logger := log.FromContext(ctx)
	for _, a := range actions {
		logger.Info("Applying", "action", a.String())
		var err error
		switch a.Kind {
		case CreateService:
			err = ignoreExists(r.Client.Create(ctx, a.Service))
		case CreatePVC:
			err = ignoreExists(r.Client.Create(ctx, a.PVC))
		case CreatePod:
			err = ignoreExists(r.Client.Create(ctx, a.Pod))
		case DeletePod:
			// The UID precondition keeps a stale plan from deleting a recreated pod.
			err = client.IgnoreNotFound(r.Client.Delete(ctx, a.Pod, client.Preconditions{UID: &a.Pod.UID}))
			if apierrors.IsConflict(err) {
				err = nil
			}
		default:
			err = fmt.Errorf("unknown action %q", a.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

func (r *Reconciler) updateStatus(ctx context.Context, tc *pcv1alpha1.TidbCluster, st pcv1alpha1.TidbClusterStatus) error {
	if equality.Semantic.DeepEqual(tc.Status, st) {
		return nil
	}
	base := tc.DeepCopy()
	tc.Status = st
	// tidb-operator's CRD has no status subresource: status is patched on the resource.
	if err := r.Client.Patch(ctx, tc, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
