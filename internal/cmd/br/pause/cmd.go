// Package pause is `fedbr br pause`: hold a TiDB cluster still for a snapshot backup until
// stopped.
package pause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/tidb"
)

// command is this step's name: its entry in the member's status.steps.
const command = "pause"

// recordTimeout bounds the write of the pause's identity to the member before it places
// anything; a pause that cannot record it places nothing and fails.
const recordTimeout = 30 * time.Second

type options struct {
	pd          []string
	ttl         time.Duration
	backupTS    uint64
	statusFile  string
	statusAddr  string
	cleanup     time.Duration
	dialTimeout time.Duration
	report      session.ReportFlags
	tls         session.TLSFlags
	// client is --ca/--cert/--key loaded (nil: plaintext).
	client *tidb.TLS
	// watchRelease lifts the pause when the member asks for it (releaseSignal).
	watchRelease bool
	// waitStart starts the pause only once the member says so (startSignal): the Job and its
	// pod start ahead of time, and the GC pause begins one watch event after the manager's go,
	// never a pod start later.
	waitStart bool
}

// startSignal is the go to pause in the member's spec: startPause.
func startSignal(m *unstructured.Unstructured) (string, bool) {
	if v, _, _ := unstructured.NestedBool(m.Object, "spec", "startPause"); v {
		return "true", true
	}
	return "", false
}

// releaseSignal is the member asking for the pause to be lifted: resumeGC, teardown or its
// deletion.
func releaseSignal(m *unstructured.Unstructured) (string, bool) {
	resume, _, _ := unstructured.NestedBool(m.Object, "spec", "resumeGC")
	phase, _, _ := unstructured.NestedString(m.Object, "spec", "phase")
	if resume || phase == string(dpv1alpha1.BackupMemberTeardown) || m.GetDeletionTimestamp() != nil {
		return "true", true
	}
	return "", false
}

// NewCmd returns `fedbr br pause`.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "pause --pd ADDR",
		Short: "Pin GC, lease every TiKV (wait-apply) and pause PD scheduling; hold until SIGTERM",
		Long: "Pause a TiDB cluster for a volume-snapshot backup and hold the pause until SIGTERM/SIGINT:\n" +
			"pin a GC service safepoint at the backup ts (min-resolved-ts unless --backup-ts), take a\n" +
			"PrepareSnapshotBackup lease on every TiKV and wait until every region applied its log, then\n" +
			"pause PD's schedulers and scheduling limits. Everything is TTL-bound: SIGTERM lifts it all at\n" +
			"once and exits 0; kill -9 lets it lapse within --ttl.\n\n" +
			"Readiness is machine-readable: --status-file is rewritten atomically on every change, and\n" +
			"--status-addr serves the same JSON on GET /status plus Prometheus metrics on GET /metrics\n" +
			"(fedbr_br_pause_phase, fedbr_br_pause_gc_paused_seconds, fedbr_br_pause_backup_ts). The\n" +
			"phases are Starting, GCPaused, Ready, Stopping, Stopped and Failed. A pause that breaks\n" +
			"after Ready (a TiKV stream ends, a lease is lost) exits 1 with phase Failed.\n\n" +
			"With --member the same status is server-side applied to the member's status.steps entry\n" +
			"\"pause\", with the final status, also printed on stdout, as its result before exiting 0.\n" +
			"The status carries the pause's identity (serviceSafePoint, pausedSchedulers, scheduleConfig),\n" +
			"written to the member before anything is placed; `fedbr br lift` undoes it if the pause dies.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, o) },
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.pd, "pd", nil, "PD address(es), host:port or http://host:port")
	f.DurationVar(&o.ttl, "ttl", 2*time.Minute, "TTL of the GC safepoint, TiKV leases and PD pauses (at least 3s)")
	f.Uint64Var(&o.backupTS, "backup-ts", 0, "GC safepoint to keep; 0 reads PD's min-resolved-ts")
	f.StringVar(&o.statusFile, "status-file", "", "file to write the JSON status to on every change")
	f.StringVar(&o.statusAddr, "status-addr", "", "address to serve the JSON status on (GET /status), e.g. 127.0.0.1:9090")
	f.DurationVar(&o.cleanup, "cleanup-timeout", 30*time.Second, "bound on lifting everything after SIGTERM")
	f.DurationVar(&o.dialTimeout, "dial-timeout", 10*time.Second, "timeout of each connection attempt to a TiKV")
	f.BoolVar(&o.waitStart, "wait-start", false, "start ahead of time: connect to PD, then wait until --member's spec.startPause is true before pinning anything")
	f.BoolVar(&o.watchRelease, "watch-release", false, "also lift everything and exit as soon as --member asks for it (spec.resumeGC, phase teardown, or its deletion), besides SIGTERM: one watch event, faster than stopping the pod")
	o.report.Register(f)
	o.tls.Register(f)
	_ = cmd.MarkFlagRequired("pd")
	return cmd
}

