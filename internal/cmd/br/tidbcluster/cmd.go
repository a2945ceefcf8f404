// Package tidbcluster is the `fedbr br tidbcluster` command: it reads the TidbCluster a backup
// saved in its backupmeta, for a scratch restore whose agent creates it.
package tidbcluster

import (
	"bytes"
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
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
)

// command is this step's name: its entry in the member's status.steps.
const command = dpv1alpha1.StepTidbCluster

// phaseReading is the step's one working phase (then report.PhaseCompleted or PhaseFailed).
const phaseReading = "Reading"

// Result is the step's result: the TidbCluster as the backup saved it, status included
// (kubernetes.crd_tidb_cluster), which the agent turns into the restore's
// (tidbcluster.ForRestore) and judges again.
type Result struct {
	TidbCluster json.RawMessage `json:"tidbCluster"`
}

type status struct {
	Phase string     `json:"phase"`
	Since *time.Time `json:"since,omitempty"`
	Error string     `json:"error,omitempty"`
}

type options struct {
	session session.Flags
	report  session.ReportFlags
}

// NewCmd returns `br tidbcluster`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "tidbcluster --storage URL [--member M]",
		Short: "Read the TidbCluster a backup saved, for a scratch restore to create",
		Long: `Read the backupmeta under --storage and print the TidbCluster it saved
(kubernetes.crd_tidb_cluster: the whole object, status included) as JSON on stdout; with
--member, report it in the VolumeRestoreMember's status.steps entry "tidbcluster" as the result
{"tidbCluster": …}. A scratch restore's agent (template.scratch) creates the restore's TidbCluster
from it: in recovery mode, in the member's namespace, spec.cluster moved along. The step refuses a
backup without a TidbCluster, one a restore could not be made from (not a pingcap.com TidbCluster,
no TiKV, joined by spec.pdAddresses) and one over 256 KiB.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if err := o.session.Validate(); err != nil {
				return err
			}
			return o.report.Validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return o.run(cmd)
		},
	}
	o.session.Register(cmd.Flags())
	o.report.Register(cmd.Flags())
	o.report.Kind = session.KindRestoreMember
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf := session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))
	rep, err := o.report.Reporter(command, logf)
	if err != nil {
		return err
	}
	now := time.Now()
	rep.Update(phaseReading, status{Phase: phaseReading, Since: &now})
	res, err := o.read(ctx, logf)
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			t := time.Now()
			return status{Phase: report.PhaseFailed, Since: &t, Error: err.Error()}
		})
		return err
	}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", res.TidbCluster); err != nil {
		return err
	}
	t := time.Now()
	rep.Update(report.PhaseCompleted, status{Phase: report.PhaseCompleted, Since: &t})
	if err := rep.Result(context.WithoutCancel(ctx), res); err != nil {
		return fmt.Errorf("the TidbCluster was read, but could not be reported: %w", err)
	}
	return nil
}

func (o *options) read(ctx context.Context, logf func(string, ...any)) (Result, error) {
	store, err := o.session.Store(ctx)
	if err != nil {
		return Result{}, err
	}
	rec, err := store.BackupMeta(ctx)
	if err != nil {
		return Result{}, err
	}
	raw, err := Saved(rec)
	if err != nil {
		return Result{}, err
	}
	// The agent judges it again; failing here says why where the SRE looks first.
	into := os.Getenv("POD_NAMESPACE")
	if into == "" {
		into = "default"
	}
	if _, err := tidbcluster.ForRestore(meta.Manifest{Key: "backupmeta kubernetes.crd_tidb_cluster", YAML: raw}, into, ""); err != nil {
		return Result{}, err
	}
	logf("Read the TidbCluster the backup saved (%d bytes)", len(raw))
	return Result{TidbCluster: raw}, nil
}

// Saved is the TidbCluster rec saved (kubernetes.crd_tidb_cluster) as compact JSON, bounded by
// tidbcluster.MaxSaved.
func Saved(rec *meta.Record) (json.RawMessage, error) {
	if len(rec.Kubernetes.TidbCluster) == 0 || string(rec.Kubernetes.TidbCluster) == "null" {
		return nil, errors.New("the backup saved no TidbCluster (its backupmeta has no kubernetes.crd_tidb_cluster): a scratch restore has nothing to create")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, rec.Kubernetes.TidbCluster); err != nil {
		return nil, fmt.Errorf("the backupmeta's kubernetes.crd_tidb_cluster: %w", err)
	}
	if b.Len() > tidbcluster.MaxSaved {
		return nil, fmt.Errorf("the TidbCluster the backup saved is %d bytes, over the %d a scratch restore takes", b.Len(), tidbcluster.MaxSaved)
	}
	return b.Bytes(), nil
}
