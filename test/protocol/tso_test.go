package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// restoreClockLag is how far the restored PD's clock is behind the source's: far more than
// any backup takes, so its TSO is wherever restore-volumes raised it, not its clock.
const restoreClockLag = time.Hour

// TestNegativeControlOfTheTSOReset: the images of a backup under `br pause` hold transfers
// committed after the backup ts, up to each capture. restore-data flashes back with PD's
// TSO as the commit ts, and TiKV asserts that no key of a flashback has a later commit: its
// leader panics otherwise. Restored by a PD whose clock is an hour behind the source's (as
// clock skew between clusters, or a restore right after the backup with PD's TSO ahead of
// its clock, can make it), with the TSO raised as restore-volumes raises it
// (restorevolumes.RecoveryTS of the snapshots' start times: the last capture's start plus
// restorevolumes.CaptureSkew), the restore is exact. The negative control raises it only to
// the resolved ts, as restore-volumes did: the flashback's commit ts is then below the
// images' later commits and a leader crashes with tikvdouble.ErrFlashbackNotLatest.
func TestNegativeControlOfTheTSOReset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l := startLiveWith(t, ctx, pddouble.Config{OperatorRate: -1})
	var started time.Time
	images, ts := pauseCapture(t, ctx, l, pause.Config{TTL: 2 * time.Minute}, func(int, uint64) {
		started = time.Now() // AWS's start time of the snapshot about to be taken
	})
	l.waitAfter(t, ctx, ts)
	txns := l.finish()
	t.Logf("backup ts %d: %+v", ts, bank.Count(txns, ts))
	control := t.TempDir()
	copyImages(t, images, control)

	recoveryTS := restorevolumes.RecoveryTS(ts, []cloud.Snapshot{{Started: started}})
	crash, err := restoreWithTSO(t, ctx, images, ts, recoveryTS, txns)
	if crash != nil || err != nil {
		t.Fatalf("restore with PD's TSO raised to %d (restorevolumes.RecoveryTS): crash %v, restore %v", recoveryTS, crash, err)
	}
	crash, err = restoreWithTSO(t, ctx, control, ts, ts, txns)
	if !errors.Is(crash, tikvdouble.ErrFlashbackNotLatest) {
		t.Fatalf("restore with PD's TSO raised only to the resolved ts: crash %v (restore %v), want tikvdouble.ErrFlashbackNotLatest", crash, err)
	}
	t.Logf("TSO at the resolved ts only: %v", crash)
}

// restoreWithTSO restores the images in dir as restoreAndCheck does, with PD's clock
// restoreClockLag behind and its TSO raised to resetTS. It returns the first store crash
// (which ends the restore at once: the crashed leader's regions have no leader to flash back)
// and the restore's or the checker's error.
func restoreWithTSO(t *testing.T, ctx context.Context, dir string, ts, resetTS uint64, txns []bank.Txn) (error, error) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	lagging := func() time.Time { return time.Now().Add(-restoreClockLag) }
	cfg := tidbcluster.Config{Dir: dir, Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1, Now: lagging}}
	c, err := tidbcluster.StartRecovering(rctx, cfg, resetTS)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var (
		mu    sync.Mutex
		crash error
		wg    sync.WaitGroup
	)
	watch, stop := context.WithCancel(rctx)
	for _, id := range c.StoreIDs() {
		s := c.Store(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-s.Crashed():
				mu.Lock()
				if crash == nil {
					crash = s.CrashError()
				}
				mu.Unlock()
				cancel()
			case <-watch.Done():
			}
		}()
	}
	err = labbr.RecoverData(rctx, c.PDAddr(), labbr.RestoreOptions{ResolvedTS: ts, Log: t.Logf})
	stop()
	wg.Wait()
	if crash != nil || err != nil {
		return crash, err
	}
	if err := c.Restart(rctx); err != nil {
		return nil, err
	}
	return nil, checkRestored(rctx, c, ts, txns)
}
