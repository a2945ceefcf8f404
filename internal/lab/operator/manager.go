package operator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/meta"
)

// RunOptions configures Run.
type RunOptions struct {
	Config Config
	// Namespace limits the operator to one namespace; empty watches all.
	Namespace string
	// DNSDir is the lab's cluster DNS table (labdns) the operator writes its PD Services' names
	// to and resolves other clusters' names with, in ClusterDomain; empty: none.
	DNSDir, ClusterDomain string
}

// NewScheme returns the kinds the operator reads and writes.
func NewScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, pcv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run runs the operator against the API server of cfg until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o RunOptions) error {
	if err := o.Config.Addressing.Validate(); err != nil {
		return err
	}
	s, err := NewScheme()
	if err != nil {
		return err
	}
	opts := ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}}
	if o.Namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("create manager for %s: %w", cfg.Host, err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), Config: o.Config, DNS: &DNS{Dir: o.DNSDir, Domain: o.ClusterDomain}}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up TidbCluster controller: %w", err)
	}
	if err := watchOperatorKinds(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// watchOperatorKinds watches the other tidb-operator kinds, as tidb-operator's controllers (and
// a real cluster's garbage collector) do. Besides being what a real data plane has, it matters
// to what fedbr sees: an API server sets up a custom resource's storage and watch cache on the
// first request for it, and with nobody watching them, the agent's first list of each kind in
// a fresh lab took about a second (measured, 2026-12-03), on the backup's way to the pause.
func watchOperatorKinds(ctx context.Context, mgr ctrl.Manager) error {
	for _, kind := range meta.OperatorKinds[1:] {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind(kind))
		if _, err := mgr.GetCache().GetInformer(ctx, u, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("watch %ss: %w", kind, err)
		}
	}
	return nil
}
