// Package up is `fedbr lab up`: start one real Kubernetes control plane per lab cluster.
package up

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// NewCmd returns `fedbr lab up`.
func NewCmd() *cobra.Command {
	var (
		o       controlplane.Options
		dryRun  bool
		repoDir string
	)
	cmd := &cobra.Command{
		Use:   "up --dir DIR [--clusters control,dp1,dp2,dp3]",
		Short: "Start a Kubernetes control plane (etcd, API server, controller-manager, scheduler) per lab cluster",
		Long: "Start one real Kubernetes control plane per cluster on free loopback ports, all in parallel,\n" +
			"and write DIR/kubeconfig with one context per cluster (the manager's input format) plus\n" +
			"DIR/<cluster>/kubeconfig. The processes keep running after this command exits; stop them\n" +
			"with `fedbr lab down --dir DIR`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.BinDir == "" {
				dir, err := controlplane.DefaultBinDir(repoDir)
				if err != nil {
					return err
				}
				o.BinDir = dir
			}
			if o.ReadyTimeout <= 0 {
				return errors.New("--ready-timeout must be positive")
			}
			if err := o.Validate(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun {
				_, err := fmt.Fprintf(out, "would start clusters %v in %s with binaries from %s\n", o.Clusters, o.Dir, o.BinDir)
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			o.Log = func(format string, args ...any) { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			st, err := controlplane.Up(ctx, o)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(st.Clusters))
			for _, c := range st.Clusters {
				names = append(names, c.Name)
			}
			slices.Sort(names)
			_, err = fmt.Fprintf(out, "lab up in %s: clusters %v\nexport KUBECONFIG=%s\n", time.Since(start).Round(time.Millisecond), names, st.Kubeconfig)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "lab state directory (created if missing)")
	f.StringSliceVar(&o.Clusters, "clusters", []string{"control", "dp1", "dp2", "dp3"}, "cluster names; each becomes a kubeconfig context")
	f.StringVar(&o.BinDir, "bin-dir", "", "folder with etcd and the Kubernetes binaries (default: the make k8s-bin cache)")
	f.StringVar(&repoDir, "repo", ".", "fedbr checkout whose .cache holds the binaries, when --bin-dir is not given")
	f.DurationVar(&o.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for every API server to be ready")
	f.BoolVar(&dryRun, "dry-run", false, "validate the flags and print what would start")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
