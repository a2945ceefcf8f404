// Package manager is `fedbr manager`: the control-plane controllers of federated backup and
// restore (see internal/manager).
package manager

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/manager"
	"github.com/fedbr/fedbr/internal/podenv"
	"github.com/fedbr/fedbr/internal/restconfig"
)

type options struct {
	run            manager.Options
	controlConfig  string
	controlContext string
	development    bool
	verbosity      int
}

// NewCmd returns `fedbr manager`.
func NewCmd() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "manager --kubeconfig DATA_PLANES",
		Short: "Run the control-plane controllers of VolumeBackup, VolumeRestore and VolumeBackupSchedule",
		Long: "Run the manager in the control plane. --kubeconfig names the data planes: one context per\n" +
			"data plane, named as the k8sClusterName used in VolumeBackup and VolumeRestore specs. The\n" +
			"control plane is reached with --control-kubeconfig, else $KUBECONFIG, else the pod's\n" +
			"service account. The kubeconfig file is re-read when it changes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			// logr's V(n) is slog level -n.
			ho := &slog.HandlerOptions{Level: slog.Level(-o.verbosity)}
			var h slog.Handler = slog.NewJSONHandler(cmd.ErrOrStderr(), ho)
			if o.development {
				h = slog.NewTextHandler(cmd.ErrOrStderr(), ho)
			}
			log := logr.FromSlogHandler(h)
			ctrl.SetLogger(log)
			o.run.Log = log.WithName("manager")
			cfg, err := o.control()
			if err != nil {
				return err
			}
			o.run.Control = cfg
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return manager.Run(ctx, o.run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.run.Kubeconfig, "kubeconfig", "", "kubeconfig with one context per data plane (context name = k8sClusterName)")
	f.StringVar(&o.controlConfig, "control-kubeconfig", "", "kubeconfig of the control plane (default: $KUBECONFIG, else in-cluster)")
	f.StringVar(&o.controlContext, "control-context", "", "context of --control-kubeconfig to use (default: its current context)")
	f.StringSliceVar(&o.run.DataPlaneNamespaces, "dataplane-namespaces", nil, "only make and watch members in these data-plane namespaces (comma-separated), where the manager's identity is bound per namespace; a VolumeBackup or VolumeRestore naming another fails NamespaceNotWatched (default: every namespace)")
	f.StringVar(&o.run.AgentNamespace, "agent-namespace", agentlease.DefaultNamespace, "the data planes' namespace of the agent, where each agent's leader-election Lease says whether it runs (metric fedbr_dataplane_agent_up)")
	f.StringVar(&o.run.Namespace, "namespace", "", "only act on VolumeBackups/VolumeRestores/VolumeBackupSchedules in this namespace (default: all)")
	o.run.Metrics.Register(f)
	f.StringVar(&o.run.HealthAddr, "health-probe-bind-address", ":8081", "healthz/readyz listen address (0 disables)")
	f.BoolVar(&o.run.LeaderElection, "leader-elect", false, "elect one active replica with a Lease")
	f.StringVar(&o.run.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's)")
	f.DurationVar(&o.run.ProbeInterval, "probe-interval", 5*time.Second, "how often each data plane's API server is probed for reachability")
	f.DurationVar(&o.run.ReloadCheck, "reload-check", 10*time.Second, "how often --kubeconfig is checked for changes")
	f.BoolVar(&o.development, "log-development", false, "human-readable logs instead of JSON")
	f.IntVar(&o.verbosity, "v", 0, "log verbosity: 1 adds how long each applied action took")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.run.Kubeconfig == "":
		return errors.New("--kubeconfig is required: one context per data plane")
	case o.run.ProbeInterval < 100*time.Millisecond:
		return fmt.Errorf("--probe-interval %s: want at least 100ms", o.run.ProbeInterval)
	case o.run.ReloadCheck < 100*time.Millisecond:
		return fmt.Errorf("--reload-check %s: want at least 100ms", o.run.ReloadCheck)
	case o.verbosity < 0:
		return fmt.Errorf("--v %d: want 0 or more", o.verbosity)
	}
	for _, ns := range o.run.DataPlaneNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--dataplane-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	// In a pod on a lab node the Secret's files are under $FEDBR_LAB_ROOT (podenv.Path); elsewhere
	// the paths are used as given.
	o.run.Kubeconfig = podenv.Path(o.run.Kubeconfig)
	if o.controlConfig != "" {
		o.controlConfig = podenv.Path(o.controlConfig)
	}
	if _, err := os.Stat(o.run.Kubeconfig); err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	return nil
}

// control is the control plane's rest config: --control-kubeconfig, else $KUBECONFIG, else the
// pod's service account (found the lab's way too, podenv.RESTConfig).
func (o *options) control() (*rest.Config, error) {
	if o.controlConfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		cfg, err := podenv.RESTConfig()
		if err == nil {
			return restconfig.Finish(cfg, "manager"), nil
		}
		if !errors.Is(err, podenv.ErrNotInPod) {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.controlConfig != "" {
		rules.ExplicitPath = o.controlConfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.controlContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	return restconfig.Finish(cfg, "manager"), nil
}