func (o options) validate() error {
	if len(o.pd) == 0 {
		return errors.New("--pd is required")
	}
	if o.ttl < 3*time.Second {
		return fmt.Errorf("--ttl %s is too short; use at least 3s", o.ttl)
	}
	if o.cleanup <= 0 || o.dialTimeout <= 0 {
		return errors.New("--cleanup-timeout and --dial-timeout must be positive")
	}
	if o.statusAddr != "" {
		if _, _, err := net.SplitHostPort(o.statusAddr); err != nil {
			return fmt.Errorf("--status-addr %q: %w", o.statusAddr, err)
		}
	}
	if o.watchRelease && o.report.Member == "" {
		return errors.New("--watch-release watches --member; give it")
	}
	if o.waitStart && o.report.Member == "" {
		return errors.New("--wait-start watches --member; give it")
	}
	return o.report.Validate()
}

func run(cmd *cobra.Command, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	client, err := o.tls.Load()
	if err != nil {
		return err
	}
	o.client = client
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The pause and the member reporter log from their own goroutines.
	logf := session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))

	rep, err := o.report.Reporter(command, logf)
	if err != nil {
		return err
	}
	// watchErr is why the member could not be watched for the release (no rule to read it, or
	// it is gone): the pause then lifts everything at once and fails with it, rather than hold
	// what nobody could release but a SIGTERM.
	var watchErr atomic.Pointer[error]
	if o.watchRelease {
		var release context.CancelFunc
		ctx, release = context.WithCancel(ctx)
		defer release()
		go func() {
			_, err := o.report.WaitSignal(ctx, releaseSignal, logf)
			switch {
			case err == nil:
				logf("Release asked: lifting everything")
			case ctx.Err() != nil:
				return
			default:
				logf("Cannot watch the member for the release (%v): lifting everything", err)
				err = fmt.Errorf("--watch-release: %w", err)
				watchErr.Store(&err)
			}
			release()
		}()
	}
	pub := &publisher{file: o.statusFile, report: rep}
	final, err := o.pause(ctx, cmd, pub, logf)
	// The release cancelled ctx: a pause still starting then ends with ctx's error, which says
	// nothing; the watch's error says why.
	if werr := watchErr.Load(); werr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = *werr
		final.Phase, final.Error = pause.PhaseFailed, err.Error()
		pub.publish(final)
	}
	if err != nil {
		if final.Phase != pause.PhaseFailed {
			// The pause never started: tell the watchers why (file and HTTP too).
			pub.publish(pause.Status{Phase: pause.PhaseFailed, Error: err.Error(), Since: time.Now()})
		}
		rep.Fail(context.WithoutCancel(ctx), err, func(error) any { return pub.status() })
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(final); err != nil {
		return err
	}
	if err := rep.Result(context.WithoutCancel(ctx), final); err != nil {
		return fmt.Errorf("the pause was lifted, but its result could not be reported: %w", err)
	}
	return nil
}

