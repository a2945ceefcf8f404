package tikvdouble_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/import_sstpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	pdhttp "github.com/tikv/pd/client/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// splitKeys returns n-1 keys cutting "key000".."key999" into n ranges.
func splitKeys(n int) [][]byte {
	var out [][]byte
	for i := 1; i < n; i++ {
		out = append(out, []byte(fmt.Sprintf("key%03d", i*40/n)))
	}
	return out
}

func putKeys(t *testing.T, ctx context.Context, cl *bank.Client, n int, val string) uint64 {
	t.Helper()
	kv := map[string]string{}
	for i := range n {
		kv[fmt.Sprintf("key%03d", i)] = val
	}
	return put(t, ctx, cl, kv)
}

func scanAll(t *testing.T, ctx context.Context, cl *bank.Client, ts uint64, n int, val string) {
	t.Helper()
	kvs, err := cl.Scan(ctx, nil, nil, ts)
	if err != nil || len(kvs) != n {
		t.Fatalf("scan at %d: %d keys (want %d), %v", ts, len(kvs), n, err)
	}
	for _, kv := range kvs {
		if string(kv.Value) != val {
			t.Fatalf("%s = %q, want %q", kv.Key, kv.Value, val)
		}
	}
}

func pdRegions(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) *pdhttp.RegionsInfo {
	t.Helper()
	h := pdhttp.NewClient("test", []string{c.PDAddr()})
	defer h.Close()
	rs, err := h.GetRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// localRegions counts distinct initialized regions over every store.
func localRegions(c *tidbcluster.Cluster) int {
	ids := map[uint64]bool{}
	for _, id := range c.StoreIDs() {
		for _, r := range c.Store(id).Regions() {
			ids[r.Region.GetId()] = true
		}
	}
	return len(ids)
}

// TestSchedulersDriveMerges: with PD's merge checker on and regions small,
// neighbours merge (PrepareMerge, CommitMerge, source destroyed) until one
// region is left; PD learns the shape through heartbeats, no key is lost,
// and the merged layout survives a crash of every store.
func TestSchedulersDriveMerges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: splitKeys(5),
		PD: pddouble.Config{OperatorRate: 0.5, MergeKeys: 1000, SplitKeys: 1 << 30}})
	cl := client(t, ctx, c)
	ts := putKeys(t, ctx, cl, 40, "a")
	for localRegions(c) > 1 || len(pdRegions(t, ctx, c).Regions) > 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("regions did not merge: %d local, PD %+v", localRegions(c), pdRegions(t, ctx, c))
		case <-time.After(50 * time.Millisecond):
		}
	}
	r := pdRegions(t, ctx, c).Regions[0]
	if r.StartKey != "" || r.EndKey != "" || r.Epoch.Version < 5 {
		t.Fatalf("merged region %+v: want the whole key space at version >= 5", r)
	}
	for _, id := range c.StoreIDs() {
		for _, rs := range c.Store(id).Regions() {
			if rs.Merging {
				t.Fatalf("store %d still has merging region %v", id, rs.Region)
			}
		}
	}
	scanAll(t, ctx, cl, ts, 40, "a")
	ts = putKeys(t, ctx, cl, 40, "b")
	restartAll(t, ctx, c)
	if n := localRegions(c); n != 1 {
		t.Fatalf("after restart %d regions, want 1 (tombstones replayed)", n)
	}
	scanAll(t, ctx, client(t, ctx, c), ts, 40, "b")
}

