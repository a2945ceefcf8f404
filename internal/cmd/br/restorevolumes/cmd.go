// Package restorevolumes is the `fedbr br restore-volumes` command: it prepares PD for a
// snapshot recovery and restores a backup's volumes (package br/restorevolumes), printing a
// JSON summary.
package restorevolumes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	pdhttp "github.com/tikv/pd/client/http"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

// command is this step's name: its entry in the member's status.steps.
const command = "restore-volumes"

type options struct {
	session    session.Flags
	report     session.ReportFlags
	engine     restorevolumes.Options
	pd         []string
	scope      string
	outputFile string
	owner      string
	source     session.SourceNamespaces
	tls        session.TLSFlags
	// client is --ca/--cert/--key loaded by validate (nil: plaintext).
	client *tidb.TLS
}

// NewCmd returns `fedbr br restore-volumes`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "restore-volumes --storage URL --restore-id ID --pd ADDR [--target-az AZ] [volume options]",
		Short: "Mark PD snapshot-recovering, raise its TSO and create volumes from a backup's snapshots",
		Long: `The volume phase of a restore, run before any TiKV starts on the new volumes.

It reads the backup's backupmeta from --storage (a backup whose snapshots have not all
completed is refused) and checks its snapshots: each must be the account's, tagged with the
backup's identity, of the volume recorded for it and tagged fedbr.io/namespace with one of
--source-namespaces (else --owner's namespace; neither: not checked; an upstream backup's
snapshots, with --allow-upstream-backup, need neither tag), or the step fails before anything
is touched. It sets PD's snapshot-recovering marker and raises PD's TSO to at least
the backup's resolved ts (while the volumes are created; they are recorded only once PD is
prepared). It creates one volume per backed-up volume (--volume-scope) from
its snapshot, in --target-az (default: the volume's original AZ), with the given type, IOPS,
throughput, encryption and KMS key, tagged fedbr.io/restore=ID, TiDBCluster-BR=new,
ebs.csi.aws.com/cluster=true, snapshot/createdFromSnapshotId, the snapshot's own tags under
snapshot/, and --tags (and, with --owner, fedbr.io/restore-pending=OWNER until restoremeta
records it). With --use-fsr the data volumes' snapshots get fast snapshot restore in
the target AZ first (waiting until each has a credit; disabled again at the end).

When every volume is available the old -> new volume map is written as restoremeta/ID next to
the backup (one per restore, so two restores of one backup never mix) and, with
--output-file, to a local file in BR's shape. Any failure deletes every volume tagged with the
restore id; a retry first deletes what a killed attempt left, and a retry after success
returns the recorded volumes.

Progress lines go to stderr; the JSON summary goes to stdout. With --member (a
VolumeRestoreMember) the status ({phase, volumes, backup, error}) is server-side applied to the
member's status.steps entry "restore-volumes" on every phase change, with the summary as its
result before exiting 0. With --member the step also reports the backup (the part of the
backupmeta the agent checks the target against and rebuilds the TiKV claims from) in phase
AwaitingCheck, before PD is touched or any volume created, and waits until the member's
TargetChecked condition is True; it exits with the agent's reason when the member's Failed
condition is True instead.`,
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
	f.StringVar(&o.engine.RestoreID, "restore-id", "", "the restore's identity: tag value of its volumes and the restoremeta name (required)")
	f.StringSliceVar(&o.pd, "pd", nil, "PD address(es) of the restored cluster, host:port or http://host:port (required)")
	f.StringVar(&o.engine.TargetAZ, "target-az", "", "availability zone of every new volume (default: each volume's original AZ)")
	f.StringVar(&o.engine.VolumeType, "volume-type", "gp3", "EBS volume type: gp3, gp2, io1, io2, st1, sc1 or standard")
	f.Int32Var(&o.engine.IOPS, "volume-iops", 0, "provisioned IOPS for gp3, io1 and io2 (0: the AWS default)")
	f.Int32Var(&o.engine.Throughput, "volume-throughput", 0, "throughput in MiB/s for gp3 (0: the AWS default)")
	f.BoolVar(&o.engine.Encrypted, "volume-encrypted", false, "encrypt the new volumes (volumes from encrypted snapshots are encrypted anyway)")
	f.StringVar(&o.engine.KMSKeyID, "kms-key-id", "", "KMS key (id, alias or ARN) encrypting the new volumes; needs --volume-encrypted (default: the account's EBS default key)")
	f.StringToStringVar(&o.engine.Tags, "tags", nil, "extra tags for every new volume, KEY=VALUE[,KEY=VALUE]")
	f.StringVar(&o.owner, "owner", "", fmt.Sprintf(session.OwnerUsage, meta.TagRestorePending))
	o.source.Register(f, "a snapshot must carry --owner's namespace, and with no --owner either the namespace is not checked (a step run by hand acts with the operator's own identity)")
	f.StringVar(&o.scope, "volume-scope", string(restorevolumes.ScopeAll), "which volumes to restore: all, data (storage.data-dir only) or non-data")
	f.BoolVar(&o.engine.AllowUpstream, "allow-upstream-backup", false,
		"restore a backupmeta without fedbr's identity (upstream BR wrote it), whose snapshots can be checked only for their owner and source volume (the agent passes it when its --allow-upstream-backups is on)")
	f.BoolVar(&o.engine.FSR, "use-fsr", false, "restore the data volumes through fast snapshot restore (billed per snapshot-AZ hour while enabled); only the largest snapshots that fit the account-region's FSR quota get it, the others are restored without it")
	f.IntVar(&o.engine.FSRQuota, "fsr-quota", restorevolumes.DefaultFSRQuota, "the account-region's quota of snapshots with fast snapshot restore enabled (AWS's default 5); set it when the account's quota was raised")
	f.IntVar(&o.engine.Concurrency, "concurrency", 8, "parallel CreateVolume calls (the account's EC2 budget paces them anyway)")
	f.DurationVar(&o.engine.CleanupTimeout, "cleanup-timeout", 5*time.Minute, "bound on deleting the volumes after a failure (it runs even after SIGTERM)")
	f.StringVar(&o.outputFile, "output-file", "", "also write the restoremeta JSON (BR's --output-file) to this local file")
	o.report.Register(f)
	o.tls.Register(f)
	o.report.Kind = session.KindRestoreMember
	return cmd
}

