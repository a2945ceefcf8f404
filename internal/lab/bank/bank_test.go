package bank_test

import (
	"context"
	"errors"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

var cfg = bank.Config{Accounts: 60, Initial: 100}

func startCluster(t *testing.T, ctx context.Context, stores int, pdc pddouble.Config) *tidbcluster.Cluster {
	t.Helper()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{
		Dir: t.TempDir(), Stores: stores, SplitKeys: bank.SplitKeys(cfg.Accounts, 4),
		Tick: 20 * time.Millisecond, PD: pdc, SlowStore: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func newClient(t *testing.T, ctx context.Context, addr string) *bank.Client {
	t.Helper()
	cl, err := bank.NewClient(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestCheckerPassesOnLiveClusterWithBackgroundActivity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c := startCluster(t, ctx, 4, pddouble.Config{OperatorRate: 0.1, SplitKeys: 20})
	cl := newClient(t, ctx, c.PDAddr())
	var log bank.Log
	if err := bank.Load(ctx, cl, cfg, &log); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(ctx, 1500*time.Millisecond)
	st := bank.Run(runCtx, cl, cfg, &log, 4, 0, 1)
	stop()
	t.Logf("workload: %+v", st)
	if st.Committed == 0 {
		t.Fatal("no transfer committed")
	}
	txns := log.Txns()
	now, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Check(ctx, cl, cfg, txns, now, now); err != nil {
		t.Fatalf("live cluster: %v", err)
	}
	mid := txns[len(txns)-st.Committed/2].CommitTS
	if err := bank.Check(ctx, cl, cfg, txns, mid, mid); err != nil {
		t.Fatalf("historical read at %d: %v", mid, err)
	}
	// The checker can fail: claim a later transaction is not in the log.
	if err := bank.Check(ctx, cl, cfg, txns[:len(txns)-1], now, now); !errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("checker missed a dropped transaction: %v", err)
	}
	regions := map[uint64]bool{}
	for _, id := range c.StoreIDs() {
		for _, r := range c.Store(id).Regions() {
			regions[r.Region.GetId()] = true
		}
	}
	t.Logf("regions after run: %d", len(regions))
}

func newPDHTTP(t *testing.T, addr string) pdhttp.Client {
	t.Helper()
	h := pdhttp.NewClient("test", []string{addr})
	t.Cleanup(h.Close)
	return h
}