// pause connects to the cluster and runs the pause until ctx ends; it returns the last status.
func (o options) pause(ctx context.Context, cmd *cobra.Command, pub *publisher, logf func(string, ...any)) (pause.Status, error) {
	if o.statusAddr != "" {
		srv, err := pub.serve(o.statusAddr)
		if err != nil {
			return pause.Status{}, err
		}
		defer func() { _ = srv.Close() }()
	}

	// The PD client keeps its own background context; it is closed after the pause is lifted.
	pdCtx := context.WithoutCancel(ctx)
	pc, err := o.client.NewPDClient(pdCtx, o.pd)
	if err != nil {
		return pause.Status{}, fmt.Errorf("connect to PD %v: %w", o.pd, err)
	}
	defer pc.Close()
	hc, err := o.client.NewPDHTTPClient("fedbr-br-pause", session.PDHTTPAddrs(o.pd))
	if err != nil {
		return pause.Status{}, err
	}
	defer hc.Close()

	if o.waitStart {
		logf("Armed: waiting for spec.startPause of member %s", o.report.Member)
		if _, err := o.report.WaitSignal(ctx, startSignal, logf); err != nil {
			return pub.status(), fmt.Errorf("waiting for the go to pause: %w", err)
		}
	}
	// The identity (what the pause places in PD) is in the member's entry before anything is
	// placed: `fedbr br lift` reads it there when this process dies holding.
	record := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, recordTimeout)
		defer cancel()
		return pub.report.Flush(ctx)
	}
	err = pause.Run(ctx, pause.Deps{PD: pc, HTTP: hc, Dial: o.client.DialBackup, Log: logf, Record: record},
		pause.Config{TTL: o.ttl, BackupTS: o.backupTS, CleanupTimeout: o.cleanup, DialTimeout: o.dialTimeout}, pub.publish)
	if err != nil && ctx.Err() == nil {
		// An exit nobody asked for: leave the goroutines for the post-mortem.
		_ = pprof.Lookup("goroutine").WriteTo(cmd.ErrOrStderr(), 1)
	}
	return pub.status(), err
}

// Metrics of the pause, served on --status-addr /metrics. The GC pause window is the number an
// SRE watches: the live cluster keeps MVCC garbage for that long.
var (
	metricPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "fedbr", Subsystem: "br_pause", Name: "phase",
		Help: "1 for the pause's current phase, 0 for the others.",
	}, []string{"phase"})
	metricGCPaused = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fedbr", Subsystem: "br_pause", Name: "gc_paused_seconds",
		Help: "How long GC has been (or, once stopped, was) paused.",
	})
	metricBackupTS = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fedbr", Subsystem: "br_pause", Name: "backup_ts",
		Help: "The backup ts the GC safepoint is pinned at.",
	})
)

// publisher keeps the latest status and publishes it to a file, over HTTP, as metrics and to
// the member's status.steps.
type publisher struct {
	file     string
	report   *report.Reporter
	mu       sync.Mutex
	cur      pause.Status
	last     []byte
	gcPaused time.Time
}

func (p *publisher) publish(s pause.Status) {
	data, _ := json.Marshal(s)
	p.report.Update(string(s.Phase), s)
	p.mu.Lock()
	p.cur, p.last = s, data
	switch {
	case !s.LiftedAt.IsZero():
		metricGCPaused.Set(s.LiftedAt.Sub(s.GCPausedAt).Seconds())
		p.gcPaused = time.Time{}
	case s.Phase == pause.PhaseFailed && !p.gcPaused.IsZero():
		metricGCPaused.Set(s.Since.Sub(p.gcPaused).Seconds()) // lifting failed: the TTL ends it
		p.gcPaused = time.Time{}
	case s.Phase == pause.PhaseGCPaused:
		p.gcPaused = s.GCPausedAt
	}
	p.mu.Unlock()
	for _, ph := range []pause.Phase{pause.PhaseStarting, pause.PhaseGCPaused, pause.PhaseReady, pause.PhaseStopping, pause.PhaseStopped, pause.PhaseFailed} {
		v := 0.0
		if ph == s.Phase {
			v = 1
		}
		metricPhase.WithLabelValues(string(ph)).Set(v)
	}
	metricBackupTS.Set(float64(s.BackupTS))
	if p.file == "" {
		return
	}
	tmp := filepath.Join(filepath.Dir(p.file), "."+filepath.Base(p.file)+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err == nil {
		_ = os.Rename(tmp, p.file)
	}
}

// status is the latest status published.
func (p *publisher) status() pause.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *publisher) serve(addr string) (*http.Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--status-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metricPhase, metricGCPaused, metricBackupTS)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		if !p.gcPaused.IsZero() {
			metricGCPaused.Set(time.Since(p.gcPaused).Seconds())
		}
		p.mu.Unlock()
		p.mu.Lock()
		data := p.last
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return srv, nil
}
