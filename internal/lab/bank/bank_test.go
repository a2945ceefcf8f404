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
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startCluster(t, ctx, 4, pddouble.Config{OperatorRate: 0.1, SplitKeys: 20})
	cl := newClient(t, ctx, c.PDAddr())
	var log bank.Log
	if err := bank.Load(ctx, cl, cfg, &log); err != nil {
		t.Fatal(err)
	}
	loaded, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan bank.Stats, 1)
	go func() { done <- bank.Run(runCtx, cl, cfg, &log, 4, 0, 1) }()
	// One more than the minimum below the ts, so that dropping one still leaves enough.
	if _, err := log.WaitAfter(ctx, 0, bank.MinTransfers+1); err != nil {
		t.Fatal(err)
	}
	ts, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.WaitAfter(ctx, ts, bank.MinTransfers); err != nil {
		t.Fatal(err)
	}
	stop()
	st := <-done
	t.Logf("workload: %+v", st)
	txns := log.Txns()
	n := bank.Count(txns, ts)
	t.Logf("at ts %d: %+v", ts, n)
	if err := bank.Check(ctx, cl, cfg, txns, ts, ts); err != nil {
		t.Fatalf("historical read at %d: %v", ts, err)
	}
	// The checker can fail: claim a transfer at or below the ts is not in the log.
	var dropped []bank.Txn
	for i, x := range txns {
		if x.From >= 0 && !x.Unknown && x.CommitTS <= ts {
			dropped = append(append(dropped, txns[:i]...), txns[i+1:]...)
			break
		}
	}
	if err := bank.Check(ctx, cl, cfg, dropped, ts, ts); !errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("checker missed a dropped transaction: %v", err)
	}
	// Nor can it be fooled by too little data: at a ts between the load and
	// the first transfer, the cluster holds exactly what the log says, and
	// the checker refuses to call that a pass.
	if err := bank.Check(ctx, cl, cfg, txns, loaded, loaded); !errors.Is(err, bank.ErrTooLittleData) || errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("check before the first transfer: %v, want a refusal", err)
	}
	// Nor at a fresh ts, with nothing committed after it.
	now, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Check(ctx, cl, cfg, txns, now, now); !errors.Is(err, bank.ErrTooLittleData) {
		t.Fatalf("check at a fresh ts: %v, want a refusal", err)
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
