package chain

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/pause"
	cmdrv "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// TestStoreRestartDuringRestoreData: a TiKV restarting while restore-data sends its recovery
// plan aborts that attempt; restore-data retries from fresh region metas, succeeds, and the
// checker passes.
func TestStoreRestartDuringRestoreData(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, 2*time.Minute)
	const stores = 4
	cfg := bank.Config{Accounts: 40, Initial: 100}
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: stores, SplitKeys: bank.SplitKeys(cfg.Accounts, 4),
		Tick: tick, Binary: fedbr(t), PD: pddouble.Config{OperatorRate: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	w := startWorkload(t, ctx, c, cfg)
	_, h := pdClients(t, c)
	w.waitBefore(t, ctx, h)
	p := startPause(t, ctx, c, pause.Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second})
	st := p.waitReady(t, ctx)
	w.waitCommits(t, ctx, 3)
	images := t.TempDir()
	if err := c.SnapshotAll(images); err != nil {
		t.Fatal(err)
	}
	p.stop()
	if err := p.wait(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	w.waitAfter(t, ctx, st.BackupTS)
	w.finish()
	txns := w.log.Txns()

	dirs := map[uint64]string{}
	for id := uint64(1); id <= stores; id++ {
		dirs[id] = filepath.Join(images, fmt.Sprintf("tikv-%d", id))
	}
	r := startRestoredPD(t, ctx, stores, dirs)
	rpd := cmdrv.PD{Client: r.h}
	if err := rpd.MarkSnapshotRecovering(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rpd.ResetTS(ctx, st.BackupTS); err != nil {
		t.Fatal(err)
	}
	if err := r.c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	planned := make(chan struct{}, 1)
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-planned:
		case <-ctx.Done():
			restarted <- ctx.Err()
			return
		}
		r.c.StopStore(2)
		restarted <- r.c.StartStore(ctx, 2)
	}()
	res, err := r.restoreData(t, ctx, st.BackupTS, func(f string, a ...any) {
		t.Logf(f, a...)
		if strings.HasPrefix(f, "Planned") {
			select {
			case planned <- struct{}{}:
			default:
			}
		}
	})
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restart store 2: %v", rerr)
	}
	if err != nil {
		t.Fatalf("restore-data with store 2 restarting: %v", err)
	}
	t.Logf("restore-data with store 2 restarted during it: %+v", res)
	if err := r.restartAndCheck(t, ctx, cfg, txns, st.BackupTS); err != nil {
		t.Fatalf("bank check: %v", err)
	}
}
