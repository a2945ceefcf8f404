package protocol

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

const stores = 4

var bankCfg = bank.Config{Accounts: 60, Initial: 100}

// liveCluster is a running cluster with the bank workload moving money.
type liveCluster struct {
	c    *tidbcluster.Cluster
	cl   *bank.Client
	log  bank.Log
	stop func()
	wg   sync.WaitGroup
}

func startLive(t *testing.T, ctx context.Context) *liveCluster {
	t.Helper()
	return startLiveWith(t, ctx, pddouble.Config{OperatorRate: 0.2})
}

// startLiveWith is startLive with PD's schedulers tuned by pdc.
func startLiveWith(t *testing.T, ctx context.Context, pdc pddouble.Config) *liveCluster {
	t.Helper()
	return startLiveWithConfig(t, ctx, tidbcluster.Config{PD: pdc})
}

// startLiveWithConfig is startLive on a cluster shaped by cfg; the directory, the store count,
// the split keys, the tick and the slow store are the test's.
func startLiveWithConfig(t *testing.T, ctx context.Context, cfg tidbcluster.Config) *liveCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles with a workload")
	}
	cfg.Dir, cfg.Stores, cfg.SplitKeys, cfg.Tick, cfg.SlowStore = t.TempDir(), stores, bank.SplitKeys(bankCfg.Accounts, 4), 20*time.Millisecond, 3
	c, err := tidbcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l := &liveCluster{c: c, cl: cl}
	// The schedulers rest while the accounts load (a TTL'd override, as BR
	// pauses them), so the load's one big transaction does not race a
	// reshaping cluster on a busy machine; they resume right after.
	h := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	defer h.Close()
	quiet := map[string]any{"schedule.enable-tikv-split-region": false, "schedule.merge-schedule-limit": 0,
		"schedule.region-schedule-limit": 0, "schedule.replica-schedule-limit": 0, "schedule.leader-schedule-limit": 0}
	if err := h.SetConfig(ctx, quiet, 300); err != nil {
		t.Fatal(err)
	}
	if err := bank.Load(ctx, cl, bankCfg, &l.log); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(ctx, quiet, 0); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	l.stop = stop
	l.wg.Add(1)
	go func() { defer l.wg.Done(); bank.Run(rctx, cl, bankCfg, &l.log, 4, 0, 7) }()
	return l
}

