// Package bank is the `fedbr-lab lab bank` command: load the bank, run
// transfers against a TiDB double, and check a (restored) cluster against
// the log of committed transfers.
package bank

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/bank"
)

type options struct {
	pd      string
	log     string
	cfg     bank.Config
	workers int
	rate    float64
	dur     time.Duration
	// transfers stops a run once this many transfers committed (0: no limit).
	transfers int
	// load writes the opening balances before the run's transfers (run --load).
	load   bool
	flush  time.Duration
	ts     uint64
	readTS uint64
	seed   uint64
	dryRun bool
}

// NewCmd returns `lab bank` with load, run and check.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "bank",
		Short: "Bank workload and consistency checker for the TiDB double",
	}
	p := cmd.PersistentFlags()
	p.StringVar(&o.pd, "pd", "127.0.0.1:2379", "PD address host:port")
	p.StringVar(&o.log, "log", "bank-log.jsonl", "file of committed transactions (JSON lines, appended)")
	p.IntVar(&o.cfg.Accounts, "accounts", 1000, "number of accounts")
	p.Int64Var(&o.cfg.Initial, "initial", 100, "opening balance of every account")
	p.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print what would run")

	load := &cobra.Command{
		Use: "load", Short: "Write every account's opening balance", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runLoad(cmd) },
	}
	run := &cobra.Command{
		Use: "run", Short: "Make random transfers in multi-region transactions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runRun(cmd) },
	}
	run.Flags().IntVar(&o.workers, "workers", 8, "concurrent clients")
	run.Flags().Float64Var(&o.rate, "rate", 0, "transfers per second over all workers (0: as fast as possible)")
	run.Flags().DurationVar(&o.dur, "duration", 0, "stop after this long (0: until interrupted)")
	run.Flags().IntVar(&o.transfers, "transfers", 0, "stop once this many transfers committed (0: no limit)")
	run.Flags().Uint64Var(&o.seed, "seed", 1, "seed of the random transfers")
	run.Flags().BoolVar(&o.load, "load", false, "write every account's opening balance first (as load does)")
	run.Flags().DurationVar(&o.flush, "flush-every", time.Second, "append the committed transactions to --log this often while running (and once more on exit)")
	check := &cobra.Command{
		Use: "check --ts TS", Short: "Verify the cluster holds exactly the state as of TS", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runCheck(cmd) },
	}
	check.Flags().Uint64Var(&o.ts, "ts", 0, fmt.Sprintf("timestamp the cluster should reflect, e.g. the backup's resolved ts "+
		"(required: the checker judges only a ts with %d transfers of the log committed at or below it and %d after it)", bank.MinTransfers, bank.MinTransfers))
	check.Flags().Uint64Var(&o.readTS, "read-ts", 0, "timestamp to read the cluster at (0: now, for a restored cluster; a live one holds the state as of --ts at --ts)")
	cmd.AddCommand(load, run, check)
	return cmd
}

func (o *options) validate() error {
	if o.cfg.Accounts < 2 {
		return fmt.Errorf("--accounts %d: want at least 2", o.cfg.Accounts)
	}
	if o.workers < 0 || o.rate < 0 || o.transfers < 0 {
		return errors.New("--workers, --rate and --transfers must not be negative")
	}
	if o.flush <= 0 {
		return fmt.Errorf("--flush-every %s: must be positive", o.flush)
	}
	o.pd = strings.TrimPrefix(o.pd, "http://")
	return nil
}

func (o *options) runLoad(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.dryRun {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "would load %d accounts of %d via PD %s, logging to %s\n", o.cfg.Accounts, o.cfg.Initial, o.pd, o.log)
		return err
	}
	c, err := bank.NewClient(cmd.Context(), []string{o.pd})
	if err != nil {
		return err
	}
	defer c.Close()
	var l bank.Log
	err = bank.Load(cmd.Context(), c, o.cfg, &l)
	if werr := bank.AppendLog(o.log, l.Txns()); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "loaded %d accounts\n", o.cfg.Accounts)
	return err
}

func (o *options) runRun(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.workers == 0 {
		o.workers = 1
	}
	if o.dryRun {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "would run %d workers at rate %v for %v via PD %s, logging to %s\n", o.workers, o.rate, o.dur, o.pd, o.log)
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := bank.NewClient(ctx, []string{o.pd})
	if err != nil {
		return err
	}
	defer c.Close()
	runCtx := ctx
	if o.dur > 0 {
		var cancel func()
		runCtx, cancel = context.WithTimeout(ctx, o.dur)
		defer cancel()
	}
	var l bank.Log
	if o.load {
		err := bank.Load(ctx, c, o.cfg, &l)
		if werr := bank.AppendLog(o.log, l.Txns()); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(cmd.OutOrStdout(), "loaded %d accounts\n", o.cfg.Accounts)
	}
	written := len(l.Txns())
	if o.transfers > 0 {
		var cancel func()
		runCtx, cancel = context.WithCancel(runCtx)
		defer cancel()
		go func() {
			_, _ = l.WaitAfter(runCtx, 0, o.transfers)
			cancel()
		}()
	}
	// The log grows on disk as the transfers commit, so a checker can read it while this runs.
	flush := func() error {
		txns, n := l.Since(written)
		if len(txns) == 0 {
			return nil
		}
		if err := bank.AppendLog(o.log, txns); err != nil {
			return err
		}
		written = n
		return nil
	}
	flushed := make(chan error, 1)
	flushCtx, stopFlush := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(o.flush)
		defer t.Stop()
		for {
			select {
			case <-flushCtx.Done():
				flushed <- nil
				return
			case <-t.C:
				if err := flush(); err != nil {
					flushed <- err
					return
				}
			}
		}
	}()
	st := bank.Run(runCtx, c, o.cfg, &l, o.workers, o.rate, o.seed)
	stopFlush()
	if err := errors.Join(<-flushed, flush()); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "committed %d transfers in %v (%.1f txn/s), %d conflicts, %d of unknown outcome, %d failed\n",
		st.Committed, st.Elapsed.Round(time.Millisecond), float64(st.Committed)/st.Elapsed.Seconds(), st.Conflicts, st.Unknown, st.Failed)
	return err
}

func (o *options) runCheck(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.ts == 0 {
		return fmt.Errorf("--ts is required: nothing has committed after now, and the checker judges only a ts with %d transfers on each side", bank.MinTransfers)
	}
	if o.dryRun {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "would check %d accounts at ts %d via PD %s against %s\n", o.cfg.Accounts, o.ts, o.pd, o.log)
		return err
	}
	txns, err := bank.ReadLog(o.log)
	if err != nil {
		return err
	}
	c, err := bank.NewClient(cmd.Context(), []string{o.pd})
	if err != nil {
		return err
	}
	defer c.Close()
	readTS := o.readTS
	if readTS == 0 {
		if readTS, err = c.TS(cmd.Context()); err != nil {
			return err
		}
	}
	if err := bank.Check(cmd.Context(), c, o.cfg, txns, o.ts, readTS); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "bank consistent at ts %d (%d transactions in the log: %+v)\n", o.ts, len(txns), bank.Count(txns, o.ts))
	return err
}
