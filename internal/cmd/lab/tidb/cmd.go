// Package tidb is `fedbr-lab lab tidb`: a TiDB cluster over every data plane of a running lab,
// optionally with the bank writing to it, for the playground.
package tidb

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/env"
)

// NewCmd returns `fedbr-lab lab tidb`.
func NewCmd() *cobra.Command {
	var (
		dir string
		o   env.TiDBOptions
	)
	cmd := &cobra.Command{
		Use:   "tidb --dir DIR --namespace NS",
		Short: "Create a TiDB cluster over every data plane of a running lab, optionally with the bank writing to it",
		Long: `Create a TiDB cluster over every data plane of the running lab in DIR, for the playground:
namespace NS in every cluster (labelled pod-security.kubernetes.io/enforce, restricted by
default, which is checked by a server-side dry run of a pod it must refuse), the S3 bucket in
the AWS double (--bucket), and a TidbCluster in NS of every data plane: PD in the first, one or
more TiKV in each (the stand-in operator runs them). It returns once every store is Up.

--bank loads --accounts accounts and leaves a bank workload writing (a process of the lab,
stopped by lab down; its committed transactions go to DIR/tidb/NS/bank-log.jsonl every
second); it returns once the workload committed 100 transfers, so a backup taken next can be
checked (lab bank check).

--recovery creates fresh TidbClusters in recovery mode instead, on each data plane's restore
address block (127.0.N+100.x), for a VolumeRestore to fill.

Running it again leaves what exists as it is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Zero means "the default" to env.TiDB; on the command line it is a mistake.
			if o.TiKVPerPlane < 1 || o.Accounts < 2 || o.Workers < 1 {
				return fmt.Errorf("--tikv-per-plane %d (at least 1), --accounts %d (at least 2), --workers %d (at least 1)", o.TiKVPerPlane, o.Accounts, o.Workers)
			}
			if err := o.Validate(); err != nil {
				return err
			}
			l, err := env.Load(dir)
			if err != nil {
				return fmt.Errorf("no lab in %s (run lab up first): %w", dir, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Log = func(format string, args ...any) { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			start := time.Now()
			if err := env.TiDB(ctx, l, o); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.Recovery {
				block, err := env.RestoreBlock(l.DataPlanes[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "TidbClusters %s in recovery mode, waiting for a VolumeRestore; their PD will be %s.10:2379\n", o.Namespace, block)
				return err
			}
			if _, err := fmt.Fprintf(out, "TiDB cluster %s up in %s: PD %s\n", o.Namespace, time.Since(start).Round(time.Millisecond), l.DataPlanes[0].PDAddress()); err != nil {
				return err
			}
			for _, b := range l.Banks {
				if o.Bank && b.Namespace == o.Namespace {
					_, err := fmt.Fprintf(out, "bank writing (pid %d, %d accounts); check a restored copy with:\n  %s lab bank check --pd RESTORED_PD --accounts %d --log %s --ts BACKUP_COMMIT_TS\n",
						b.Process.PID, b.Accounts, os.Args[0], b.Accounts, b.Log)
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the lab's directory")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the TidbClusters, created in every cluster")
	f.StringVar(&o.Name, "name", "basic", "name of the TidbClusters")
	f.IntVar(&o.TiKVPerPlane, "tikv-per-plane", 1, "TiKV per data plane (1 to 10)")
	f.BoolVar(&o.RaftVolume, "raft-volumes", false, "give each TiKV a second volume for its raft log (storageVolumes raft)")
	f.BoolVar(&o.Recovery, "recovery", false, "create the TidbClusters in recovery mode on the restore address blocks, for a VolumeRestore")
	f.StringVar(&o.PodSecurity, "pod-security", "restricted", "the namespace's pod-security.kubernetes.io/enforce level: restricted, baseline or privileged (privileged for a restore whose warm-up reads block devices)")
	f.StringVar(&o.Bucket, "bucket", "fedbr-demo", "S3 bucket to create in the AWS double (empty: none)")
	f.BoolVar(&o.Bank, "bank", false, "load the bank and leave it writing until lab down")
	f.IntVar(&o.Accounts, "accounts", 200, "bank accounts")
	f.IntVar(&o.Workers, "workers", 2, "bank workers")
	f.Float64Var(&o.Rate, "rate", 20, "bank transfers per second over all workers (0: as fast as they go)")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "how long to wait for the stores, and for the bank's first transfers")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("namespace")
	return cmd
}
