package pause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/clients/router"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

// statusLog records every Status a pause reports.
type statusLog struct {
	mu  sync.Mutex
	all []Status
	ch  chan Status
}

func newStatusLog() *statusLog { return &statusLog{ch: make(chan Status, 100)} }

func (l *statusLog) report(s Status) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
	l.ch <- s
}

func (l *statusLog) waitFor(t *testing.T, ctx context.Context, p Phase) Status {
	t.Helper()
	for {
		select {
		case s := <-l.ch:
			if s.Phase == p {
				return s
			}
			if s.Phase == PhaseFailed {
				t.Fatalf("pause failed while waiting for %s: %s", p, s.Error)
			}
		case <-ctx.Done():
			t.Fatalf("no %s status before the deadline", p)
		}
	}
}

func grpcDial(_ context.Context, addr string) (brpb.BackupClient, func() error, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return brpb.NewBackupClient(conn), conn.Close, nil
}

type env struct {
	cluster *tidbcluster.Cluster
	pd      pd.Client
	http    pdhttp.Client
}

func startEnv(t *testing.T, ctx context.Context, tune ...func(*tidbcluster.Config)) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a PD and TiKV double cluster")
	}
	cfg := tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("b"), []byte("k"), []byte("t")}}
	for _, f := range tune {
		f(&cfg)
	}
	cl, err := tidbcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pc, err := pd.NewClientWithContext(ctx, []string{cl.PD.URL()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{cl.PD.URL()})
	t.Cleanup(hc.Close)
	return &env{cluster: cl, pd: pc, http: hc}
}

// minServiceSafePoint is the lowest live service safepoint PD lists (GET /gc/safepoint) other
// than TiDB's GC worker's (gc_worker, always there at the worker's last safe point): the lowest
// pin, or 0 when nothing is pinned.
func (e *env) minServiceSafePoint(t *testing.T, ctx context.Context) uint64 {
	t.Helper()
	sps, err := tidb.Plaintext.ServiceSafePoints(ctx, e.cluster.PD.URL())
	if err != nil {
		t.Fatal(err)
	}
	min := uint64(0)
	for _, s := range sps {
		if s.ServiceID != tidb.GCWorkerService && s.ExpiredAt > time.Now().Unix() && (min == 0 || s.SafePoint < min) {
			min = s.SafePoint
		}
	}
	return min
}

// tso is PD's current timestamp.
func (e *env) tso(t *testing.T, ctx context.Context) uint64 {
	t.Helper()
	physical, logical, err := e.pd.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(physical)<<18 | uint64(logical)
}

func (e *env) pausedSchedulers(t *testing.T, ctx context.Context) []string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.cluster.PD.URL()+"/pd/api/v1/schedulers?status=paused", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var names []string
	if err := json.NewDecoder(resp.Body).Decode(&names); err != nil {
		t.Fatal(err)
	}
	return names
}

func (e *env) deps(t *testing.T) Deps {
	return Deps{PD: e.pd, HTTP: e.http, Dial: grpcDial, Log: t.Logf}
}

