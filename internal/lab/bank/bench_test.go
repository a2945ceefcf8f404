package bank_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// BenchmarkBankNineStores prints the bank's throughput on nine stores and
// the on-disk bytes per committed transfer, so e2e tests can size data.
func BenchmarkBankNineStores(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := b.TempDir()
	bc := bank.Config{Accounts: 900, Initial: 100}
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{
		Dir: dir, Stores: 9, SplitKeys: bank.SplitKeys(bc.Accounts, 18), Tick: 50 * time.Millisecond,
		PD: pddouble.Config{OperatorRate: -1},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLeaders(ctx); err != nil {
		b.Fatal(err)
	}
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var log bank.Log
	if err := bank.Load(ctx, cl, bc, &log); err != nil {
		b.Fatal(err)
	}
	before := diskBytes(dir)
	b.ResetTimer()
	var total bank.Stats
	for range b.N {
		runCtx, stop := context.WithTimeout(ctx, 3*time.Second)
		st := bank.Run(runCtx, cl, bc, &log, 16, 0, uint64(b.N))
		stop()
		total.Committed += st.Committed
		total.Conflicts += st.Conflicts
		total.Elapsed += st.Elapsed
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Committed)/total.Elapsed.Seconds(), "txn/s")
	b.ReportMetric(float64(diskBytes(dir)-before)/float64(max(total.Committed, 1)), "disk-bytes/txn")
	b.ReportMetric(float64(total.Conflicts)/float64(max(total.Committed, 1)), "conflicts/txn")
}

func diskBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
