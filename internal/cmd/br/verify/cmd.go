// Package verify is `fedbr br verify`: judge a restored TiDB cluster from PD, one line per
// check (internal/br/verify).
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/verify"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/tidb"
)

type options struct {
	pd       []string
	stores   int
	commitTS uint64
	wait     time.Duration
	interval time.Duration
	tls      session.TLSFlags
	report   session.ReportFlags
	// client is --ca/--cert/--key loaded by validate (nil: plaintext).
	client *tidb.TLS
}

// ErrFailed is the error of a run whose checks did not all pass.
var ErrFailed = errors.New("the restored cluster failed verification")

// NewCmd returns `fedbr br verify`.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "verify --pd ADDR [--stores N] [--commit-ts TS]",
		Short: "Check a restored TiDB cluster from PD: recovery mark lifted, stores Up, regions whole and led, TSO past the commit ts",
		Long: "Judge a restored TiDB cluster from PD alone, as a restore drill does once the restore completed:\n" +
			"  - PD's snapshot-recovering mark is lifted (restore-data lifts it at its end);\n" +
			"  - every TiKV store is Up (TiFlash and tombstones aside), as many as --stores when given;\n" +
			"  - PD's regions tile the whole key space, each with a leader, none left in flashback;\n" +
			"  - with --commit-ts, PD's TSO is above the backup's commit ts.\n" +
			"A cluster just out of recovery settles within a few heartbeats, so the checks run again every\n" +
			"--interval until they all pass or --wait ends. One line per check on stderr, the result as JSON\n" +
			"on stdout; the exit status is non-zero when a check failed. It reads only.\n\n" +
			"With --member (a VolumeRestoreMember: the agent runs it on a restore's data member once the restore\n" +
			"completed, when the restore's template asks for verify) its status is server-side applied to the\n" +
			"member's status.steps entry \"verify\": phase Checking, then the result (Completed) or the failed\n" +
			"checks (Failed).",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.pd, "pd", nil, "PD address(es), host:port or http://host:port")
	f.IntVar(&o.stores, "stores", 0, "TiKV stores the backup had (its backupmeta's tikv.replicas over the planes); 0: not checked")
	f.Uint64Var(&o.commitTS, "commit-ts", 0, "the backup's commit ts: PD's TSO must be above it; 0: not checked")
	f.DurationVar(&o.wait, "wait", 2*time.Minute, "how long the checks may take to all pass")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "how often the checks run again while one fails")
	o.tls.Register(f)
	o.report.Register(f)
	o.report.Kind = session.KindRestoreMember
	_ = cmd.MarkFlagRequired("pd")
	return cmd
}

func (o *options) validate() error {
	switch {
	case len(o.pd) == 0:
		return errors.New("--pd is required")
	case o.stores < 0:
		return errors.New("--stores must be 0 or more")
	case o.wait < 0 || o.interval <= 0:
		return errors.New("--wait must be 0 or more and --interval positive")
	}
	client, err := o.tls.Load()
	if err != nil {
		return err
	}
	o.client = client
	return o.report.Validate()
}

// command is this step's name: its entry in the member's status.steps.
const command = "verify"

// status is the step's report while it runs and when it failed.
type status struct {
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.wait+time.Minute)
	defer cancel()
	logf := session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))
	rep, err := o.report.Reporter(command, logf)
	if err != nil {
		return err
	}
	r, err := o.check(ctx, logf, func(phase string) { rep.Update(phase, status{Phase: phase}) })
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any { return status{Phase: report.PhaseFailed, Error: err.Error()} })
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	if !r.Passed {
		err := fmt.Errorf("%w:\n%s", ErrFailed, r.Failed())
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any { return status{Phase: report.PhaseFailed, Error: err.Error()} })
		return err
	}
	rep.Update(report.PhaseCompleted, status{Phase: report.PhaseCompleted})
	if err := rep.Result(context.WithoutCancel(ctx), r); err != nil {
		return fmt.Errorf("every check passed, but the result could not be reported: %w", err)
	}
	return nil
}

// check connects to PD and runs the checks until they pass or --wait ends.
func (o *options) check(ctx context.Context, logf func(string, ...any), phase func(string)) (verify.Result, error) {
	phase(report.PhaseChecking)
	pc, err := o.client.NewPDClient(ctx, o.pd)
	if err != nil {
		return verify.Result{}, fmt.Errorf("connect to PD: %w", err)
	}
	defer pc.Close()
	hc, err := o.client.NewPDHTTPClient("fedbr-verify", o.pd)
	if err != nil {
		return verify.Result{}, err
	}
	defer hc.Close()
	urls := o.client.PDURLs(o.pd)
	recovering := func(ctx context.Context) (bool, error) {
		return tidb.AnyPD(ctx, urls, o.client.SnapshotRecovering)
	}
	return verify.Until(ctx, verify.Deps{PD: pc, Stores: hc, Recovering: recovering, Log: logf},
		verify.Config{Stores: o.stores, CommitTS: o.commitTS}, o.wait, o.interval), nil
}