// TestBalanceRegionMovesPeers: with four stores and balance-region on,
// replicas move (a peer is added on a new store from a raft snapshot, then
// one is removed, conf_ver growing each time); every region keeps three
// replicas at rest and no data is lost, including on the stores that got
// their replica from a snapshot. Pausing the scheduler stops the moves.
func TestBalanceRegionMovesPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{Stores: 4, SplitKeys: splitKeys(4), CompactBytes: 16 << 10, Tick: 50 * time.Millisecond,
		PD: pddouble.Config{OperatorRate: 0.2, SplitKeys: 1 << 30, ShuffleRegionRate: 0.2}})
	cl := client(t, ctx, c)
	h := pdhttp.NewClient("test", []string{c.PDAddr()})
	defer h.Close()
	// Merges would need equal store sets; keep this test about moves.
	if err := h.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0}); err != nil {
		t.Fatal(err)
	}
	var ts uint64
	for i := range 5 {
		ts = putKeys(t, ctx, cl, 40, fmt.Sprint(i))
	}
	confVer := map[uint64]uint64{}
	for _, r := range pdRegions(t, ctx, c).Regions {
		confVer[uint64(r.ID)] = uint64(r.Epoch.ConfVer)
	}
	moved := 0
	for moved < 3 {
		moved = 0
		for _, r := range pdRegions(t, ctx, c).Regions {
			if uint64(r.Epoch.ConfVer) >= confVer[uint64(r.ID)]+2 {
				moved++
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("peers did not move: %+v", pdRegions(t, ctx, c))
		case <-time.After(50 * time.Millisecond):
		}
	}
	scanAll(t, ctx, cl, ts, 40, "4")

	// Pause balance-region (as BR does) and wait for in-flight moves to end.
	if err := h.SetSchedulerDelay(ctx, "balance-region-scheduler", 300); err != nil {
		t.Fatal(err)
	}
	// Settled means three replicas everywhere and no conf change for a
	// second: a move PD handed out just before the pause may still be on
	// its way to the store.
	var still map[uint64]string
	var settledAt time.Time
	for {
		now := map[uint64]string{}
		done := true
		for _, r := range pdRegions(t, ctx, c).Regions {
			now[uint64(r.ID)] = fmt.Sprint(r.Epoch.ConfVer)
			done = done && len(r.Peers) == 3 && len(r.PendingPeers) == 0
		}
		if !done || fmt.Sprint(now) != fmt.Sprint(still) {
			still, settledAt = now, time.Now()
		} else if time.Since(settledAt) > time.Second {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("moves did not settle after the pause: %+v", pdRegions(t, ctx, c))
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Every replica holds the data: make each store lead in turn by
	// reading through a client after leaders moved (balance-leader is on).
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		scanAll(t, ctx, cl, ts, 40, "4")
	}
	for _, r := range pdRegions(t, ctx, c).Regions {
		if still[uint64(r.ID)] != fmt.Sprint(r.Epoch.ConfVer) {
			t.Fatalf("region %d conf_ver changed while balance-region was paused: %s -> %d", r.ID, still[uint64(r.ID)], r.Epoch.ConfVer)
		}
	}
	// A store's volume holds only the regions it has a replica of.
	for _, id := range c.StoreIDs() {
		if n := len(c.Store(id).Regions()); n > 4 {
			t.Fatalf("store %d holds %d regions of 4", id, n)
		}
	}
}

// TestRecoveryOfAStoreCapturedMidMerge: images taken while a merge is
// prepared but not committed (the source peers are in merging state) are
// restored by BR's data phase: ReadRegionMeta reports the merging source
// with its bumped version, the stores finish the merge themselves once BR
// elected leaders, and every key survives.
func TestRecoveryOfAStoreCapturedMidMerge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{[]byte("key020")},
		PD: pddouble.Config{OperatorRate: 0.5, MergeKeys: 1000, SplitKeys: 1 << 30}})
	h0 := pdhttp.NewClient("test", []string{c.PDAddr()})
	defer h0.Close()
	if err := h0.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0}); err != nil {
		t.Fatal(err)
	}
	cl := client(t, ctx, c)
	ts := putKeys(t, ctx, cl, 40, "a")
	for _, id := range c.StoreIDs() {
		c.Store(id).HoldMerges(time.Hour)
	}
	if err := h0.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 8}); err != nil {
		t.Fatal(err)
	}
	var source uint64
	for source == 0 {
		merging := 0
		for _, id := range c.StoreIDs() {
			for _, r := range c.Store(id).Regions() {
				if r.Merging {
					merging++
					source = r.Region.GetId()
				}
			}
		}
		if merging < 3 {
			source = 0
		}
		select {
		case <-ctx.Done():
			t.Fatal("no merge was prepared")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The source refuses requests while merging.
	route, err := cl.Locate(ctx, []byte("key000"))
	if err != nil {
		t.Fatal(err)
	}
	if route.Region.Meta.GetId() == source {
		resp, err := route.KV.KvGet(ctx, &kvrpcpb.GetRequest{Context: &kvrpcpb.Context{RegionId: source,
			RegionEpoch: route.Region.Meta.GetRegionEpoch(), Peer: route.Region.Leader}, Key: []byte("key000"), Version: ts})
		if err != nil || resp.GetRegionError() == nil {
			t.Fatalf("merging source served a read: %v %v", resp, err)
		}
	}
	images := t.TempDir()
	if err := c.SnapshotAll(images); err != nil {
		t.Fatal(err)
	}

	// Recovery mode: every store reports the merging source.
	rc, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: images, Stores: 3, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := pdhttp.NewClient("test", []string{rc.PDAddr()})
	defer h.Close()
	if err := h.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.ResetTS(ctx, ts, true); err != nil {
		t.Fatal(err)
	}
	if err := rc.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range rc.StoreIDs() {
		metas := readRegionMeta(t, ctx, rc.Store(id).Addr())
		var src *recoverdatapb.RegionMeta
		for _, m := range metas {
			if m.GetRegionId() == source {
				src = m
			}
		}
		if len(metas) != 2 || src == nil || src.GetVersion() < 2 || src.GetTombstone() {
			t.Fatalf("store %d region metas %v: want both regions, source %d merging at version >= 2", id, metas, source)
		}
	}
	if err := labbr.RecoverData(ctx, rc.PDAddr(), labbr.RestoreOptions{ResolvedTS: ts}); err != nil {
		t.Fatal(err)
	}
	restartAll(t, ctx, rc)
	rcl := client(t, ctx, rc)
	now, err := rcl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scanAll(t, ctx, rcl, now, 40, "a")
	for localRegions(rc) != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("the prepared merge never completed after recovery: %d regions", localRegions(rc))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dumpOnFailure logs PD's and every store's view of the regions when t
// fails, which is what a stuck region needs to be understood.
func dumpOnFailure(t *testing.T, c *tidbcluster.Cluster) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h := pdhttp.NewClient("test", []string{c.PDAddr()})
		defer h.Close()
		if rs, err := h.GetRegions(ctx); err == nil {
			for _, r := range rs.Regions {
				t.Logf("PD: %+v", r)
			}
		}
		for _, id := range c.StoreIDs() {
			for _, r := range c.Store(id).Regions() {
				t.Logf("store %d: %v %s term=%d vote=%d leader=%d last=%d commit=%d applied=%d merging=%v", id, r.Region, r.Role, r.Term, r.Vote, r.LeaderID, r.LastIndex, r.Commit, r.Applied, r.Merging)
			}
		}
	})
}