var kmsKeyPattern = regexp.MustCompile(`^(arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/.+|alias/.+|[0-9a-fA-F-]{36}|mrk-[0-9a-f]{32})$`)

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
	if o.engine.RestoreID == "" {
		return errors.New("--restore-id is required")
	}
	if len(o.pd) == 0 {
		return errors.New("--pd is required")
	}
	o.engine.Scope = restorevolumes.Scope(o.scope)
	if o.engine.Concurrency <= 0 || o.engine.CleanupTimeout <= 0 {
		return errors.New("--concurrency and --cleanup-timeout must be positive")
	}
	if k := o.engine.KMSKeyID; k != "" && !kmsKeyPattern.MatchString(k) {
		return fmt.Errorf("--kms-key-id %q: want a key id, alias/NAME or a KMS key or alias ARN", k)
	}
	if o.engine.TargetAZ != "" && o.session.Region != "" && !strings.HasPrefix(o.engine.TargetAZ, o.session.Region) {
		return fmt.Errorf("--target-az %s is not in --region %s", o.engine.TargetAZ, o.session.Region)
	}
	if err := session.ValidateTags(o.engine.Tags); err != nil {
		return err
	}
	owner, err := session.ParseOwner(o.owner)
	if err != nil {
		return err
	}
	o.engine.Owner = owner
	if o.engine.SourceNamespaces, err = o.source.Parse(); err != nil {
		return err
	}
	if err := o.engine.Validate(); err != nil {
		return fmt.Errorf("restore-volumes flags: %w", err)
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
	o.engine.Report = func(st restorevolumes.Status) { rep.Update(st.Phase, st) }
	if o.report.Member != "" {
		o.engine.Check = func(ctx context.Context) error { return o.awaitCheck(ctx, rep, session.Logf(logw)) }
	}
	o.engine.Progress = logw
	res, err := o.restore(ctx, cmd, logw)
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			return restorevolumes.Status{Phase: restorevolumes.PhaseFailed, ResolvedTS: res.ResolvedTS, Error: err.Error()}
		})
		return err
	}
	if err := rep.Result(context.WithoutCancel(ctx), res); err != nil {
		return fmt.Errorf("the volumes are restored, but the result could not be reported: %w", err)
	}
	return nil
}

