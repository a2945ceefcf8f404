package protocol

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/import_sstpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// TestNegativeControlOfTheLeaseOnIngest: an SST ingest (TiDB Lightning's or BR's restore into
// the source cluster) lands on every replica at once, outside the transactions' ordering, so
// an ingest between two stores' captures leaves the images disagreeing. While `br pause`
// holds, every store holds its PrepareSnapshotBackup lease and TiKV's snapshot-backup observer
// refuses to propose an ingest: each store answers ServerIsBusy with tikvdouble.LeaseRefusal. Without
// the lease (pause.Unsafe.NoLease; GC pinned and PD's schedulers paused as usual) no store
// refuses it.
func TestNegativeControlOfTheLeaseOnIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		unsafe  pause.Unsafe
		refused bool
	}{{"under the pause", pause.Unsafe{}, true}, {"without the lease", pause.Unsafe{NoLease: true}, false}} {
		p, err := labbr.Pause(ctx, c.PDAddr(), pause.Config{TTL: 2 * time.Minute, Unsafe: tc.unsafe}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range c.StoreIDs() {
			reason := ingest(t, ctx, c.Addr(id))
			if refused := reason == tikvdouble.LeaseRefusal; refused != tc.refused {
				t.Errorf("%s: store %d answered an ingest with %q; want refused %v (%q)", tc.name, id, reason, tc.refused, tikvdouble.LeaseRefusal)
			}
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("%s: pause: %v", tc.name, err)
		}
	}
}

// ingest sends the store at addr an (empty) ingest and returns its ServerIsBusy reason, or the
// call's error.
func ingest(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	r, err := import_sstpb.NewImportSSTClient(cc).Ingest(ctx, &import_sstpb.IngestRequest{})
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	return r.GetError().GetServerIsBusy().GetReason()
}