// TestPauseHoldsThenLiftsEverything: every piece is in place at Ready, and everything is lifted
// at once when the pause is stopped (not by TTL: the TTL here is far longer than the test).
func TestPauseHoldsThenLiftsEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	before := e.minServiceSafePoint(t, ctx)
	// PD's GET /config/schedule shows no TTL'd value: the limits in force are the double's.
	beforeCfg := e.cluster.PD.EffectiveScheduleConfig()

	runCtx, stop := context.WithCancel(ctx)
	log := newStatusLog()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, e.deps(t), Config{TTL: 10 * time.Minute}, log.report) }()
	ready := log.waitFor(t, ctx, PhaseReady)

	if ready.BackupTS == 0 || ready.Stores != 3 {
		t.Fatalf("ready status %+v: want a backup ts and 3 stores", ready)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp != ready.BackupTS-1 {
		t.Errorf("service safepoint = %d, want backup ts - 1 = %d", sp, ready.BackupTS-1)
	}
	if paused := e.pausedSchedulers(t, ctx); len(paused) == 0 {
		t.Error("no scheduler paused at Ready")
	}
	cfg := e.cluster.PD.EffectiveScheduleConfig()
	for _, k := range []string{"leader-schedule-limit", "region-schedule-limit", "merge-schedule-limit"} {
		if v, ok := cfg[k]; ok && v != float64(0) {
			t.Errorf("%s = %v at Ready, want 0", k, v)
		}
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after a clean stop", err)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp == ready.BackupTS-1 && sp != before {
		t.Errorf("service safepoint still pinned at %d after stop", sp)
	}
	if paused := e.pausedSchedulers(t, ctx); len(paused) != 0 {
		t.Errorf("schedulers %v still paused after stop", paused)
	}
	after := e.cluster.PD.EffectiveScheduleConfig()
	for _, k := range []string{"leader-schedule-limit", "region-schedule-limit", "merge-schedule-limit"} {
		if after[k] != beforeCfg[k] {
			t.Errorf("%s = %v after stop, want the original %v", k, after[k], beforeCfg[k])
		}
	}
	last := log.all[len(log.all)-1]
	if last.Phase != PhaseStopped {
		t.Errorf("last status %s, want Stopped", last.Phase)
	}
	// The GC pause window: pinned no later than Ready, lifted no earlier than the pin.
	if ready.GCPausedAt.IsZero() || !ready.LiftedAt.IsZero() || ready.GCPausedAt.After(ready.Since) {
		t.Errorf("ready status %+v: want gcPausedAt set no later than since, no liftedAt", ready)
	}
	if last.GCPausedAt != ready.GCPausedAt || last.LiftedAt.Before(last.GCPausedAt) {
		t.Errorf("stopped status %+v: want the same gcPausedAt and a liftedAt after it", last)
	}
}

// TestPauseFailsWhenAStoreDies: a TiKV that goes away after readiness breaks its stream; the
// pause reports it (upstream ignored it until shutdown) and lifts the rest.
func TestPauseFailsWhenAStoreDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	log := newStatusLog()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, e.deps(t), Config{TTL: 10 * time.Minute, CleanupTimeout: 10 * time.Second}, log.report)
	}()
	ready := log.waitFor(t, ctx, PhaseReady)

	e.cluster.StopStore(2)
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "store 2") {
		t.Fatalf("Run = %v, want an error naming store 2", err)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp == ready.BackupTS-1 {
		t.Error("service safepoint still pinned after the failure")
	}
	if paused := e.pausedSchedulers(t, ctx); len(paused) != 0 {
		t.Errorf("schedulers %v still paused after the failure", paused)
	}
}

// TestPauseFailsAtOnceOnATiKVWithoutTheLease: a TiKV older than PrepareSnapshotBackup answers
// it Unimplemented; the pause fails with ErrLeaseUnsupported naming the store and its address
// on the first attempt (a retry cannot make that TiKV grow the method), and lifts the GC pin.
func TestPauseFailsAtOnceOnATiKVWithoutTheLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, func(c *tidbcluster.Config) { c.NoLeaseStore = 2 })
	var retries []string
	d := e.deps(t)
	d.Log = func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log(line)
		if strings.Contains(line, "retrying") {
			retries = append(retries, line)
		}
	}
	log := newStatusLog()
	err := Run(ctx, d, Config{TTL: 10 * time.Minute, DialTimeout: time.Hour, CleanupTimeout: 10 * time.Second}, log.report)
	if !errors.Is(err, ErrLeaseUnsupported) || status.Code(err) != codes.Unimplemented {
		t.Fatalf("Run with store 2 lacking PrepareSnapshotBackup = %v, want ErrLeaseUnsupported", err)
	}
	if want := "store 2 at " + e.cluster.Addr(2); !strings.Contains(err.Error(), want) {
		t.Errorf("Run = %v, want it to name %q", err, want)
	}
	if len(retries) != 0 {
		t.Errorf("the pause retried an Unimplemented store: %q", retries)
	}
	sps, err := tidb.Plaintext.ServiceSafePoints(ctx, e.cluster.PD.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range sps {
		if strings.HasPrefix(sp.ServiceID, tidb.PauseServicePrefix) {
			t.Errorf("service safepoint %+v left after the failure", sp)
		}
	}
}

func TestPauseRejectsShortTTL(t *testing.T) {
	err := Run(context.Background(), Deps{}, Config{TTL: time.Second}, func(Status) {})
	if err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("Run = %v", err)
	}
}

// slowDial delays the connection to one address by delay (a TiKV that takes that long to take
// its stream), counting from its first attempt; the others connect at once.
func slowDial(addr string, delay time.Duration) Dialer {
	var once sync.Once
	var until time.Time
	return func(ctx context.Context, a string) (brpb.BackupClient, func() error, error) {
		if a == addr {
			once.Do(func() { until = time.Now().Add(delay) })
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Until(until)):
			}
		}
		return grpcDial(ctx, a)
	}
}