// awaitCheck writes the backup's report to the member's status.steps, then waits until the
// agent checked the target against it: the member's TargetChecked condition True goes on, its
// Failed condition True (the agent refused the target) ends the step with the agent's reason.
func (o *options) awaitCheck(ctx context.Context, rep *report.Reporter, logf func(string, ...any)) error {
	if err := rep.Flush(ctx); err != nil {
		return err
	}
	v, err := o.report.WaitSignal(ctx, TargetChecked, logf)
	if err != nil {
		return err
	}
	if v != checked {
		return fmt.Errorf("the agent refused the target: %s", v)
	}
	return nil
}

// checked is TargetChecked's value for a target the agent let the restore go on into.
const checked = "checked"

// TargetChecked reads the agent's verdict on the target off a VolumeRestoreMember:
// "<reason>: <message>" of its Failed condition once that is True (a failed member is
// terminal), else "checked" once its TargetChecked condition is True; not given while neither
// is.
func TargetChecked(member *unstructured.Unstructured) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(member.Object, "status", "conditions")
	ok := false
	for _, raw := range conds {
		c, isMap := raw.(map[string]any)
		if !isMap || c["status"] != string(metav1.ConditionTrue) {
			continue
		}
		switch c["type"] {
		case dpv1alpha1.RestoreMemberFailedCondition:
			return fmt.Sprintf("%v: %v", c["reason"], c["message"]), true // terminal, whatever else holds
		case dpv1alpha1.RestoreMemberTargetCheckedCondition:
			ok = true
		}
	}
	if ok {
		return checked, true
	}
	return "", false
}

