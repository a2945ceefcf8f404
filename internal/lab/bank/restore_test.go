package bank_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

// workload runs the bank in the background until stop is called.
type workload struct {
	log   bank.Log
	stop  func()
	wg    sync.WaitGroup
	stats bank.Stats
}

func startWorkload(t *testing.T, ctx context.Context, cl *bank.Client) *workload {
	t.Helper()
	w := &workload{}
	if err := bank.Load(ctx, cl, cfg, &w.log); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	w.stop = stop
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.stats = bank.Run(rctx, cl, cfg, &w.log, 4, 0, 7) }()
	return w
}

// waitCommits waits until n more transfers committed and returns the
// highest commit ts so far.
func (w *workload) waitCommits(t *testing.T, ctx context.Context, n int) uint64 {
	t.Helper()
	start := len(w.log.Txns())
	for {
		txns := w.log.Txns()
		if len(txns) >= start+n {
			return txns[len(txns)-1].CommitTS
		}
		select {
		case <-ctx.Done():
			t.Fatalf("workload stalled: %d of %d transfers", len(txns)-start, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitBefore waits until enough transfers are below any backup ts read from now on.
func (w *workload) waitBefore(t *testing.T, ctx context.Context, h pdhttp.Client) {
	t.Helper()
	if err := labbr.WaitTransfersBefore(ctx, &w.log, h); err != nil {
		t.Fatal(err)
	}
}

// waitAfter waits until bank.MinTransfers transfers committed after ts, so
// that the checker has enough above it.
func (w *workload) waitAfter(t *testing.T, ctx context.Context, ts uint64) {
	t.Helper()
	if _, err := w.log.WaitAfter(ctx, ts, bank.MinTransfers); err != nil {
		t.Fatalf("workload after the backup ts: %v", err)
	}
}

// waitResolved waits until PD's min resolved ts reaches ts and returns it.
func waitResolved(t *testing.T, ctx context.Context, h pdhttp.Client, ts uint64) uint64 {
	t.Helper()
	r, err := labbr.WaitResolved(ctx, h, ts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *workload) finish() []bank.Txn {
	w.stop()
	w.wg.Wait()
	return w.log.Txns()
}

// restoredConfig is a cluster on the restored images in dir: PD schedules nothing, so what
// the restore leaves is what gets checked.
func restoredConfig(dir string, stores int) tidbcluster.Config {
	return tidbcluster.Config{Dir: dir, Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}}
}

// restoreAndCheck restores the images in dir and runs the checker at ts.
func restoreAndCheck(t *testing.T, ctx context.Context, dir string, stores int, o labbr.RestoreOptions, txns []bank.Txn) error {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	c, err := labbr.Restore(rctx, restoredConfig(dir, stores), o)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer c.Close()
	return checkRestored(t, rctx, c, o.ResolvedTS, txns)
}

// checkRestored runs the checker on a restored cluster at ts.
func checkRestored(t *testing.T, ctx context.Context, c *tidbcluster.Cluster, ts uint64, txns []bank.Txn) error {
	t.Helper()
	cl := newClient(t, ctx, c.PDAddr())
	// Long enough to resolve the locks a wrong restore leaves (their primaries tell), so that a
	// negative control ends in the checker's verdict, not in a lock still unresolved.
	cl.LockWait = 5 * time.Second
	now, err := cl.TS(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return bank.Check(cctx, cl, cfg, txns, ts, now)
}

// detected reports whether a negative control failed the check: the
// checker's verdict that the restored state is not the one the log allows.
// A refusal (bank.ErrTooLittleData) or any other error is no detection.
func detected(err error) bool {
	return errors.Is(err, bank.ErrMismatch)
}

func copyImages(t *testing.T, src, dst string, stores int) {
	t.Helper()
	for id := 1; id <= stores; id++ {
		name := fmt.Sprintf("tikv-%d", id)
		if err := tidbcluster.CopyVolume(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupWithProtocolRestoresExactly takes per-store snapshots at
// different instants under the full protocol (schedulers paused, lease,
// wait-apply, resolved ts) while transfers keep running. The restore with
// flashback passes the checker; the same images restored without
// flashback fail it (negative control).
func TestBackupWithProtocolRestoresExactly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const stores = 4
	c := startCluster(t, ctx, stores, pddouble.Config{OperatorRate: 0.2})
	cl := newClient(t, ctx, c.PDAddr())
	w := startWorkload(t, ctx, cl)
	w.waitBefore(t, ctx, newPDHTTP(t, c.PDAddr()))

	p, err := labbr.Pause(ctx, c.PDAddr(), pause.Config{TTL: 30 * time.Second}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	resolved := p.BackupTS
	images := t.TempDir()
	for _, id := range c.StoreIDs() {
		w.waitCommits(t, ctx, 2) // transfers go on between captures
		if err := c.SnapshotStore(id, images); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	w.waitAfter(t, ctx, resolved)
	txns := w.finish()
	t.Logf("workload %+v, resolved ts %d: %+v", w.stats, resolved, bank.Count(txns, resolved))

	second, third := t.TempDir(), t.TempDir()
	copyImages(t, images, second, stores)
	copyImages(t, images, third, stores)
	if err := restoreAndCheck(t, ctx, images, stores, labbr.RestoreOptions{ResolvedTS: resolved}, txns); err != nil {
		t.Fatalf("restore with the protocol: %v", err)
	}
	if err := restoreAndCheck(t, ctx, third, stores, labbr.RestoreOptions{ResolvedTS: resolved, ResolveKV: true}, txns); err != nil {
		t.Fatalf("restore with ResolveKvData (v6.3 data phase): %v", err)
	}
	err = restoreAndCheck(t, ctx, second, stores, labbr.RestoreOptions{ResolvedTS: resolved, Unsafe: restoredata.Unsafe{NoFlashback: true}}, txns)
	if !detected(err) {
		t.Fatalf("restore without flashback was not detected: %v", err)
	}
	t.Logf("without flashback: %v", err)
}

// TestStaggeredSnapshotsWithoutProtocolAreDetected is the negative control
// for the pause/prepare protocol: per-store snapshots at different instants
// with nothing paused, and the backup ts read once they are done (nothing
// held it back). The checker must fail in every run: the ts is PD's min
// resolved ts once it passed a transfer whose commit ts is above a ts read
// after the last snapshot, which no image holds.
func TestStaggeredSnapshotsWithoutProtocolAreDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const stores, runs = 4, 3
	c := startCluster(t, ctx, stores, pddouble.Config{OperatorRate: 0.2})
	cl := newClient(t, ctx, c.PDAddr())
	h := newPDHTTP(t, c.PDAddr())
	w := startWorkload(t, ctx, cl)
	w.waitBefore(t, ctx, h)
	type backup struct {
		dir      string
		resolved uint64
	}
	var backups []backup
	for range runs {
		dir := t.TempDir()
		for _, id := range c.StoreIDs() {
			if err := c.SnapshotStore(id, dir); err != nil {
				t.Fatal(err)
			}
			w.waitCommits(t, ctx, 3)
		}
		// Nothing held the cluster: the ts a naive tool reads once the
		// snapshots are done is past a transfer committed after all of them.
		ts, err := labbr.TSAfterCaptures(ctx, cl, &w.log, h)
		if err != nil {
			t.Fatal(err)
		}
		backups = append(backups, backup{dir, ts})
	}
	w.waitAfter(t, ctx, backups[len(backups)-1].resolved)
	txns := w.finish()
	caught := 0
	for i, b := range backups {
		err := restoreAndCheck(t, ctx, b.dir, stores, labbr.RestoreOptions{ResolvedTS: b.resolved}, txns)
		t.Logf("run %d: %v", i, err)
		if detected(err) {
			caught++
		}
	}
	if caught < runs {
		t.Fatalf("staggered snapshots detected in %d of %d runs", caught, runs)
	}
}

// TestWrongLeaderChoiceIsDetected is the negative control for BR's leader
// election: one store is cut off while transfers go on, so its peers' logs
// fall behind; images are taken at one instant. Electing the most advanced
// peer restores exactly. Asking the least advanced one to lead cannot lose
// committed transfers: as in TiKV, RecoverRegion only campaigns, and raft's
// voters refuse a candidate whose log is behind theirs, so those regions
// never get a leader and the restore does not complete.
func TestWrongLeaderChoiceIsDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const stores = 4
	images, resolved, txns := staleStoreImages(t, ctx, stores, 2)
	second := t.TempDir()
	copyImages(t, images, second, stores)
	if err := restoreAndCheck(t, ctx, images, stores, labbr.RestoreOptions{ResolvedTS: resolved}, txns); err != nil {
		t.Fatalf("restore electing the best peers: %v", err)
	}
	// Raft's vote rule, not timing, keeps the stale peers from winning: the
	// leader timeout only bounds how long restore-data watches them lose.
	_, err := labbr.Restore(ctx, restoredConfig(second, stores), labbr.RestoreOptions{ResolvedTS: resolved,
		Unsafe: restoredata.Unsafe{WorstLeaders: true}, LeaderTimeout: 3 * time.Second, Attempts: 2})
	if !errors.Is(err, restoredata.ErrLeadersNotElected) {
		t.Fatalf("asking the least advanced peers to lead did not stall the restore: %v", err)
	}
	t.Logf("worst leaders: %v", err)
}

// staleStoreImages runs the bank on a cluster with one store cut off while
// transfers go on, so its peers' logs fall behind, and takes every store's
// image at one instant. It returns the images, the backup ts and the
// transfers.
func staleStoreImages(t *testing.T, ctx context.Context, stores int, stale uint64) (string, uint64, []bank.Txn) {
	t.Helper()
	c := startCluster(t, ctx, stores, pddouble.Config{OperatorRate: -1})
	cl := newClient(t, ctx, c.PDAddr())
	h := newPDHTTP(t, c.PDAddr())
	w := startWorkload(t, ctx, cl)
	w.waitBefore(t, ctx, h)
	c.Store(stale).Isolate(time.Hour)
	last := w.waitCommits(t, ctx, 20)
	resolved := waitResolved(t, ctx, h, last)
	images := t.TempDir()
	if err := c.SnapshotAll(images); err != nil {
		t.Fatal(err)
	}
	w.waitAfter(t, ctx, resolved)
	txns := w.finish()
	t.Logf("workload %+v; at the backup ts %d: %+v", w.stats, resolved, bank.Count(txns, resolved))
	return images, resolved, txns
}
