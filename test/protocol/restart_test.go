package protocol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// TestStoresRestartedAfterRecoverRegionAreReplanned: TiKV keeps a planned peer leading only in
// memory, and in recovery mode nothing else elects a leader, so a store that restarts after its
// RecoverRegion returned comes back with the regions it was to lead leaderless. One backup
// under `br pause` is restored twice with two such restarts — a leading store when the
// flashback starts, and again one once every region is prepared for it — each store killed and
// started again on its volume (new start timestamp in PD, the same address, as a TiKV pod's DNS
// name). restore-data sees the new start timestamps, sends each its plan again, resumes the
// flashback where it was, and the restore is exact. The negative control turns the re-plan
// off: the flashback then stalls on the leaderless regions and fails with
// restoredata.ErrFlashbackStalled.
func TestStoresRestartedAfterRecoverRegionAreReplanned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	images, ts, txns := stillBackup(t, ctx)
	control := t.TempDir()
	copyImages(t, images, control)

	restarted, err := restoreRestartingLeaders(t, ctx, images, ts, txns, restoredata.Unsafe{})
	if err != nil {
		t.Fatalf("restore with stores restarted after their RecoverRegion: %v", err)
	}
	if len(restarted) != 2 {
		t.Fatalf("restarted %v, want two restarts", restarted)
	}
	_, err = restoreRestartingLeaders(t, ctx, control, ts, txns, restoredata.Unsafe{NoReplan: true})
	if !errors.Is(err, restoredata.ErrFlashbackStalled) {
		t.Fatalf("the same restarts without the re-plan: %v, want restoredata.ErrFlashbackStalled", err)
	}
	t.Logf("without the re-plan: %v", err)
}

// restoreRestartingLeaders restores the images in dir as restoreAndCheck does, restarting the
// store that leads the most regions when restore-data reports FlashingBack and again when every
// region is prepared for flashback, and runs the bank checker. It returns the stores restarted.
func restoreRestartingLeaders(t *testing.T, ctx context.Context, dir string, ts uint64, txns []bank.Txn, u restoredata.Unsafe) ([]uint64, error) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cfg := tidbcluster.Config{Dir: dir, Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}, StickyAddrs: true}
	c, err := tidbcluster.StartRecovering(rctx, cfg, ts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var (
		mu        sync.Mutex
		restarted []uint64
	)
	restart := func() {
		id := mostLeaders(c)
		c.StopStore(id)
		if err := c.StartStore(rctx, id); err != nil {
			t.Errorf("start store %d again: %v", id, err)
		}
		mu.Lock()
		restarted = append(restarted, id)
		mu.Unlock()
		t.Logf("Restarted store %d", id)
	}
	o := labbr.RestoreOptions{ResolvedTS: ts, Unsafe: u, Stores: stores, WaitStoresTimeout: 15 * time.Second,
		Report: func(st restoredata.Status) {
			if st.Phase == restoredata.PhaseFlashingBack {
				restart()
			}
		},
		Log: func(format string, args ...any) {
			t.Logf(format, args...)
			if strings.HasPrefix(format, "%s done") && len(args) > 0 && args[0] == "prepare flashback" {
				restart()
			}
		}}
	if err := labbr.RecoverData(rctx, c.PDAddr(), o); err != nil {
		return restarted, err
	}
	if err := c.Restart(rctx); err != nil {
		return restarted, err
	}
	return restarted, checkRestored(rctx, c, ts, txns)
}

// mostLeaders is the running store that leads the most regions.
func mostLeaders(c *tidbcluster.Cluster) uint64 {
	var best uint64
	most := -1
	for _, id := range c.StoreIDs() {
		n := 0
		for _, r := range c.Store(id).Regions() {
			if r.Leader {
				n++
			}
		}
		if n > most {
			best, most = id, n
		}
	}
	return best
}
