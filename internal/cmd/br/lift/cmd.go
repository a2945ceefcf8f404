// Package lift is `fedbr br lift`: undo what a `fedbr br pause` that died placed in PD, from
// the identity the pause recorded, and confirm PD holds none of it.
package lift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/tidb"
)

// command is this step's name: its entry in the member's status.steps.
const command = dpv1alpha1.StepLift

type options struct {
	pd          []string
	pauseStatus string
	timeout     time.Duration
	dryRun      bool
	report      session.ReportFlags
	tls         session.TLSFlags
	// client is --ca/--cert/--key loaded by validate (nil: plaintext).
	client *tidb.TLS
}

// NewCmd returns `fedbr br lift`.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "lift --pd ADDR (--member MEMBER | --pause-status FILE)",
		Short: "Undo what a pause that died placed in PD (GC safepoint, paused schedulers, schedule limits)",
		Long: "Lift what a `fedbr br pause` that died (kill -9, OOM, node loss) still holds in PD until its TTL,\n" +
			"from the identity the pause recorded before it placed anything: its GC service safepoint is\n" +
			"removed (TTL 0), its schedulers resumed (delay 0) and its TTL'd schedule config reverted to the\n" +
			"original values, all at once, with the pause's own undo. PD is then read back: the command\n" +
			"succeeds only when PD holds nothing of that identity (another service's safepoint or\n" +
			"another pause's schedulers are not looked at). Running it twice, or after the TTL lapsed,\n" +
			"succeeds. TiKV's PrepareSnapshotBackup leases are left to their TTL.\n\n" +
			"The identity comes from --pause-status (the pause's --status-file) or, with --member, from the\n" +
			"member's status.steps entry \"pause\". With --member the command reports in the entry \"lift\"\n" +
			"(phases Lifting, Lifted, Failed; liftedAt once PD shows nothing held) and writes its final\n" +
			"status, also printed on stdout, as the entry's result before exiting 0.",
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
	f.StringVar(&o.pauseStatus, "pause-status", "", "status file of the pause (its --status-file): the identity to lift (default: the pause entry of --member)")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole lift")
	f.BoolVar(&o.dryRun, "dry-run", false, "read the identity and print what PD still holds of it, lifting nothing")
	o.report.Register(f)
	o.tls.Register(f)
	_ = cmd.MarkFlagRequired("pd")
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
	if o.pauseStatus == "" && o.report.Member == "" {
		return errors.New("give the pause's identity: --pause-status, or --member to read its pause entry")
	}
	if o.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return o.report.Validate()
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	logf := session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))
	var reporter *report.Reporter // a dry run lifts nothing and reports nothing
	if !o.dryRun {
		var err error
		if reporter, err = o.report.Reporter(command, logf); err != nil {
			return err
		}
	}
	var last pause.LiftStatus
	publish := func(s pause.LiftStatus) {
		last = s
		reporter.Update(string(s.Phase), s)
	}
	final, err := o.lift(ctx, publish, logf, cmd)
	if err != nil {
		reporter.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			if last.Phase == pause.PhaseFailed {
				return last
			}
			return pause.LiftStatus{Phase: pause.PhaseFailed, Since: time.Now(), Error: err.Error()}
		})
		return err
	}
	if o.dryRun {
		return nil
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(final); err != nil {
		return err
	}
	if err := reporter.Result(context.WithoutCancel(ctx), final); err != nil {
		return fmt.Errorf("PD holds nothing of the pause any more, but the result could not be reported: %w", err)
	}
	return nil
}

// lift reads the identity, connects to PD and lifts (or, dry, prints what PD holds of it).
func (o *options) lift(ctx context.Context, publish func(pause.LiftStatus), logf func(string, ...any), cmd *cobra.Command) (pause.LiftStatus, error) {
	hold, err := o.identity(ctx)
	if err != nil {
		return pause.LiftStatus{}, err
	}
	urls := o.client.PDURLs(o.pd)
	readHeld := func(ctx context.Context, h tidb.Hold) (tidb.Held, error) {
		return tidb.AnyPD(ctx, urls, func(ctx context.Context, u string) (tidb.Held, error) {
			return o.client.ReadHeldOf(ctx, u, h, time.Now())
		})
	}
	if o.dryRun {
		held, err := readHeld(ctx, hold)
		if err != nil {
			return pause.LiftStatus{}, err
		}
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return pause.LiftStatus{}, enc.Encode(map[string]any{"dryRun": true, "identity": hold, "held": held.String()})
	}
	// The PD client keeps its own background context; it is closed once the lift is done.
	pc, err := o.client.NewPDClient(context.WithoutCancel(ctx), o.pd)
	if err != nil {
		return pause.LiftStatus{}, fmt.Errorf("connect to PD %v: %w", o.pd, err)
	}
	defer pc.Close()
	hc, err := o.client.NewPDHTTPClient("fedbr-br-lift", urls)
	if err != nil {
		return pause.LiftStatus{}, err
	}
	defer hc.Close()
	return pause.Lift(ctx, pause.LiftDeps{PD: pc, HTTP: hc, ReadHeld: readHeld, Log: logf}, hold, publish)
}

// identity is what the pause recorded placing in PD: from --pause-status, else the member's
// pause entry.
func (o *options) identity(ctx context.Context) (tidb.Hold, error) {
	if o.pauseStatus != "" {
		data, err := os.ReadFile(o.pauseStatus)
		if err != nil {
			return tidb.Hold{}, fmt.Errorf("--pause-status: %w", err)
		}
		var st pause.Status
		if err := json.Unmarshal(data, &st); err != nil {
			return tidb.Hold{}, fmt.Errorf("--pause-status %s: %w", o.pauseStatus, err)
		}
		if st.Empty() {
			return tidb.Hold{}, fmt.Errorf("--pause-status %s records no identity: the pause placed nothing, or an older fedbr ran it", o.pauseStatus)
		}
		return st.Hold, nil
	}
	s, ok, err := o.report.Step(ctx, dpv1alpha1.StepPause)
	if err != nil {
		return tidb.Hold{}, fmt.Errorf("read the pause's identity: %w", err)
	}
	if !ok || !dpv1alpha1.HasPauseIdentity(s) {
		return tidb.Hold{}, fmt.Errorf("member %s has no pause entry with an identity (the pause placed nothing, or an older fedbr ran it): nothing to lift by identity; what a pause holds lapses within its TTL",
			o.report.Member)
	}
	h := tidb.Hold{ServiceSafePoint: s.ServiceSafePoint, Schedulers: s.PausedSchedulers}
	for _, c := range s.ScheduleConfig {
		h.Config = append(h.Config, tidb.Setting{Key: c.Key, Original: c.Original, Paused: c.Paused})
	}
	return h, nil
}
