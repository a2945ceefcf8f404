// Package snapshot is the `fedbr br snapshot` command: it takes a data plane's TiKV volume
// snapshots (package br/snapshot) and prints a JSON summary.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	pd "github.com/tikv/pd/client"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

// command is this step's name: its entry in the member's status.steps.
const command = "snapshot"

type options struct {
	session      session.Flags
	report       session.ReportFlags
	engine       snapshot.Options
	pd           []string
	volumes      string
	pauseStatus  string
	waitTS       bool
	engineRan    bool // the engine ran (and reported its own failure, saying whether it settled)
	progressFile string
	pauseTTL     time.Duration
	manifests    []string
	owner        string
	parsed       []manifest
	tls          session.TLSFlags
	// client is --ca/--cert/--key loaded by validate (nil: plaintext).
	client *tidb.TLS
}

// NewCmd returns `fedbr br snapshot`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "snapshot --storage URL --backup-id ID --pd ADDR [--pause-status FILE | --backup-ts TS]",
		Short: "Snapshot every TiKV volume of this data plane, one crash-consistent set per instance",
		Long: `Take the snapshots of a volume-snapshot backup while the cluster is held by ` + "`fedbr br pause`" + `.

The volumes come from the clustermeta in --storage (or --volumes, a file in BR's volume-file
shape). Unless --skip-cluster-check, it first waits until no TiKV reports a pending admin
operation (CheckPendingAdminOp) and PD's regions cover the key space without a hole. The backup
ts is the pause's (--pause-status: its phase must be Ready) or --backup-ts. Given neither, the
step holds its own pause (as fedbr br pause does, TTL --pause-ttl), takes its backup ts, and
lifts it as soon as every snapshot has started. It then starts one crash-consistent CreateSnapshots
per EC2 instance (root and foreign volumes excluded) inside the account's EC2 budget, each
snapshot tagged fedbr.io/backup=ID and fedbr.io/store=STORE on top of its volume's tags (and,
with --owner, fedbr.io/backup-pending=OWNER until backupmeta is marked completed).

As soon as every set has started it prints "Every snapshot started": the pause may be lifted
from then on. It then writes backupmeta with fedbr.snapshots="pending", waits for the snapshots
(progress lines on stderr, --progress-file) and marks backupmeta "completed". A snapshot in
the error state fails the backup at once.

On failure after snapshots started, every snapshot tagged with the backup id is deleted and the
pending backupmeta removed (the log says so). A re-run with the same backup id resumes the
snapshots a backupmeta records, or deletes the ones an attempt never recorded before taking
one fresh set; it never leaves two sets. A prefix holding another backup's backupmeta is
refused.

The JSON summary goes to stdout. Exit status 0 only when every snapshot completed.

With --member the progress (as in --progress-file, plus backupTS, error and the times the
backup ts came, every snapshot started and every snapshot completed) is server-side applied to
the member's status.steps entry "snapshot" on every phase change (Checking and Starting only
once they lasted a second) and at most once a second otherwise, and the summary as its result
before exiting 0. Phase Started (and every later one) means every snapshot has started: the
pause may be lifted.`,
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
	f.StringVar(&o.engine.BackupID, "backup-id", "", "the backup's identity: tag value of its snapshots and fedbr.backup_id in backupmeta (required)")
	f.StringVar(&o.engine.Cluster, "cluster", "", "this data plane's k8sClusterName, recorded in backupmeta")
	f.StringSliceVar(&o.pd, "pd", nil, "PD address(es), host:port or http://host:port (required)")
	f.StringVar(&o.volumes, "volumes", "", "BR volume file (JSON, clustermeta shape) listing the stores and volumes to snapshot (default: the clustermeta in --storage)")
	f.StringVar(&o.pauseStatus, "pause-status", "", "status file of the running `fedbr br pause`; its phase must be Ready, and its backupTS becomes the backup ts; it is read again after every snapshot started")
	f.BoolVar(&o.waitTS, "wait-backup-ts", false, "start ahead of the pause: connect, then wait until --member's spec.backupTS is set (by the manager, once the pause holds) and use it as the backup ts")
	f.Uint64Var(&o.engine.BackupTS, "backup-ts", 0, "backup ts held by a pause (default: --pause-status, else PD's real-time min-resolved-ts)")
	f.BoolVar(&o.engine.SkipClusterCheck, "skip-cluster-check", false, "do not wait for no pending admin operations and no region holes")
	f.DurationVar(&o.engine.CheckTimeout, "check-timeout", 10*time.Minute, "how long to wait for the cluster check to pass")
	f.DurationVar(&o.engine.CheckInterval, "check-interval", 5*time.Second, "pause between cluster check attempts")
	f.StringToStringVar(&o.engine.Tags, "tags", nil, "extra tags for every snapshot, KEY=VALUE[,KEY=VALUE]")
	f.StringVar(&o.owner, "owner", "", fmt.Sprintf(session.OwnerUsage, meta.TagBackupPending))
	f.DurationVar(&o.engine.CleanupTimeout, "cleanup-timeout", 5*time.Minute, "bound on deleting the snapshots after a failure (it runs even after SIGTERM)")
	f.StringArrayVar(&o.manifests, "manifest", nil, "Kubernetes manifest file (multi-document YAML allowed) to store next to the backup under manifests/<ns>/<Kind>/<name>.yaml; repeatable")
	f.DurationVar(&o.pauseTTL, "pause-ttl", 2*time.Minute, "TTL of the pause this step holds itself when neither --pause-status nor --backup-ts is given")
	f.StringVar(&o.progressFile, "progress-file", "", "file rewritten atomically with the JSON progress {phase, done, total, percent, backupTS, error}")
	o.report.Register(f)
	o.tls.Register(f)
	return cmd
}

