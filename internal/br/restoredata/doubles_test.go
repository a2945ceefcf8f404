package restoredata_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

// recovering is a cluster of three TiKV doubles restored the way a restore finds it before its
// data phase: PD marked snapshot-recovering with its TSO past ts, and the stores that were
// started running in recovery mode.
type recovering struct {
	c    *tidbcluster.Cluster
	ts   uint64
	pd   pd.Client
	http pdhttp.Client
}

// startRecovering takes a fresh three-store cluster's volumes, as a backup at ts would, and
// starts them again in recovery mode: the stores in up (nil: all).
func startRecovering(t *testing.T, ctx context.Context, up ...uint64) *recovering {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles")
	}
	cfg := tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("g"), []byte("p")},
		Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}}
	live, err := tidbcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.WaitLeaders(ctx); err != nil {
		live.Close()
		t.Fatal(err)
	}
	lc, err := pd.NewClientWithContext(ctx, []string{live.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		live.Close()
		t.Fatal(err)
	}
	physical, logical, err := lc.GetTS(ctx)
	lc.Close()
	live.Close()
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(physical)<<18 | uint64(logical)

	// The restored cluster: a fresh PD over the same store volumes.
	cfg.StoreDirs = map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		cfg.StoreDirs[id] = live.StoreDir(id)
	}
	cfg.Dir = t.TempDir()
	c, err := tidbcluster.StartPD(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r := &recovering{c: c, ts: ts, http: pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})}
	t.Cleanup(r.http.Close)
	if err := r.http.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.http.ResetTS(ctx, ts, true); err != nil {
		t.Fatal(err)
	}
	if up == nil {
		up = []uint64{1, 2, 3}
	}
	for _, id := range up {
		if err := c.StartStore(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if r.pd, err = pd.NewClientWithContext(ctx, []string{c.PDAddr()}, pd.SecurityOption{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.pd.Close)
	return r
}

func (r *recovering) deps(t *testing.T, report func(restoredata.Status)) restoredata.Deps {
	dial := func(_ context.Context, addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	return restoredata.Deps{PD: r.pd, HTTP: r.http, Dial: dial, Log: t.Logf, Report: report}
}

func (r *recovering) config() restoredata.Config {
	return restoredata.Config{ResolvedTS: r.ts, Stores: 3, Backoff: 100 * time.Millisecond, Poll: 20 * time.Millisecond,
		WaitStoresTimeout: time.Minute}
}

// held reads what PD holds: a service safepoint, paused schedulers, zeroed limits.
func (r *recovering) held(ctx context.Context) (tidb.Held, error) {
	return tidb.Plaintext.ReadHeld(ctx, r.c.PD.URL())
}

// lines collects log lines and tells when one containing a text was logged.
type lines struct {
	t    *testing.T
	mu   sync.Mutex
	all  []string
	wait map[string]chan struct{}
}

func newLines(t *testing.T, waitFor ...string) *lines {
	l := &lines{t: t, wait: map[string]chan struct{}{}}
	for _, w := range waitFor {
		l.wait[w] = make(chan struct{})
	}
	return l
}

func (l *lines) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, line)
	for w, ch := range l.wait {
		if strings.Contains(line, w) {
			close(ch)
			delete(l.wait, w)
		}
	}
}

// TestWaitsForTheWholeClustersStores: restore-data waits, logging its progress, until PD lists
// as many TiKV stores as the backup had; it reads nothing before. Started while one of three
// is still down, it recovers only once the third came up. With the wait bounded and the third
// never coming, it fails with ErrStoresNotUp; told one store may stay down, it goes on with two.
func TestWaitsForTheWholeClustersStores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startRecovering(t, ctx, 1, 2)
	log := newLines(t, "2 of 3 TiKV stores up")
	twoUp := log.wait["2 of 3 TiKV stores up"]
	var storesAtRecovery int
	d := r.deps(t, func(st restoredata.Status) {
		if st.Phase == restoredata.PhaseRecoveringRegions && storesAtRecovery == 0 {
			stores, err := tidb.TiKVStores(ctx, r.pd)
			if err != nil {
				t.Error(err)
			}
			storesAtRecovery = len(stores)
		}
	})
	d.Log = log.logf
	done := make(chan error, 1)
	go func() { _, err := restoredata.Run(ctx, d, r.config()); done <- err }()
	select {
	case <-twoUp:
	case err := <-done:
		t.Fatalf("restore-data ended with 2 of 3 stores up: %v", err)
	}
	if err := r.c.StartStore(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if storesAtRecovery != 3 {
		t.Errorf("regions were recovered with %d stores in PD, want all 3", storesAtRecovery)
	}
	if !strings.Contains(strings.Join(log.all, "\n"), "3 of 3 TiKV stores up") {
		t.Errorf("no progress line for the third store: %q", log.all)
	}
}

func TestGivesUpOnStoresThatDoNotComeUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startRecovering(t, ctx, 1, 2)
	cfg := r.config()
	cfg.WaitStoresTimeout = 300 * time.Millisecond
	_, err := restoredata.Run(ctx, r.deps(t, nil), cfg)
	if !errors.Is(err, restoredata.ErrStoresNotUp) || !strings.Contains(err.Error(), "2 of 3 up") {
		t.Fatalf("Run with 2 of 3 stores and a short wait = %v, want ErrStoresNotUp naming 2 of 3", err)
	}
	if held, err := r.held(ctx); err != nil || held.Any() {
		t.Errorf("PD holds %s (%v) after a phase that never started", held, err)
	}
	// tolerateSingleTiKVOutage: two of three are enough.
	cfg.MaxMissingStores = 1
	if _, err := restoredata.Run(ctx, r.deps(t, nil), cfg); err != nil {
		t.Fatalf("Run with one store tolerated down: %v", err)
	}
}

