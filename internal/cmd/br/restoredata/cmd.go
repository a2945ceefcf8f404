// Package restoredata is `fedbr br restore-data`: recover the regions of TiKV stores started in
// recovery mode on restored volumes, and flash the cluster back to the backup's resolved ts.
package restoredata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

// command is this step's name: its entry in the member's status.steps.
const command = "restore-data"

type options struct {
	session    session.Flags
	report     session.ReportFlags
	pd         []string
	resolvedTS uint64
	stores     int
	tolerate   bool
	waitStores time.Duration
	attempts   int
	leaderWait time.Duration
	backoff    time.Duration
	concurrent int
	timeout    time.Duration
	// waitStart starts ahead of time: connected, the step waits for its go.
	waitStart bool
	tls       session.TLSFlags
	// client is --ca/--cert/--key loaded by validate (nil: plaintext).
	client *tidb.TLS
}

// ErrResolvedTSMismatch: --resolved-ts and the backupmeta's resolved ts differ.
var ErrResolvedTSMismatch = errors.New("the resolved ts to restore to is not the backup's")

// ErrTimeout marks a data phase that --timeout ended.
var ErrTimeout = errors.New("restore-data timed out")

// errAlreadyDone: an earlier attempt of the step completed the data phase and reported it.
var errAlreadyDone = errors.New("an earlier attempt restored the data already; nothing to do")

// startSignal is the go in the member's spec: phase restore-data.
func startSignal(m *unstructured.Unstructured) (string, bool) {
	if v, _, _ := unstructured.NestedString(m.Object, "spec", "phase"); v == string(dpv1alpha1.RestoreMemberRestoreData) {
		return "true", true
	}
	return "", false
}

// NewCmd returns `fedbr br restore-data`.
func NewCmd() *cobra.Command { return newCmd(&options{}) }

// newCmd is the command with its flags parsed into o.
func newCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore-data --pd ADDR (--storage PREFIX | --resolved-ts TS)",
		Short: "Recover regions and flash the whole key space back to the backup's resolved ts",
		Long: "Run the data phase of a volume-snapshot restore. Every TiKV must run in recovery mode\n" +
			"(PD marked snapshot-recovering by restore-volumes before the stores started). Waits until PD\n" +
			"lists the whole cluster's TiKV stores (the backupmeta's tikv.replicas, one fewer with\n" +
			"--tolerate-single-tikv-outage), then holds GC below the resolved ts and PD's schedulers paused\n" +
			"until the end, on failure too. Reads every store's region metadata, picks one leader per region\n" +
			"(highest term, then longest log; overlapping stale regions lose to newer epochs; leaders\n" +
			"balanced over stores), raises PD's id allocator past every restored id, makes the leaders\n" +
			"(RecoverRegion; a store that restarts afterwards gets its plan again), flashes every region\n" +
			"back to the resolved ts, and lifts PD's snapshot-recovering mark. The planning stages are\n" +
			"retried as a whole on transient failure. Prints a JSON summary on stdout.\n\n" +
			"With --member (a VolumeRestoreMember) the status ({phase, error}) is server-side applied to\n" +
			"the member's status.steps entry \"restore-data\" on every change, with the summary as its\n" +
			"result before exiting 0.\n\n" +
			"With --wait-start the step starts ahead of time, armed: it reads the backupmeta, connects to PD,\n" +
			"then waits until --member's spec.phase is restore-data before touching anything. The agent starts the data member's step so while TiKV\n" +
			"starts, so that the pod start is off the restore's critical path.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, *o) },
	}
	f := cmd.Flags()
	o.session.Register(f)
	f.StringSliceVar(&o.pd, "pd", nil, "PD address(es), host:port or http://host:port (required)")
	f.Uint64Var(&o.resolvedTS, "resolved-ts", 0, "ts to flash back to (the agent passes the member's spec.resolvedTS); with --storage it must be the backupmeta's resolved_ts, else the step refuses before touching the cluster; default: the backupmeta's")
	f.IntVar(&o.stores, "stores", 0, "TiKV stores of the whole cluster the backup had; default: the backupmeta's tikv.replicas")
	f.BoolVar(&o.tolerate, "tolerate-single-tikv-outage", false, "proceed with one TiKV store down")
	f.DurationVar(&o.waitStores, "wait-stores-timeout", 30*time.Minute, "how long to wait for the backup's TiKV stores to come up in recovery mode, and how long flashback may go without progress while a restarted store comes back")
	f.IntVar(&o.attempts, "attempts", 5, "whole-procedure retries of the planning stages")
	f.DurationVar(&o.backoff, "backoff", 2*time.Second, "wait between retries")
	f.DurationVar(&o.leaderWait, "leader-timeout", 2*time.Minute, "an attempt's wait for its planned leaders, times the attempt's number; then the metas are read and planned again")
	f.IntVar(&o.concurrent, "concurrency", 16, "parallel region requests during flashback")
	f.DurationVar(&o.timeout, "timeout", 0, "bound on the data phase's work, from --wait-start's go (the wait is not counted), and on what comes before the wait; 0: none (under the agent the manager times the member's phase: stepTimeout)")
	f.BoolVar(&o.waitStart, "wait-start", false, "start ahead of time: read the backupmeta and connect to PD, then wait until --member's spec.phase is restore-data")
	o.report.Register(f)
	o.tls.Register(f)
	o.report.Kind = session.KindRestoreMember
	return cmd
}

