// Package size is the `fedbr br size` command: it computes a backup's full and incremental
// snapshot sizes (package br/size) and prints them as JSON.
package size

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/size"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
)

// command is this step's name: its entry in the member's status.steps.
const command = "size"

// Phases reported under the command's key (and report.PhaseFailed).
const (
	phaseSizing    = "Sizing"
	phaseCompleted = report.PhaseCompleted
)

// status is the document reported under the command's key.
type status struct {
	Phase string     `json:"phase"`
	Since *time.Time `json:"since,omitempty"`
	Error string     `json:"error,omitempty"`
}

type options struct {
	session  session.Flags
	report   session.ReportFlags
	previous session.Flags
	level    string
	dryRun   bool
}

// NewCmd returns `br size`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "size --storage URL [--level all|full] [--previous-storage URL]",
		Short: "Compute the full and incremental size of a backup's snapshots",
		Long: `Compute, for every volume of the backup's backupmeta and in total, the full size of its
snapshot (fullSnapshotSizeInBytes, or by listing its blocks with the EBS direct API) and the
incremental size: the blocks changed since the previous snapshot of the same volume. The
previous snapshot comes from --previous-storage (the previous backup's backupmeta) or, without
it, is the newest earlier completed snapshot of the volume in the account. Every snapshot must
be completed. Calls are paced by the account's EBS direct and EC2 budgets.

Progress lines go to stderr; the JSON summary (per volume and totals, in bytes and readable,
with the elapsed time) goes to stdout and, with --member, into the member's status.steps entry
"size" as its result.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true // the flags were fine; a failure now is not a usage error
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	o.session.Register(f)
	f.StringVar(&o.previous.Storage, "previous-storage", "", "storage prefix of the previous backup of the same volumes, the base of the incremental size (default: discover it from the account's snapshots)")
	f.StringVar(&o.level, "level", string(size.All), "what to compute: all (full and incremental) or full (no changed-block listing)")
	f.BoolVar(&o.dryRun, "dry-run", false, "read backupmeta and list the snapshots that would be sized, without calling the cloud")
	o.report.Register(f)
	return cmd
}

func (o *options) validate() error {
	if err := o.session.Validate(); err != nil {
		return err
	}
	if err := o.report.Validate(); err != nil {
		return err
	}
	if o.level != string(size.All) && o.level != string(size.Full) {
		return fmt.Errorf("--level %q: want %s or %s", o.level, size.All, size.Full)
	}
	if o.previous.Storage != "" {
		o.previous.Region, o.previous.Endpoint = o.session.Region, o.session.Endpoint
		if err := o.previous.Validate(); err != nil {
			return fmt.Errorf("--previous-storage: %w", err)
		}
		if o.level == string(size.Full) {
			return fmt.Errorf("--previous-storage is only used with --level %s", size.All)
		}
	}
	return nil
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logw := session.NewLockedWriter(cmd.ErrOrStderr())
	rep, err := o.report.Reporter(command, session.Logf(logw))
	if err != nil {
		return err
	}
	now := time.Now()
	rep.Update(phaseSizing, status{Phase: phaseSizing, Since: &now})
	sum, err := o.size(ctx, cmd, logw)
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			t := time.Now()
			return status{Phase: report.PhaseFailed, Since: &t, Error: err.Error()}
		})
		return err
	}
	t := time.Now()
	rep.Update(phaseCompleted, status{Phase: phaseCompleted, Since: &t})
	if err := rep.Result(context.WithoutCancel(ctx), sum); err != nil {
		return fmt.Errorf("the backup is sized, but the result could not be reported: %w", err)
	}
	return nil
}

// size runs the sizing (or the dry run) and prints its JSON summary.
func (o *options) size(ctx context.Context, cmd *cobra.Command, logw *session.LockedWriter) (any, error) {
	store, err := o.session.Store(ctx)
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if o.dryRun {
		rec, err := store.BackupMeta(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"dryRun": true, "level": o.level, "snapshots": rec.SnapshotIDs()}
		return out, enc.Encode(out)
	}
	opts := size.Options{Level: size.Level(o.level), Progress: logw}
	if o.previous.Storage != "" {
		prev, err := o.previous.Store(ctx)
		if err != nil {
			return nil, err
		}
		if opts.Previous, err = prev.BackupMeta(ctx); err != nil {
			return nil, fmt.Errorf("read the previous backup: %w", err)
		}
	}
	p, err := o.session.Provider(ctx)
	if err != nil {
		return nil, err
	}
	sum, err := size.Run(ctx, p, store, opts)
	if err != nil {
		return nil, err
	}
	return sum, enc.Encode(sum)
}