// heldOf reads what PD holds of a pause's identity.
func (e *env) heldOf(t *testing.T, ctx context.Context, h tidb.Hold) tidb.Held {
	t.Helper()
	held, err := tidb.Plaintext.ReadHeldOf(ctx, e.cluster.PD.URL(), h, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// TestPauseKeepsGCWhileAStoreIsSlow: the GC safepoint is refreshed from the moment it is
// pinned, so a store that takes longer than the TTL to take its stream does not let it lapse
// before Ready; and it stays held after.
func TestPauseKeepsGCWhileAStoreIsSlow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	const ttl = 3 * time.Second
	d := e.deps(t)
	d.Dial = slowDial(e.cluster.Addr(2), 3*ttl)
	runCtx, stop := context.WithCancel(ctx)
	log := newStatusLog()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, d, Config{TTL: ttl}, log.report) }()
	ready := log.waitFor(t, ctx, PhaseReady)
	if took := ready.ReadyAt.Sub(ready.GCPausedAt); took < 2*ttl {
		t.Fatalf("ready %s after the pin: the slow store did not outlast the TTL, the test proves nothing", took)
	}
	if held := e.heldOf(t, ctx, ready.Hold); !held.GC {
		t.Fatalf("the GC safepoint lapsed while the slow store connected (held at Ready: %s)", held)
	}
	// Still held through a refresh after Ready: PD's expiry moves past Ready + TTL.
	for {
		sps, err := tidb.Plaintext.ServiceSafePoints(ctx, e.cluster.PD.URL())
		if err != nil {
			t.Fatal(err)
		}
		var exp int64
		for _, s := range sps {
			if s.ServiceID == ready.ServiceSafePoint {
				exp = s.ExpiredAt
			}
		}
		if exp <= time.Now().Unix() {
			t.Fatalf("the GC safepoint lapsed after Ready (expired at %d)", exp)
		}
		if exp > ready.ReadyAt.Add(ttl).Unix()+1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the GC safepoint was not refreshed after Ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after a clean stop", err)
	}
	if held := e.heldOf(t, ctx, ready.Hold); held.Any() {
		t.Errorf("still held after stop: %s", held)
	}
}

// silentTiKV is a Backup server that accepts PrepareSnapshotBackup streams and never answers;
// entered receives one value per stream it accepted.
type silentTiKV struct {
	brpb.UnimplementedBackupServer
	entered chan struct{}
}

func (s *silentTiKV) PrepareSnapshotBackup(stream brpb.Backup_PrepareSnapshotBackupServer) error {
	s.entered <- struct{}{}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func startSilentTiKV(t *testing.T) (string, *silentTiKV) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	silent := &silentTiKV{entered: make(chan struct{}, 100)}
	brpb.RegisterBackupServer(srv, silent)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), silent
}

// redirectDial sends connections to one address to another.
func redirectDial(from, to string) Dialer {
	return func(ctx context.Context, a string) (brpb.BackupClient, func() error, error) {
		if a == from {
			a = to
		}
		return grpcDial(ctx, a)
	}
}

// TestPauseStopsWhileAStoreNeverAnswers: a TiKV that accepts the stream and never answers
// neither keeps the pause past its stop (SIGTERM) nor, with a dial timeout, holds one attempt
// forever; whatever was placed is lifted.
func TestPauseStopsWhileAStoreNeverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dialTimeout time.Duration
		// attempts the silent store must see before the pause is stopped.
		attempts int
	}{
		{"stop", time.Hour, 1},
		{"dial timeout", 500 * time.Millisecond, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			e := startEnv(t, ctx)
			addr, silent := startSilentTiKV(t)
			d := e.deps(t)
			d.Dial = redirectDial(e.cluster.Addr(2), addr)
			runCtx, stop := context.WithCancel(ctx)
			log := newStatusLog()
			done := make(chan error, 1)
			go func() {
				done <- Run(runCtx, d, Config{TTL: 10 * time.Minute, DialTimeout: tc.dialTimeout, CleanupTimeout: 10 * time.Second}, log.report)
			}()
			paused := log.waitFor(t, ctx, PhaseGCPaused)
			for range tc.attempts {
				select {
				case <-silent.entered:
				case <-ctx.Done():
					t.Fatalf("the silent store saw fewer than %d attempts", tc.attempts)
				}
			}
			stop()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "store 2") {
					t.Errorf("Run = %v, want an error naming store 2", err)
				}
			case <-ctx.Done():
				t.Fatal("Run did not end after its stop while a store never answered")
			}
			if held := e.heldOf(t, ctx, paused.Hold); held.Any() {
				t.Errorf("still held after the stop: %s", held)
			}
		})
	}
}