// restore runs the phase and prints its JSON summary once the engine ran.
func (o *options) restore(ctx context.Context, cmd *cobra.Command, logw io.Writer) (restorevolumes.Result, error) {
	c, err := o.session.Open(ctx)
	if err != nil {
		return restorevolumes.Result{}, err
	}
	store, p := c.Store, c.Provider
	pd := newLazyPD(func() (pdhttp.Client, error) {
		return o.client.NewPDHTTPClient("fedbr-br-restore-volumes", session.PDHTTPAddrs(o.pd))
	}, logw)
	defer pd.close()
	res, runErr := restorevolumes.Run(ctx, p, pd, store, o.engine)
	if runErr == nil && o.outputFile != "" {
		runErr = writeOutput(ctx, store, o.engine.RestoreID, o.outputFile)
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil && runErr == nil {
		return res, err
	}
	return res, runErr
}

// writeOutput copies this restore's restoremeta to a local file.
func writeOutput(ctx context.Context, store *meta.Store, restoreID, file string) error {
	rec, err := store.RestoreMeta(ctx, restoreID)
	if err != nil {
		return fmt.Errorf("--output-file: %w", err)
	}
	b, err := rec.Marshal()
	if err != nil {
		return fmt.Errorf("--output-file: %w", err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return fmt.Errorf("--output-file: %w", err)
	}
	return nil
}

// PD adapts PD's HTTP client to the restore's PD interface.
type PD struct {
	Client pdhttp.Client
	// Log receives a line when PD refuses the TSO reset as already past; nil discards it.
	Log io.Writer
}

var _ restorevolumes.PD = PD{}

// lazyPD creates PD's HTTP client on first use, in the PD preparation that runs while the
// volumes are created: creating it blocks until PD answers, and a fresh cluster's PD is often
// still starting when the restore begins, so it is tried again (every lazyPDRetry) until it
// answers. A caller whose context ends stops waiting for it, with the last error.
type lazyPD struct {
	open  func() (pdhttp.Client, error)
	log   io.Writer
	once  sync.Once
	ready chan struct{} // closed once pd is set
	pd    PD
	mu    sync.Mutex
	last  error // the last failed open
}

// lazyPDRetry is the pause between two tries to open PD's HTTP client (each try itself retries
// PD's member discovery for a while).
var lazyPDRetry = time.Second

var _ restorevolumes.PD = (*lazyPD)(nil)

func newLazyPD(open func() (pdhttp.Client, error), log io.Writer) *lazyPD {
	return &lazyPD{open: open, log: log, ready: make(chan struct{})}
}

func (l *lazyPD) get(ctx context.Context) (PD, error) {
	l.once.Do(func() {
		go func() {
			for {
				c, err := l.open()
				if err == nil {
					l.pd = PD{Client: c, Log: l.log}
					close(l.ready)
					return
				}
				l.mu.Lock()
				l.last = err
				l.mu.Unlock()
				time.Sleep(lazyPDRetry)
			}
		}()
	})
	select {
	case <-l.ready:
		return l.pd, nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.last != nil {
			return PD{}, fmt.Errorf("connect to PD: %w (last try: %w)", ctx.Err(), l.last)
		}
		return PD{}, fmt.Errorf("connect to PD: %w", ctx.Err())
	}
}

// MarkSnapshotRecovering connects, then marks (PD.MarkSnapshotRecovering).
func (l *lazyPD) MarkSnapshotRecovering(ctx context.Context) error {
	pd, err := l.get(ctx)
	if err != nil {
		return err
	}
	return pd.MarkSnapshotRecovering(ctx)
}

// ResetTS connects, then resets (PD.ResetTS).
func (l *lazyPD) ResetTS(ctx context.Context, ts uint64) error {
	pd, err := l.get(ctx)
	if err != nil {
		return err
	}
	return pd.ResetTS(ctx, ts)
}

// close closes the client if it was created (one still being created is left to the exit).
func (l *lazyPD) close() {
	select {
	case <-l.ready:
		l.pd.Client.Close()
	default:
	}
}

// MarkSnapshotRecovering sets PD's snapshot-recovering marker (idempotent in PD).
func (p PD) MarkSnapshotRecovering(ctx context.Context) error {
	return p.Client.SetSnapshotRecoveringMark(ctx)
}

// ResetTS raises PD's TSO to at least ts (force-use-larger: PD keeps max(current, ts)).
//
// HTTP 403 counts as success. PD answers 403 to a reset below its current TSO when it does not
// honour force-use-larger (PD 6.2 and older); the TSO is then already past ts, which is all
// the restore needs: timestamps handed out after the restore are above every version in the
// restored data. Upstream BR accepts 403 for the same reason. Any other status is an error.
func (p PD) ResetTS(ctx context.Context, ts uint64) error {
	forbidden := false
	c := p.Client.WithRespHandler(func(resp *http.Response, _ any) error {
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusForbidden:
			forbidden = true
			if p.Log != nil {
				_, _ = fmt.Fprintf(p.Log, "PD refused to reset its TSO to %d (403: %s); its TSO is already past it\n", ts, bytes.TrimSpace(body))
			}
			return nil
		}
		return fmt.Errorf("reset PD TSO to %d: %s: %s", ts, resp.Status, bytes.TrimSpace(body))
	})
	if err := c.ResetTS(ctx, ts, true); err != nil && !forbidden {
		return err
	}
	return nil
}
