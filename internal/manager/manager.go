// Package manager runs fedbr's control-plane manager: the VolumeBackup, VolumeRestore and
// VolumeBackupSchedule controllers in the control plane, with one informer cache per data plane
// for the members they drive.
//
// The data planes come from one kubeconfig (context name = k8sClusterName), usually a mounted
// Secret. When that file changes the manager reloads: it stops its controllers (releasing the
// leader lease) and starts again from the new file, so a plane can be added or its credentials
// rotated without restarting the pod. Every controller decision is idempotent and derived from
// what is observed, so a reload loses nothing.
package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/volumebackup"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/controller/volumerestore"
	"github.com/fedbr/fedbr/internal/crd"
	"github.com/fedbr/fedbr/internal/metricsauth"
	"github.com/fedbr/fedbr/internal/plane"
)

// Options configure the manager.
type Options struct {
	// Control reaches the control plane (where VolumeBackups live).
	Control *rest.Config
	// Kubeconfig names the data planes, one context each.
	Kubeconfig string
	// Namespace limits the control-plane objects watched ("" = all).
	Namespace string
	// DataPlaneNamespaces limit the data-plane namespaces where members are made and watched
	// (nil = all): plane.Options.Namespaces.
	DataPlaneNamespaces []string
	// AgentNamespace is where each data plane's agent holds its leader-election Lease, which
	// the manager reads to tell whether the agent runs (default agentlease.DefaultNamespace).
	AgentNamespace string
	// Metrics is the /metrics endpoint; HealthAddr the probes' listen address ("0" disables).
	Metrics    metricsauth.Flags
	HealthAddr string
	// LeaderElection, with LeaderElectionNamespace, makes only one replica act.
	LeaderElection          bool
	LeaderElectionNamespace string
	// ProbeInterval is how often data planes are probed for reachability.
	ProbeInterval time.Duration
	// ReloadCheck is how often the kubeconfig file is checked for changes (default 10s).
	ReloadCheck time.Duration
	Log         logr.Logger
}

// Scheme has every kind the manager reads.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fedv1alpha1.AddToScheme, dpv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// errReload ends one run of the manager because the kubeconfig changed.
var errReload = errors.New("data planes' kubeconfig changed")

// Run runs the manager until ctx ends, reloading whenever the kubeconfig changes. It refuses to
// start when the control cluster's CRDs of the kinds it watches are missing or not fedbr's
// (crd.Check): tidb-operator's BR Federation CRDs have the same names.
func Run(ctx context.Context, o Options) error {
	if o.ReloadCheck <= 0 {
		o.ReloadCheck = 10 * time.Second
	}
	if err := crd.Check(ctx, o.Control, crd.Manager); err != nil {
		return fmt.Errorf("the manager does not start: the control cluster's CRDs of its kinds:\n%w", err)
	}
	for {
		err := runOnce(ctx, o)
		if !errors.Is(err, errReload) {
			return err
		}
		o.Log.Info("reloading: the data planes' kubeconfig changed", "kubeconfig", o.Kubeconfig)
	}
}

func runOnce(ctx context.Context, o Options) error {
	content, err := os.ReadFile(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the data planes' kubeconfig: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	mopts := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       o.Metrics.Options(),
		HealthProbeBindAddress:        o.HealthAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              "fedbr-manager.federation.pingcap.com",
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Logger:                        o.Log,
		// A reload builds the controllers again in the same process; their names (and so their
		// metrics) are the same on purpose.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      controlCache(o.Namespace),
	}
	mgr, err := ctrl.NewManager(o.Control, mopts)
	if err != nil {
		return fmt.Errorf("control-plane manager: %w", err)
	}
	// The planes' OnSynced hook needs the controllers and the controllers need the planes: the
	// hook reads them through these variables, set before anything starts.
	var backups *volumebackup.Reconciler
	var restores *volumerestore.Reconciler
	planes, err := plane.Load(plane.Options{
		Kubeconfig: o.Kubeconfig, Scheme: scheme, ProbeInterval: o.ProbeInterval, Log: o.Log.WithName("planes"),
		Namespaces: o.DataPlaneNamespaces, AgentNamespace: o.AgentNamespace,
		OnSynced: func(p *plane.Plane) error {
			if err := volumebackup.WatchPlane(backups, p); err != nil {
				return err
			}
			return volumerestore.WatchPlane(restores, p)
		},
	})
	if err != nil {
		return err
	}
	rec := mgr.GetEventRecorder("fedbr-manager")
	if err := volumebackup.IndexClusters(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("index VolumeBackups by TidbCluster: %w", err)
	}
	backups = volumebackup.NewReconciler(mgr.GetClient(), planes, rec)
	restores = volumerestore.NewReconciler(mgr.GetClient(), planes, rec)
	if err := backups.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := restores.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&volumebackupschedule.Reconciler{Client: mgr.GetClient(), Recorder: rec}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(planes); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	o.Log.Info("starting", "dataPlanes", planes.Names(), "namespace", o.Namespace, "dataPlaneNamespaces", o.DataPlaneNamespaces)

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go watchFile(runCtx, o.Kubeconfig, content, o.ReloadCheck, func() { cancel(errReload) })
	err = mgr.Start(runCtx)
	if cause := context.Cause(runCtx); errors.Is(cause, errReload) {
		return errReload
	}
	return err
}

// controlCache is the control-plane cache's options: the objects of namespace ("" = all),
// without their managedFields, which the manager never reads. The rest of a VolumeBackup,
// VolumeRestore or VolumeBackupSchedule is kept: the controllers read their spec, status, labels
// and annotations, and write them back by merge patch from the cached copy. The data planes'
// caches keep less (plane.CacheOptions).
func controlCache(namespace string) cache.Options {
	o := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if namespace != "" {
		o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return o
}

// watchFile calls changed once when path's content differs from was (a mounted Secret is
// replaced through a symlink swap, so content, not mtime, is compared).
func watchFile(ctx context.Context, path string, was []byte, every time.Duration, changed func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := os.ReadFile(path) //nolint:gosec // G304: the manager's own --kubeconfig path
		if err == nil && !bytes.Equal(now, was) {
			changed()
			return
		}
	}
}