// copyImages copies every store's captured volume in src to dst.
func copyImages(t *testing.T, src, dst string) {
	t.Helper()
	for id := 1; id <= stores; id++ {
		name := fmt.Sprintf("tikv-%d", id)
		if err := tidbcluster.CopyVolume(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCommits waits for n more committed transfers.
func (l *liveCluster) waitCommits(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	start := len(l.log.Txns())
	for len(l.log.Txns()) < start+n {
		select {
		case <-ctx.Done():
			t.Fatalf("workload stalled")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitBefore waits until enough transfers are below any backup ts `br pause` reads from now on.
func (l *liveCluster) waitBefore(t *testing.T, ctx context.Context, h pdhttp.Client) {
	t.Helper()
	if err := labbr.WaitTransfersBefore(ctx, &l.log, h); err != nil {
		t.Fatal(err)
	}
}

// waitAfter waits until bank.MinTransfers transfers committed after ts, so that the checker has
// enough above it.
func (l *liveCluster) waitAfter(t *testing.T, ctx context.Context, ts uint64) {
	t.Helper()
	if _, err := l.log.WaitAfter(ctx, ts, bank.MinTransfers); err != nil {
		t.Fatalf("workload after the backup ts: %v", err)
	}
}

func (l *liveCluster) finish() []bank.Txn {
	l.stop()
	l.wg.Wait()
	return l.log.Txns()
}

// restoreAndCheck restores the images in dir the way a restore does — PD marked recovering
// with TSO reset, stores started in recovery mode, `br restore-data` (with the negative controls
// of u), stores restarted — and runs the bank checker at ts.
func restoreAndCheck(t *testing.T, ctx context.Context, dir string, ts uint64, txns []bank.Txn, u restoredata.Unsafe) error {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cfg := tidbcluster.Config{Dir: dir, Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}}
	c, err := labbr.Restore(rctx, cfg, labbr.RestoreOptions{ResolvedTS: ts, Unsafe: u, Log: t.Logf})
	if err != nil {
		return err
	}
	defer c.Close()
	return checkRestored(rctx, c, ts, txns)
}

// checkRestored runs the bank checker at ts on a restored cluster.
func checkRestored(ctx context.Context, c *tidbcluster.Cluster, ts uint64, txns []bank.Txn) error {
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		return err
	}
	defer cl.Close()
	// Long enough to resolve the locks a wrong restore leaves (their primaries tell), so that a
	// negative control ends in the checker's verdict, not in a lock still unresolved.
	cl.LockWait = 5 * time.Second
	now, err := cl.TS(ctx)
	if err != nil {
		return err
	}
	cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
	defer ccancel()
	return bank.Check(cctx, cl, bankCfg, txns, ts, now)
}

// TestPauseThenRestoreDataIsExact: stores captured one after another while transfers go on,
// under `br pause`, restore with `br restore-data` to exactly the transactions at or below the
// backup ts.
func TestPauseThenRestoreDataIsExact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := startLive(t, ctx)
	l.waitCommits(t, ctx, 5)
	pauseCaptureRestore(t, ctx, l, pause.Config{TTL: 2 * time.Minute}, nil)
}

// TestPauseUnderTopologyChurnIsExact is the same backup while PD splits, merges and moves
// replicas and leaders all the time. The pause must freeze the topology (schedulers paused,
// and TiKV refusing conf changes, splits and merges while prepared): without it, a region's
// replicas can outrun the capture order (one peer move between each pair of captures is
// enough: every replica holding the latest data is captured while it holds nothing, and only
// a lagging one is left) and the restore is silently wrong — the double did exactly that
// with three moves between four captures. So the test checks both that the topology churned
// before the pause (else it would prove nothing) and that nothing but leaders moved between
// the first and the last capture.
func TestPauseUnderTopologyChurnIsExact(t *testing.T) {
	churnCaptureRestore(t, pause.Config{TTL: 2 * time.Minute}, nil)
}

// churnCaptureRestore is a backup under `br pause` (cfg) while PD's schedulers reshape the
// cluster all the time (churnPD): it checks that the topology churned before the pause, that
// nothing but leaders moved between the first capture and each later one (the baseline is the
// first shape that holds still: PD learns of a move finished just before the pause from the
// next region heartbeat), and that the restore is exact. between, if set, runs before each
// capture once the baseline is taken.
func churnCaptureRestore(t *testing.T, cfg pause.Config, between func(ctx context.Context, l *liveCluster, i int)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l := startLiveWith(t, ctx, churnPD)
	l.waitCommits(t, ctx, 5)
	h := pdhttp.NewClient("fedbr-test", []string{l.c.PD.URL()})
	defer h.Close()
	before, err := readShape(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the pause: %s", strings.Join(waitTopologyChange(t, ctx, h, before), ","))
	var first shape
	pauseCaptureRestore(t, ctx, l, cfg, func(i int, _ uint64) {
		if i == 0 {
			first = settledShape(t, ctx, h)
		}
		if between != nil {
			between(ctx, l, i)
		}
		if i == 0 {
			return
		}
		now, err := readShape(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes(first, now) {
			if c != "leader-transfer" {
				t.Errorf("%s between the first capture and capture %d: the pause did not freeze the topology", c, i)
			}
		}
	})
}

// settledShape returns PD's region shape once it shows no split, merge or peer move for
// 300 ms; under a pause that must happen at once, so a shape still changing after 10 s fails.
func settledShape(t *testing.T, ctx context.Context, h pdhttp.Client) shape {
	t.Helper()
	prev, err := readShape(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		now, err := readShape(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(changes(prev, now), func(c string) bool { return c != "leader-transfer" }) {
			prev = now
			continue
		}
		return now
	}
	t.Fatal("regions kept splitting, merging or moving for 10s under the pause")
	return nil
}

// pauseCaptureRestore captures under `br pause` (cfg; pauseCapture) and restores the images, which
// must hold exactly the transfers at or below the backup ts.
func pauseCaptureRestore(t *testing.T, ctx context.Context, l *liveCluster, cfg pause.Config, beforeCapture func(i int, ts uint64)) {
	t.Helper()
	images, ts := pauseCapture(t, ctx, l, cfg, beforeCapture)
	l.waitAfter(t, ctx, ts)
	txns := l.finish()
	t.Logf("backup ts %d, %d transactions: %+v", ts, len(txns), bank.Count(txns, ts))
	if err := restoreAndCheck(t, ctx, images, ts, txns, restoredata.Unsafe{}); err != nil {
		t.Fatalf("restore of a paused backup: %v", err)
	}
}

// pauseCapture runs `br pause` (cfg) until Ready, captures every store one after another with
// transfers going on in between (calling beforeCapture, if set, before each with the backup
// ts), lifts the pause, and returns the images and the backup ts.
func pauseCapture(t *testing.T, ctx context.Context, l *liveCluster, cfg pause.Config, beforeCapture func(i int, ts uint64)) (string, uint64) {
	t.Helper()
	h := pdhttp.NewClient("fedbr-test", []string{l.c.PD.URL()})
	defer h.Close()
	l.waitBefore(t, ctx, h)
	p, err := labbr.Pause(ctx, l.c.PDAddr(), cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	images := t.TempDir()
	for i, id := range l.c.StoreIDs() {
		l.waitCommits(t, ctx, 2) // transfers go on between captures
		if beforeCapture != nil {
			beforeCapture(i, p.BackupTS)
		}
		if err := l.c.SnapshotStore(id, images); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	return images, p.BackupTS
}

// TestStaggeredCaptureWithoutPauseIsCaught is the negative control: the same capture without
// `br pause`, and the ts a naive tool reads once the captures are done, fails the checker
// through the very same restore-data, in every run. The ts is PD's min resolved ts once it
// passed a transfer whose commit ts is above a ts read after the last capture: that transfer
// committed after every capture, so no image holds it, and the restore flashed back to a ts
// that includes it lacks it.
func TestStaggeredCaptureWithoutPauseIsCaught(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l := startLive(t, ctx)
	h := pdhttp.NewClient("fedbr-test", []string{l.c.PD.URL()})
	defer h.Close()
	l.waitBefore(t, ctx, h)
	const runs = 3
	type capture struct {
		dir string
		ts  uint64
	}
	var captures []capture
	for range runs {
		dir := t.TempDir()
		for _, id := range l.c.StoreIDs() {
			if err := l.c.SnapshotStore(id, dir); err != nil {
				t.Fatal(err)
			}
			l.waitCommits(t, ctx, 3)
		}
		// The naive tool's ts, past a transfer committed after every capture.
		ts, err := labbr.TSAfterCaptures(ctx, l.cl, &l.log, h)
		if err != nil {
			t.Fatal(err)
		}
		captures = append(captures, capture{dir, ts})
	}
	l.waitAfter(t, ctx, captures[len(captures)-1].ts)
	txns := l.finish()
	caught := 0
	for i, c := range captures {
		err := restoreAndCheck(t, ctx, c.dir, c.ts, txns, restoredata.Unsafe{})
		t.Logf("run %d: %v", i, err)
		// Only the checker's verdict counts: a refusal or a failed restore is no detection.
		if errors.Is(err, bank.ErrMismatch) {
			caught++
		}
	}
	if caught < runs {
		t.Fatalf("staggered captures without the pause caught in %d of %d runs", caught, runs)
	}
}