func (o *options) validate() error {
	if len(o.pd) == 0 {
		return errors.New("--pd is required")
	}
	client, err := o.tls.Load()
	if err != nil {
		return err
	}
	o.client = client
	if o.resolvedTS == 0 && o.session.Storage == "" {
		return errors.New("give --storage (to read the backupmeta) or --resolved-ts")
	}
	if o.session.Storage != "" {
		if err := o.session.Validate(); err != nil {
			return err
		}
	}
	if o.stores < 0 || o.attempts < 1 || o.backoff <= 0 || o.concurrent < 1 || o.timeout < 0 || o.leaderWait <= 0 || o.waitStores <= 0 {
		return errors.New("--stores and --timeout must be >= 0, --attempts and --concurrency >= 1, --backoff, --leader-timeout and --wait-stores-timeout positive")
	}
	if o.waitStart && o.report.Member == "" {
		return errors.New("--wait-start watches --member; give it")
	}
	return o.report.Validate()
}

func run(cmd *cobra.Command, o options) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logw := session.NewLockedWriter(cmd.ErrOrStderr())
	logf := session.Logf(logw)
	rep, err := o.report.Reporter(command, logf)
	if err != nil {
		return err
	}
	res, err := o.restore(ctx, cmd, logf, func(st restoredata.Status) { rep.Update(st.Phase, st) })
	if errors.Is(err, errAlreadyDone) {
		logf("%v", err)
		return nil
	}
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			return restoredata.Status{Phase: restoredata.PhaseFailed, ResolvedTS: o.resolvedTS, Error: err.Error()}
		})
		return err
	}
	if err := rep.Result(context.WithoutCancel(ctx), res); err != nil {
		return fmt.Errorf("the data is restored, but the result could not be reported: %w", err)
	}
	return nil
}

// config is the data phase's configuration: the flags, with the resolved ts and the store count
// the backupmeta bm (nil without --storage) gives where no flag does.
func (o options) config(bm *meta.Record) (restoredata.Config, error) {
	cfg := restoredata.Config{ResolvedTS: o.resolvedTS, Stores: o.stores, Attempts: o.attempts, Backoff: o.backoff, Concurrency: o.concurrent,
		LeaderTimeout: o.leaderWait, WaitStoresTimeout: o.waitStores}
	if o.tolerate {
		cfg.MaxMissingStores = 1
	}
	if bm == nil {
		return cfg, nil
	}
	if bm.ClusterInfo != nil {
		switch saved := bm.ClusterInfo.ResolvedTS; {
		case cfg.ResolvedTS == 0:
			cfg.ResolvedTS = saved
		case saved != 0 && saved != cfg.ResolvedTS:
			return cfg, fmt.Errorf("%w: --resolved-ts %d (the member's spec.resolvedTS, which the manager decided), but the backupmeta in %s gives resolved ts %d",
				ErrResolvedTSMismatch, cfg.ResolvedTS, o.session.Storage, saved)
		}
	}
	if cfg.Stores == 0 {
		// The whole cluster's TiKV count, which every plane's backupmeta records, not this
		// plane's store list.
		cfg.Stores = max(bm.TiKV.Replicas, len(bm.TiKV.Stores))
	}
	return cfg, nil
}

