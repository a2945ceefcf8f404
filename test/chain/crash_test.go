package chain

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// TestSIGKILLedStoresLoseNothing runs the bank workload on five `fedbr-lab lab tikv` processes,
// each with its log on a raft volume apart from its data volume and a checkpoint every few
// hundred KiB; kills one store with SIGKILL and restarts it, twice, then kills every store at
// once and tears the tail of each one's log (a write the kill cut short). After the restart
// every transfer the workload saw committed is there: the checker judges at a ts taken after
// the restart, with transfers on both sides of it.
func TestSIGKILLedStoresLoseNothing(t *testing.T) {
	skipShort(t)
	bin := fedbr(t)
	ctx := testContext(t, 3*time.Minute)
	dir := t.TempDir()
	const stores = 5
	raft := map[uint64]string{}
	for id := uint64(1); id <= stores; id++ {
		raft[id] = filepath.Join(dir, fmt.Sprintf("raft-%d", id))
	}
	cfg := bank.Config{Accounts: 40, Initial: 100}
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: dir, Stores: stores, RaftDirs: raft, Binary: bin,
		CompactBytes: 64 << 10, SplitKeys: bank.SplitKeys(cfg.Accounts, 6), Tick: tick, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	w := startWorkload(t, ctx, c, cfg)
	for _, id := range []uint64{2, 4} {
		w.waitCommits(t, ctx, 40)
		c.StopStore(id)
		w.waitCommits(t, ctx, 20) // the others go on without it
		if err := c.StartStore(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	w.waitCommits(t, ctx, bank.MinTransfers)
	for _, id := range c.StoreIDs() {
		c.StopStore(id)
	}
	for id := uint64(1); id <= stores; id++ {
		if err := tikvdouble.TearLogTail(filepath.Join(raft[id], "raft.log")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ts, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.waitAfter(t, ctx, ts)
	w.finish()
	txns := w.log.Txns()
	t.Logf("judging at ts %d: %+v", ts, bank.Count(txns, ts))
	if err := bank.Check(ctx, cl, cfg, txns, ts, ts); err != nil {
		t.Fatalf("after SIGKILLs and torn log tails: %v", err)
	}
}