func readRegionMeta(t *testing.T, ctx context.Context, addr string) []*recoverdatapb.RegionMeta {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	st, err := recoverdatapb.NewRecoverDataClient(cc).ReadRegionMeta(ctx, &recoverdatapb.ReadRegionMetaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*recoverdatapb.RegionMeta
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

// TestSuspendImportRPC drives ImportSST.SuspendImportRPC through the
// kvproto client: a suspension reports whether one was already active,
// refuses ingests until it ends, and can be lifted.
func TestSuspendImportRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{PD: pddouble.Config{OperatorRate: -1}})
	cc, err := grpc.NewClient(c.Store(1).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	ic := import_sstpb.NewImportSSTClient(cc)
	suspend := func(on bool, secs uint64) bool {
		t.Helper()
		r, err := ic.SuspendImportRPC(ctx, &import_sstpb.SuspendImportRPCRequest{ShouldSuspendImports: on, DurationInSecs: secs, Caller: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetAlreadySuspended()
	}
	ingestErr := func() *errorpb.Error {
		t.Helper()
		r, err := ic.Ingest(ctx, &import_sstpb.IngestRequest{})
		if err != nil {
			return nil // not suspended: the double has nothing to ingest
		}
		return r.GetError()
	}
	if suspend(true, 60) {
		t.Fatal("first suspension reported an active one")
	}
	if e := ingestErr(); e.GetServerIsBusy() == nil {
		t.Fatalf("ingest while suspended: %v", e)
	}
	if !suspend(true, 60) {
		t.Fatal("renewal did not report the active suspension")
	}
	if !suspend(false, 0) {
		t.Fatal("resume did not report the active suspension")
	}
	if e := ingestErr(); e != nil {
		t.Fatalf("ingest after resume refused: %v", e)
	}
	if suspend(false, 0) {
		t.Fatal("resume of nothing reported a suspension")
	}
}