func (o *options) validate() error {
	if err := o.session.Validate(); err != nil {
		return err
	}
	client, err := o.tls.Load()
	if err != nil {
		return err
	}
	o.client = client
	if err := o.report.Validate(); err != nil {
		return err
	}
	if o.engine.BackupID == "" {
		return errors.New("--backup-id is required")
	}
	if len(o.pd) == 0 {
		return errors.New("--pd is required")
	}
	if o.pauseStatus != "" && o.engine.BackupTS != 0 {
		return errors.New("--pause-status and --backup-ts both give the backup ts; use one")
	}
	if o.waitTS && (o.pauseStatus != "" || o.engine.BackupTS != 0) {
		return errors.New("--wait-backup-ts waits for the backup ts; it excludes --pause-status and --backup-ts")
	}
	if o.waitTS && o.report.Member == "" {
		return errors.New("--wait-backup-ts reads the backup ts from --member; give it")
	}
	parsed, err := readManifests(o.manifests)
	if err != nil {
		return err
	}
	o.parsed = parsed
	if o.pauseTTL < 3*time.Second {
		return errors.New("--pause-ttl must be at least 3s")
	}
	if o.engine.CheckTimeout <= 0 || o.engine.CheckInterval <= 0 || o.engine.CleanupTimeout <= 0 {
		return errors.New("--check-timeout, --check-interval and --cleanup-timeout must be positive")
	}
	if err := session.ValidateTags(o.engine.Tags); err != nil {
		return err
	}
	if o.engine.Owner, err = session.ParseOwner(o.owner); err != nil {
		return err
	}
	if o.volumes != "" {
		b, err := os.ReadFile(o.volumes)
		if err != nil {
			return fmt.Errorf("--volumes: %w", err)
		}
		if o.engine.Input, err = meta.Parse(b); err != nil {
			return fmt.Errorf("--volumes %s: %w", o.volumes, err)
		}
	}
	if err := o.engine.Validate(); err != nil {
		return fmt.Errorf("--backup-id, --tags or --volumes: %w", err)
	}
	return nil
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The engine, this step's own pause and the member reporter all log; one lock keeps
	// their lines whole.
	logw := session.NewLockedWriter(cmd.ErrOrStderr())
	rep, err := o.report.Reporter(command, func(format string, args ...any) { _, _ = fmt.Fprintf(logw, format+"\n", args...) })
	if err != nil {
		return err
	}
	res, err := o.snapshot(ctx, cmd, logw, func(pr snapshot.Progress) { rep.Update(pr.Phase, pr) })
	if err != nil {
		// Failed before the engine ran (which reports its own failures): tell the watchers why,
		// and that no CreateSnapshots call went out.
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			return snapshot.Progress{Phase: snapshot.PhaseFailed, BackupTS: o.engine.BackupTS, Error: err.Error(), Settled: !o.engineRan}
		})
		return err
	}
	// The result carries the last progress with it: the manager completes the backup on the
	// member's step entry holding both (completedAt and the result, with backupmeta final).
	if err := rep.Result(context.WithoutCancel(ctx), res); err != nil {
		return fmt.Errorf("every snapshot completed, but the result could not be reported: %w", err)
	}
	return nil
}

