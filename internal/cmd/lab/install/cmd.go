// Package install is `fedbr-lab lab install`: install fedbr into a running lab through its Helm
// charts, under the restricted Pod Security Standard.
package install

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/env"
)

// Flags are the install flags `lab install` and `lab up --install` share.
type Flags struct {
	Options env.InstallOptions
	// Repo is the checkout whose charts and helm are the defaults.
	Repo string
}

// Register adds the install flags to cmd; prefix names them for `lab up` ("install-"), which
// has its own --repo.
func (f *Flags) Register(cmd *cobra.Command, prefix string) {
	fl := cmd.Flags()
	if prefix == "" {
		fl.StringVar(&f.Repo, "repo", ".", "fedbr checkout whose charts/ and .cache/bin/helm-* are the defaults of --charts and --helm")
	}
	fl.StringVar(&f.Options.Helm, prefix+"helm", "", "helm binary (default: $FEDBR_HELM, else REPO/.cache/bin/helm-<pinned version>, built by make helm)")
	fl.StringVar(&f.Options.Charts, prefix+"charts", "", "folder with the fedbr-manager and fedbr-agent charts (default: REPO/charts)")
	fl.StringArrayVar(&f.Options.AllowNamespaces, prefix+"allow-namespaces", nil,
		"extra agent policy entry CONTROL=DATA[,DATA…] (the agent chart's policy.namespaces; repeatable)")
	fl.DurationVar(&f.Options.Timeout, prefix+"timeout", 2*time.Minute, "how long to wait for each part (nodes, tokens, Deployments)")
}

// Run installs fedbr into the lab l, printing progress to cmd's stderr and a summary to stdout.
func (f *Flags) Run(cmd *cobra.Command, l *env.Lab) error {
	if f.Options.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.Options.Timeout)
	}
	o := f.Options
	if o.Charts == "" {
		o.Charts = filepath.Join(f.Repo, "charts")
	}
	if o.Helm == "" {
		h, err := env.DefaultHelm(f.Repo)
		if err != nil {
			return err
		}
		o.Helm = h
	}
	o.Log = func(format string, args ...any) { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
	start := time.Now()
	if err := env.Install(cmd.Context(), l, o); err != nil {
		return err
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "fedbr installed in %s: Helm releases %s (context %s) and %s (contexts %v) in namespace %s (%s=restricted)\n",
		time.Since(start).Round(time.Millisecond), env.ManagerRelease, l.Control, env.AgentRelease, dataPlanes(l), env.InstallNamespace, env.PodSecurityEnforce)
	return err
}

func dataPlanes(l *env.Lab) []string {
	var out []string
	for _, d := range l.DataPlanes {
		out = append(out, d.Cluster)
	}
	return out
}

// NewCmd returns `fedbr-lab lab install`.
func NewCmd() *cobra.Command {
	var (
		dir string
		f   Flags
	)
	cmd := &cobra.Command{
		Use:   "install --dir DIR",
		Short: "Install fedbr into a running lab through its Helm charts, under restricted pod security",
		Long: `Install fedbr into the running lab in DIR as a user installs it, with the real helm binary:
charts/fedbr-agent into every data plane and charts/fedbr-manager into the control cluster,
each release fedbr-agent / fedbr-manager in namespace fedbr-system labelled
pod-security.kubernetes.io/enforce: restricted (the API server admits only pods that pass the
restricted Pod Security Standard). The charts' image ghcr.io/fedbr/fedbr runs the lab's
fedbr-lab binary (the nodes' image rule */fedbr). The control cluster gets one lab node for the
manager. Each agent gets the AWS double's endpoint and region; the manager's data-plane
kubeconfig (the chart's Secret fedbr-dataplanes) has one context per data plane with the token
of the agent chart's service account fedbr-manager-remote. Returns once every Deployment is
Available. Running it again upgrades the releases.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required")
			}
			l, err := env.Load(dir)
			if err != nil {
				return fmt.Errorf("no lab in %s (run lab up first): %w", dir, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(ctx)
			return f.Run(cmd, l)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the lab's directory")
	f.Register(cmd, "")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