// TestHoldsGCAndSchedulersOverThePhase: while the regions are recovered and flashed back, PD
// holds a GC service safepoint just below the resolved ts (so every version the flashback reads
// stays) and its schedulers and scheduling limits paused (so no region or leader moves away
// from the plan); both are lifted when the phase ends — completed, failed, or stopped as by
// SIGTERM.
func TestHoldsGCAndSchedulersOverThePhase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startRecovering(t, ctx)
	if held, err := r.held(ctx); err != nil || held.Any() {
		t.Fatalf("PD holds %s (%v) before the phase", held, err)
	}
	// during checks, at a phase, that PD holds both, with the safepoint at resolved ts − 1.
	during := func(phase string, ts uint64, then func()) func(restoredata.Status) {
		seen := false
		return func(st restoredata.Status) {
			if st.Phase != phase || seen {
				return
			}
			seen = true
			held, err := r.held(ctx)
			if err != nil || !held.GC || len(held.Schedulers) == 0 || len(held.ZeroLimits) == 0 {
				t.Errorf("%s: PD holds %+v (%v), want a GC safepoint, paused schedulers and zeroed limits", phase, held, err)
			}
			all, err := tidb.Plaintext.ServiceSafePoints(ctx, r.c.PD.URL())
			var sps []tidb.ServiceSafePoint // PD lists TiDB's GC worker's too
			for _, s := range all {
				if s.ServiceID != tidb.GCWorkerService {
					sps = append(sps, s)
				}
			}
			if err != nil || len(sps) != 1 || sps[0].SafePoint != ts-1 || !strings.HasPrefix(sps[0].ServiceID, tidb.PauseServicePrefix) {
				t.Errorf("%s: service safepoints %+v (%v), want one fedbr- safepoint at %d", phase, sps, err, ts-1)
			}
			if then != nil {
				then()
			}
		}
	}
	lifted := func(what string) {
		t.Helper()
		if held, err := r.held(ctx); err != nil || held.Any() {
			t.Errorf("%s: PD still holds %s (%v)", what, held, err)
		}
	}

	t.Run("completed", func(t *testing.T) {
		if _, err := restoredata.Run(ctx, r.deps(t, during(restoredata.PhaseFlashingBack, r.ts, nil)), r.config()); err != nil {
			t.Fatal(err)
		}
		lifted("after the phase completed")
	})
	t.Run("failed", func(t *testing.T) {
		// A resolved ts above PD's TSO fails the phase after the regions were recovered.
		cfg := r.config()
		cfg.ResolvedTS = r.ts + 1<<40
		_, err := restoredata.Run(ctx, r.deps(t, during(restoredata.PhaseRecoveringRegions, cfg.ResolvedTS, nil)), cfg)
		if err == nil || !strings.Contains(err.Error(), "is not above the resolved ts") {
			t.Fatalf("Run = %v, want the TSO refusal", err)
		}
		lifted("after the phase failed")
	})
	t.Run("invalid TSO", func(t *testing.T) {
		// PD's answer is untrusted input: a TSO that does not fit (negative, or a logical part
		// of more than 18 bits) is refused by name, never shifted into a restore ts.
		for _, bad := range [][2]int64{{-1, 0}, {1, -1}, {1, 1 << 18}} {
			d := r.deps(t, nil)
			d.PD = badTSO{PD: d.PD, physical: bad[0], logical: bad[1]}
			_, err := restoredata.Run(ctx, d, r.config())
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PD answered an invalid TSO (physical %d, logical %d)", bad[0], bad[1])) {
				t.Fatalf("Run with TSO %v = %v, want the invalid TSO refusal", bad, err)
			}
			lifted(fmt.Sprintf("after the TSO %v was refused", bad))
		}
	})
	t.Run("stopped", func(t *testing.T) {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		_, err := restoredata.Run(sctx, r.deps(t, during(restoredata.PhaseRecoveringRegions, r.ts, stop)), r.config())
		if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
			t.Fatalf("Run stopped while recovering = %v, want it canceled", err)
		}
		lifted("after the phase was stopped")
	})
}

// TestFailsWithTheStoresRecoverRegionError: a store that reads its whole plan and then ends
// its RecoverRegion stream with an error at the close fails the step with that store's error,
// named, after the planning attempts; nothing reports the phase done.
func TestFailsWithTheStoresRecoverRegionError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startRecovering(t, ctx)
	for _, id := range r.c.StoreIDs() {
		r.c.Store(id).FailRecoverRegion(status.Error(codes.Internal, "raft engine of store is corrupted"))
	}
	cfg := r.config()
	cfg.Attempts = 2
	_, err := restoredata.Run(ctx, r.deps(t, nil), cfg)
	if err == nil || !strings.Contains(err.Error(), "raft engine of store is corrupted") || !strings.Contains(err.Error(), "recover regions on store") {
		t.Fatalf("Run = %v, want the stores' RecoverRegion error, naming the store", err)
	}
	if held, herr := r.held(ctx); herr != nil || held.Any() {
		t.Errorf("PD still holds %s (%v) after the failed phase", held, herr)
	}
}

// badTSO is a PD whose TSO answer is the one given.
type badTSO struct {
	restoredata.PD
	physical, logical int64
}

func (b badTSO) GetTS(context.Context) (int64, int64, error) { return b.physical, b.logical, nil }