// snapshot runs the step, printing its JSON summary once the engine ran, and sends the
// engine's progress to report.
func (o *options) snapshot(ctx context.Context, cmd *cobra.Command, logw io.Writer, report func(snapshot.Progress)) (snapshot.Result, error) {
	if o.pauseStatus != "" {
		// Checked before anything connects: a pause that is not Ready is a usage error.
		st, err := pause.ReadStatusFile(o.pauseStatus)
		if err != nil {
			return snapshot.Result{}, err
		}
		o.engine.BackupTS = st.BackupTS
		o.engine.StillPaused = func(context.Context, uint64) error {
			now, err := pause.ReadStatusFile(o.pauseStatus)
			if err == nil && now.BackupTS != st.BackupTS {
				err = fmt.Errorf("the pause now holds backup ts %d, not %d", now.BackupTS, st.BackupTS)
			}
			return err
		}
	}
	// PD is connected to while the storage and AWS clients open and the manifests are written:
	// for an armed step all of it sits between its pod's start and Armed. The PD client keeps
	// its own background context; it is closed when the step ends.
	prep := time.Now()
	var (
		pc     pd.Client
		pdErr  error
		pdTook time.Duration
		pdDone = make(chan struct{})
	)
	go func() {
		defer close(pdDone)
		pc, pdErr = o.client.NewPDClient(context.WithoutCancel(ctx), o.pd)
		pdTook = time.Since(prep)
	}()
	defer func() {
		<-pdDone
		if pc != nil {
			pc.Close()
		}
	}()
	connected := func() error {
		<-pdDone
		if pdErr != nil {
			return fmt.Errorf("connect to PD %v: %w", o.pd, pdErr)
		}
		return nil
	}
	hc, err := o.client.NewPDHTTPClient("fedbr-br-snapshot", session.PDHTTPAddrs(o.pd))
	if err != nil {
		return snapshot.Result{}, err
	}
	defer hc.Close()
	var releasePause func()
	if o.engine.BackupTS == 0 && !o.waitTS {
		// Run alone: hold our own pause, and lift it as soon as every snapshot has started.
		if err := connected(); err != nil {
			return snapshot.Result{}, err
		}
		own, err := pause.Start(ctx, pause.Deps{PD: pc, HTTP: hc, Dial: o.client.DialBackup,
			Log: func(format string, args ...any) { _, _ = fmt.Fprintf(logw, "pause: "+format+"\n", args...) }}, pause.Config{TTL: o.pauseTTL})
		if err != nil {
			return snapshot.Result{}, err
		}
		o.engine.BackupTS, o.engine.StillPaused = own.BackupTS(), own.Holds
		releasePause = own.Release
		defer own.Release()
	}
	c, err := o.session.Open(ctx)
	if err != nil {
		return snapshot.Result{}, err
	}
	store, p := c.Store, c.Provider
	if o.engine.Manifests, err = putManifests(ctx, store, o.parsed); err != nil {
		return snapshot.Result{}, err
	}
	storageTook := time.Since(prep)
	if err := connected(); err != nil {
		return snapshot.Result{}, err
	}
	if o.waitTS {
		// Everything that takes time (process start, PD, AWS and storage clients, manifests,
		// the engine's own preparation) is done before the pause exists, so the pause window
		// holds only the snapshot work.
		engineStart := time.Now()
		o.engine.WaitBackupTS = func(ctx context.Context) (uint64, error) {
			_, _ = fmt.Fprintf(logw, "Prepared in %s: PD connected in %s, storage and manifests in %s (at once), then the engine's checks and volume descriptions in %s\n",
				time.Since(prep).Round(time.Millisecond), pdTook.Round(time.Millisecond), storageTook.Round(time.Millisecond), time.Since(engineStart).Round(time.Millisecond))
			return o.waitBackupTS(ctx, logw, report)
		}
	}

	if o.report.Member != "" && o.pauseStatus == "" && (o.waitTS || o.engine.BackupTS != 0) {
		// The pause runs for the backup in another pod, perhaps another data plane: PD is
		// where every plane can see that it still holds.
		o.engine.StillPaused = o.pauseInPD
	}
	o.engine.Progress = logw
	var pf progressFile
	if o.progressFile != "" {
		pf.path = o.progressFile
	}
	o.engine.Report = func(pr snapshot.Progress) {
		if pf.path != "" {
			pf.write(pr)
		}
		report(pr)
		if releasePause != nil && (snapshot.PauseMayLift(pr.Phase) || pr.Phase == snapshot.PhaseFailed || pr.Phase == snapshot.PhaseCleaningUp) {
			releasePause() // every snapshot has started (or the step is over): GC may run again
		}
	}
	o.engineRan = true
	res, runErr := snapshot.Run(ctx, snapshot.Deps{Cloud: p, Sizer: p, Store: store, PD: pc, PDHTTP: snapshot.NewPDHTTP(hc), Dial: o.client.DialBackup}, o.engine)
	if err := pf.err(); err != nil {
		_, _ = fmt.Fprintf(logw, "Writing the progress file failed: %v\n", err)
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil && runErr == nil {
		return res, err
	}
	return res, runErr
}

// backupTSSignal is the backup ts in the member's spec.
func backupTSSignal(m *unstructured.Unstructured) (string, bool) {
	v, _, _ := unstructured.NestedString(m.Object, "spec", "backupTS")
	return v, v != ""
}

// waitBackupTS reports Armed and waits for the backup ts in the member's spec.
func (o *options) waitBackupTS(ctx context.Context, logw io.Writer, report func(snapshot.Progress)) (uint64, error) {
	report(snapshot.Progress{Phase: snapshot.PhaseArmed})
	_, _ = fmt.Fprintf(logw, "Armed: waiting for spec.backupTS of member %s\n", o.report.Member)
	v, err := o.report.WaitSignal(ctx, backupTSSignal, session.Logf(logw))
	if err != nil {
		return 0, err
	}
	ts, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || ts == 0 {
		return 0, fmt.Errorf("member %s spec.backupTS = %q: want a TSO", o.report.Member, v)
	}
	_, _ = fmt.Fprintf(logw, "Backup ts %d received\n", ts)
	return ts, nil
}

// pauseInPD checks that PD (any of its members answers for the cluster) lists a live fedbr
// pause's GC safepoint at backupTS.
func (o *options) pauseInPD(ctx context.Context, backupTS uint64) error {
	var errs []error
	for _, u := range session.PDHTTPAddrs(o.pd) {
		err := o.client.CheckPauseHolds(ctx, u, backupTS, time.Now())
		if err == nil || errors.Is(err, tidb.ErrPauseGone) {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// progressFile rewrites the progress JSON atomically.
type progressFile struct {
	path    string
	mu      sync.Mutex
	lastErr error
}

func (f *progressFile) write(p snapshot.Progress) {
	data, _ := json.Marshal(p)
	tmp := filepath.Join(filepath.Dir(f.path), "."+filepath.Base(f.path)+".tmp")
	err := os.WriteFile(tmp, append(data, '\n'), 0o600)
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.lastErr = err
	}
}

func (f *progressFile) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}
