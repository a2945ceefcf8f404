// Package clean is the `fedbr br clean` command: it deletes a backup's snapshots and
// metadata (package br/clean) and prints a JSON summary.
package clean

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
)

// command is this step's name: its entry in the member's status.steps.
const command = "clean"

type options struct {
	session session.Flags
	report  session.ReportFlags
	engine  clean.Options
	outcome string
	source  session.SourceNamespaces
}

// NewCmd returns `br clean`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "clean --storage URL [--backup-id ID] [--backup-outcome completed|failed]",
		Short: "Delete a backup's snapshots, then its metadata",
		Long: `Delete every snapshot listed in the backup's backupmeta, paced at --delete-ratio snapshots
per second inside the account's EC2 budget (a snapshot already gone counts as deleted), then
the backup's metadata objects, backupmeta last. A small "cleaned" tombstone object is left so
that a retried clean knows the backup is already gone.

With --backup-id, snapshots tagged fedbr.io/backup=ID that backupmeta does not list
are deleted too and reported as orphans. Before anything is deleted every snapshot is checked: the
account's, tagged with the backup's identity (if it has one), of the volume backupmeta records
and, with --source-namespaces, tagged fedbr.io/namespace with one of them (not needed without
an identity); one that is not fails the clean, and nothing is deleted. When backupmeta is missing, a backup that failed is
cleaned; for a completed backup the tagged snapshots are deleted and reported, the other
metadata is kept, and the command fails: the snapshots backupmeta listed may have leaked
(--accept-missing-meta acknowledges that and finishes the clean).

--expect-volumes names the volumes a snapshot step that may have left CreateSnapshots calls
unanswered was given (the agent passes them when it stopped such a step): AWS runs a call whose
caller is gone and shows what it made some time later, so before deleting anything the clean
lists the backup's tagged snapshots every 5 s until each of these volumes has one, for at most
--settle-timeout; a volume still without one is reported ("unseen") and whatever AWS shows for it
later is left to the agent's orphan sweeper.

Progress lines go to stderr; the final JSON summary goes to stdout. Exit status 0 only when
the backup is clean. With --member the status ({phase, deleted, total, error}) is server-side
applied to the member's status.steps entry "clean" on every phase change and at most once a
second otherwise, with the summary as its result before exiting 0.`,
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
	f.StringVar(&o.engine.BackupID, "backup-id", "", "the backup's identity tag value, to sweep for orphaned snapshots (default: the one recorded in backupmeta)")
	f.StringVar(&o.outcome, "backup-outcome", string(clean.Completed), "how the backup ended: completed or failed; a failed backup without backupmeta is cleanable")
	f.Float64Var(&o.engine.DeleteRatio, "delete-ratio", clean.DefaultDeleteRatio, fmt.Sprintf("snapshots deleted per second, %v to %v", clean.MinDeleteRatio, clean.MaxDeleteRatio))
	f.BoolVar(&o.engine.DryRun, "dry-run", false, "report what would be deleted and delete nothing")
	f.StringSliceVar(&o.engine.Expected, "expect-volumes", nil, "volumes (comma-separated) the backup's snapshot step was given, when it may have left CreateSnapshots calls unanswered: wait until each has a snapshot of the backup before deleting")
	f.DurationVar(&o.engine.SettleTimeout, "settle-timeout", clean.DefaultSettleTimeout, "how long --expect-volumes waits at most")
	f.BoolVar(&o.engine.AcceptMissingMeta, "accept-missing-meta", false, "clean a completed backup whose backupmeta is missing anyway, after the tag sweep: accept that snapshots it listed may be lost")
	o.source.Register(f, "the namespace is not checked (a clean run by hand acts with the operator's own identity)")
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
	source, err := o.source.Parse()
	if err != nil {
		return err
	}
	o.engine.SourceNamespaces = source
	o.engine.Outcome = clean.Outcome(o.outcome)
	if o.outcome != string(clean.Completed) && o.outcome != string(clean.Failed) {
		return fmt.Errorf("--backup-outcome %q: want %s or %s", o.outcome, clean.Completed, clean.Failed)
	}
	if r := o.engine.DeleteRatio; r < clean.MinDeleteRatio || r > clean.MaxDeleteRatio {
		return fmt.Errorf("--delete-ratio %v: want %v to %v snapshots per second", r, clean.MinDeleteRatio, clean.MaxDeleteRatio)
	}
	if err := o.engine.Validate(); err != nil {
		flag := "--backup-id"
		switch {
		case strings.HasPrefix(err.Error(), "expected volume"):
			flag = "--expect-volumes"
		case strings.HasPrefix(err.Error(), "settle"):
			flag = "--settle-timeout"
		}
		return fmt.Errorf("%s: %w", flag, err)
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
	o.engine.Progress = logw
	o.engine.Report = func(st clean.Status) { rep.Update(st.Phase, st) }
	sum, err := o.clean(ctx, cmd)
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			return clean.Status{Phase: clean.PhaseFailed, Error: err.Error()}
		})
		return err
	}
	if err := rep.Result(context.WithoutCancel(ctx), sum); err != nil {
		return fmt.Errorf("the backup is clean, but the result could not be reported: %w", err)
	}
	return nil
}

// clean runs the clean and prints its JSON summary once the engine ran.
func (o *options) clean(ctx context.Context, cmd *cobra.Command) (clean.Summary, error) {
	c, err := o.session.Open(ctx)
	if err != nil {
		return clean.Summary{}, err
	}
	sum, runErr := clean.Run(ctx, c.Provider, c.Store, o.engine)
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(sum); err != nil && runErr == nil {
		return sum, err
	}
	return sum, runErr
}