// lateStorePD hides one store from the first store listing, as if it joined just after.
type lateStorePD struct {
	PD
	hidden uint64
	listed atomic.Bool
}

func (p *lateStorePD) GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error) {
	all, err := p.PD.GetAllStores(ctx, opts...)
	if err != nil || p.listed.Swap(true) {
		return all, err
	}
	return slices.DeleteFunc(all, func(s *metapb.Store) bool { return s.GetId() == p.hidden }), nil
}

// TestPauseConnectsToALeaderItHadNoStreamTo: a region led by a store the pause took no lease on
// (it was not listed at the start) gets its wait-apply all the same: the pause connects to that
// store on demand and reaches Ready.
func TestPauseConnectsToALeaderItHadNoStreamTo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	// The store PD names as the leader of the first region.
	var leader uint64
	for leader == 0 {
		regions, err := e.pd.BatchScanRegions(ctx, []router.KeyRange{{}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(regions) > 0 {
			leader = regions[0].Leader.GetStoreId()
		}
		if leader == 0 {
			select {
			case <-ctx.Done():
				t.Fatal("PD names no leader for the first region")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	d := e.deps(t)
	d.PD = &lateStorePD{PD: e.pd, hidden: leader}
	var dialed sync.Map
	d.Dial = func(ctx context.Context, addr string) (brpb.BackupClient, func() error, error) {
		dialed.Store(addr, true)
		return grpcDial(ctx, addr)
	}
	runCtx, stop := context.WithCancel(ctx)
	log := newStatusLog()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, d, Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second}, log.report) }()
	ready := log.waitFor(t, ctx, PhaseReady)
	if ready.Stores != 2 {
		t.Fatalf("ready with %d stores listed, want 2 (store %d hidden)", ready.Stores, leader)
	}
	if _, ok := dialed.Load(e.cluster.Addr(leader)); !ok {
		t.Fatalf("ready without connecting to store %d, which leads the first region", leader)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after a clean stop", err)
	}
}

// barrierDial lets a dial through only once n dials are in flight at the same time; a dial
// whose attempt ends first fails with errDialedAlone and is recorded in alone.
func barrierDial(n int, alone chan<- error) Dialer {
	var mu sync.Mutex
	inFlight := 0
	all := make(chan struct{})
	return func(ctx context.Context, a string) (brpb.BackupClient, func() error, error) {
		mu.Lock()
		if inFlight++; inFlight == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return grpcDial(ctx, a)
		case <-ctx.Done():
			mu.Lock()
			inFlight--
			mu.Unlock()
			err := fmt.Errorf("%w: %s", errDialedAlone, a)
			select {
			case alone <- err:
			default:
			}
			return nil, nil, err
		}
	}
}

var errDialedAlone = errors.New("dialled while not every store was being dialled")

// TestPauseConnectsToEveryStoreAtOnce: the pause takes its leases on every store at the same
// time (the GC pin is already placed, so the window grows with the slowest store, not with their
// sum). The dialer lets no store through until all three are dialled; one store at a time would
// see every attempt end alone.
func TestPauseConnectsToEveryStoreAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	alone := make(chan error, 1)
	d := e.deps(t)
	d.Dial = barrierDial(3, alone)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	log := newStatusLog()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, d, Config{TTL: time.Minute, DialTimeout: 5 * time.Second}, log.report) }()
	for {
		select {
		case err := <-alone:
			t.Fatalf("the stores were connected one at a time: %v", err)
		case s := <-log.ch:
			if s.Phase == PhaseFailed {
				t.Fatalf("pause failed: %s", s.Error)
			}
			if s.Phase != PhaseReady {
				continue
			}
			if s.Stores != 3 {
				t.Fatalf("ready with %d stores, want 3", s.Stores)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run returned %v after a clean stop", err)
			}
			return
		case <-ctx.Done():
			t.Fatal("no Ready before the deadline")
		}
	}
}
