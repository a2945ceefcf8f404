// Package demo is `fedbr-lab lab demo`: fedbr's main job end to end in a running lab.
package demo

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	labdemo "github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/env"
)

// NewCmd returns `fedbr-lab lab demo`.
func NewCmd() *cobra.Command {
	var (
		dir  string
		o    labdemo.Options
		show labdemo.PrintOptions
	)
	cmd := &cobra.Command{
		Use:   "demo --dir DIR",
		Short: "Back up a TiDB cluster spread over the lab's data planes while a bank workload writes, restore it into fresh clusters and check it",
		Long: "In a lab started with `fedbr-lab lab up --dir DIR`: start the manager and one agent per data plane,\n" +
			"create one TiDB cluster over every data plane, run the bank workload, take a VolumeBackup while\n" +
			"it writes, create fresh TidbClusters in recovery mode, run a VolumeRestore into them, check the\n" +
			"restored cluster holds exactly the transactions committed at or before the backup's commit ts,\n" +
			"delete the backup and count what is left. Prints a picture of what runs where, progress, then a\n" +
			"headline (the result, the backup's and the restore's times, the GC pause, whether the data is\n" +
			"exact, what was left behind) before the timeline and the details; exits 0 only if everything\n" +
			"passed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required: the lab's directory")
			}
			l, err := env.Load(dir)
			if err != nil {
				return fmt.Errorf("no lab in %s (run `fedbr-lab lab up --dir %s` first): %w", dir, dir, err)
			}
			o.Lab, o.Out = l, cmd.OutOrStdout()
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _ = fmt.Fprint(cmd.OutOrStdout(), labdemo.Layout+"\n")
			r, err := labdemo.Run(ctx, o)
			if r != nil {
				r.Print(cmd.OutOrStdout(), show)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the lab's directory (as given to `fedbr-lab lab up`)")
	f.BoolVar(&show.Instrumentation, "instrumentation", false, "also print the project's own measurements of the backup: the pause window's breakdown, the member writes inside it, the overhead hop by hop")
	f.StringVar(&o.Fedbr, "fedbr", "", "fedbr binary for the manager and agents (default: the lab's)")
	f.IntVar(&o.TiKVPerPlane, "tikv", 3, "TiKV stores per data plane")
	f.IntVar(&o.Accounts, "accounts", 200, "bank accounts")
	f.IntVar(&o.Workers, "workers", 4, "bank workers")
	f.Float64Var(&o.Rate, "rate", 0, "bank transfers per second (0: as fast as it goes)")
	f.DurationVar(&o.Warmup, "warmup", 3*time.Second, "how long the bank writes, once it committed 100 transfers, before the backup starts")
	f.BoolVar(&o.RaftVolumes, "raft-volumes", false, "give each TiKV a second volume for its raft log (a warm-up reads it block by block: the agents then run with --allow-privileged-warmup)")
	f.StringVar((*string)(&o.RestoreWarmup), "restore-warmup", "", "warm-up of the restored volumes: sync (before TiKV starts), async (beside the restarted TiKV) or empty for none")
	f.StringVar((*string)(&o.RestoreWarmupStrategy), "restore-warmup-strategy", "", "warmupStrategy of the restore with --restore-warmup: hybrid (empty: the default), fio (reads every volume's device; the agents then run with --allow-privileged-warmup) or check-wal-only (verifies the data volume's RocksDB logs before TiKV starts); fsr is not run in the lab")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "bound on each wait (cluster up, backup, restore)")
	f.BoolVar(&o.KeepBackup, "keep-backup", false, "do not delete the backup at the end")
	f.BoolVar(&o.Install, "install", false, "install fedbr through its Helm charts (the manager and agents as Deployments in fedbr-system, restricted pod security; needs helm: `make helm` or $FEDBR_HELM) rather than run them as processes")
	f.BoolVar(&o.TLS, "tls", false, "run the TiDB clusters with spec.tlsCluster: a lab CA, PD and TiKV serving mutual TLS only, every step dialing them with the cluster client secret")
	return cmd
}