// restore runs the data phase and prints its JSON summary. --timeout, when set, bounds what
// comes before the armed wait (reading the backupmeta, connecting to PD), then, anew from the
// go, the work: an armed step may wait for hours while the other planes warm up and start TiKV,
// and that wait must not eat the flashback's time. Under the agent it is unset: the manager
// times the member's phase (stepTimeout) and its verdict stops the step.
func (o options) restore(ctx context.Context, cmd *cobra.Command, logf func(string, ...any), report func(restoredata.Status)) (restoredata.Result, error) {
	parent := ctx
	ctx, cancel := within(parent, o.timeout)
	defer func() { cancel() }()
	var bm *meta.Record
	if o.session.Storage != "" {
		store, err := o.session.Store(ctx)
		if err != nil {
			return restoredata.Result{}, err
		}
		if bm, err = store.BackupMeta(ctx); err != nil {
			return restoredata.Result{}, fmt.Errorf("read backupmeta from %s: %w", o.session.Storage, err)
		}
	}
	cfg, err := o.config(bm)
	if err != nil {
		return restoredata.Result{}, err
	}
	pc, err := o.client.NewPDClient(context.WithoutCancel(ctx), o.pd)
	if err != nil {
		return restoredata.Result{}, fmt.Errorf("connect to PD %v: %w", o.pd, err)
	}
	defer pc.Close()
	hc, err := o.client.NewPDHTTPClient("fedbr-br-restore-data", session.PDHTTPAddrs(o.pd))
	if err != nil {
		return restoredata.Result{}, err
	}
	defer hc.Close()
	if o.waitStart {
		logf("Armed: waiting for spec.phase restore-data of member %s", o.report.Member)
		cancel()
		var err error
		ctx, cancel, err = afterGo(parent, o.timeout, func(ctx context.Context) error {
			_, err := o.report.WaitSignal(ctx, startSignal, logf)
			return err
		})
		if err != nil {
			return restoredata.Result{}, fmt.Errorf("waiting for the go to restore data: %w", err)
		}
		logf("Go received: restoring")
	}
	if o.report.Member != "" {
		// A Job's next attempt after one that reported its result and was killed before it
		// exited: the agent may be restarting TiKV out of recovery mode already, so this one
		// must not touch the cluster.
		prev, ok, err := o.report.Step(ctx, command)
		if err != nil {
			return restoredata.Result{}, fmt.Errorf("read this step's earlier report: %w", err)
		}
		if ok && prev.Phase == restoredata.PhaseCompleted {
			return restoredata.Result{}, fmt.Errorf("%w (member %s reports it Completed)", errAlreadyDone, o.report.Member)
		}
	}
	logf("Restoring data to resolved ts %d (%d stores expected)", cfg.ResolvedTS, cfg.Stores)
	res, err := restoredata.Run(ctx, restoredata.Deps{PD: pc, HTTP: hc, Dial: o.client.DialTiKV, Log: logf, Report: report}, cfg)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		// Whatever call the bound cut short (a gRPC stream says DeadlineExceeded in its own
		// words), the reason is the bound.
		return res, fmt.Errorf("%w: the data phase ran out of its --timeout %s: %w", ErrTimeout, o.timeout, err)
	}
	if err != nil {
		return res, err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return res, enc.Encode(res)
}

// afterGo runs the armed wait under parent alone (no --timeout: the Job's deadline bounds it),
// then returns parent bounded by timeout counted from the go.
func afterGo(parent context.Context, timeout time.Duration, wait func(context.Context) error) (context.Context, context.CancelFunc, error) {
	if err := wait(parent); err != nil {
		return parent, func() {}, err
	}
	ctx, cancel := within(parent, timeout)
	return ctx, cancel, nil
}

// within is parent bounded by timeout (0: not bounded).
func within(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, timeout)
}
