package pddouble

import (
	"context"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/clients/router"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// fakeClock is a settable clock for TTL tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func startPD(t *testing.T, cfg Config) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, err := Start(context.Background(), cfg, lis)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rawClient(t *testing.T, s *Server) pdpb.PDClient {
	t.Helper()
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pdpb.NewPDClient(cc)
}

func region(id uint64, start, end string, ver uint64, stores ...uint64) *metapb.Region {
	r := &metapb.Region{Id: id, StartKey: []byte(start), EndKey: []byte(end), RegionEpoch: &metapb.RegionEpoch{ConfVer: 1, Version: ver}}
	for i, st := range stores {
		r.Peers = append(r.Peers, &metapb.Peer{Id: id*10 + uint64(i), StoreId: st})
	}
	return r
}

// seedCluster bootstraps the cluster the way a TiKV does and reports three
// stores and two regions.
func seedCluster(t *testing.T, ctx context.Context, c pdpb.PDClient, clusterID uint64) {
	t.Helper()
	h := &pdpb.RequestHeader{ClusterId: clusterID}
	r1 := region(2, "", "m", 1, 1, 2, 3)
	resp, err := c.Bootstrap(ctx, &pdpb.BootstrapRequest{Header: h, Store: &metapb.Store{Id: 1, Address: "127.0.0.1:1"}, Region: r1})
	if err != nil || resp.GetHeader().GetError() != nil {
		t.Fatalf("bootstrap: %v %v", err, resp.GetHeader().GetError())
	}
	again, _ := c.Bootstrap(ctx, &pdpb.BootstrapRequest{Header: h})
	if again.GetHeader().GetError().GetType() != pdpb.ErrorType_ALREADY_BOOTSTRAPPED {
		t.Fatalf("second bootstrap: %v", again.GetHeader())
	}
	for id := uint64(1); id <= 3; id++ {
		r, err := c.PutStore(ctx, &pdpb.PutStoreRequest{Header: h, Store: &metapb.Store{Id: id, Address: "127.0.0.1:" + string(rune('0'+id)), StartTimestamp: 100}})
		if err != nil || r.GetHeader().GetError() != nil {
			t.Fatalf("put store: %v %v", err, r.GetHeader().GetError())
		}
		if _, err := c.StoreHeartbeat(ctx, &pdpb.StoreHeartbeatRequest{Header: h, Stats: &pdpb.StoreStats{StoreId: id, StartTime: 200}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReportMinResolvedTS(ctx, &pdpb.ReportMinResolvedTsRequest{Header: h, StoreId: id, MinResolvedTs: 1000 + id}); err != nil {
			t.Fatal(err)
		}
	}
	hb, err := c.RegionHeartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2 := region(3, "m", "", 1, 1, 2, 3)
	for _, r := range []*metapb.Region{r1, r2} {
		if err := hb.Send(&pdpb.RegionHeartbeatRequest{Header: h, Region: r, Leader: r.Peers[1], Term: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := hb.CloseSend(); err != nil {
		t.Fatal(err)
	}
	// Wait until the server processed both heartbeats.
	for range 200 {
		g, err := c.GetRegionByID(ctx, &pdpb.GetRegionByIDRequest{Header: h, RegionId: 3})
		if err == nil && g.GetRegion() != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("region heartbeat never applied")
}

func TestPDClientDrivesGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The GC worker is off: this test drives the safe point by hand (gc_test.go covers the worker).
	s := startPD(t, Config{GCLifeTime: -1})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())

	c, err := pd.NewClientWithContext(ctx, []string{s.URL()}, pd.SecurityOption{})
	if err != nil {
		t.Fatalf("pd client: %v", err)
	}
	defer c.Close()
	if got := c.GetClusterID(ctx); got != s.ClusterID() {
		t.Fatalf("cluster id %d, want %d", got, s.ClusterID())
	}

	stores, err := c.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil || len(stores) != 3 {
		t.Fatalf("GetAllStores = %v, %v", stores, err)
	}
	st, err := c.GetStore(ctx, 2)
	if err != nil || st.GetAddress() != "127.0.0.1:2" || st.GetStartTimestamp() != 200 {
		t.Fatalf("GetStore = %v, %v", st, err)
	}

	var last uint64
	for range 1000 {
		p, l, err := c.GetTS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts := composeTS(p, l)
		if ts <= last {
			t.Fatalf("tso went from %d to %d", last, ts)
		}
		last = ts
	}

	r, err := c.GetRegion(ctx, []byte("a"))
	if err != nil || r.Meta.GetId() != 2 || r.Leader.GetStoreId() != 2 {
		t.Fatalf("GetRegion = %+v, %v", r, err)
	}
	r, err = c.GetPrevRegion(ctx, []byte("x"))
	if err != nil || r.Meta.GetId() != 2 {
		t.Fatalf("GetPrevRegion = %+v, %v", r, err)
	}
	r, err = c.GetRegionByID(ctx, 3)
	if err != nil || string(r.Meta.GetStartKey()) != "m" {
		t.Fatalf("GetRegionByID = %+v, %v", r, err)
	}
	rs, err := c.ScanRegions(ctx, []byte(""), []byte(""), 10) //nolint:staticcheck // the double must still serve the older scan
	if err != nil || len(rs) != 2 {
		t.Fatalf("ScanRegions = %v, %v", rs, err)
	}
	rs, err = c.BatchScanRegions(ctx, []router.KeyRange{{StartKey: []byte("n"), EndKey: []byte("z")}}, 10)
	if err != nil || len(rs) != 1 || rs[0].Meta.GetId() != 3 {
		t.Fatalf("BatchScanRegions = %v, %v", rs, err)
	}

	// A fresh PD's minimum is gc_worker's, created at 0.
	min, err := c.UpdateServiceGCSafePoint(ctx, "br-1", 60, 500)
	if err != nil || min != 0 {
		t.Fatalf("UpdateServiceGCSafePoint = %d, %v; want gc_worker's 0", min, err)
	}
	gc, err := c.UpdateGCSafePoint(ctx, 900)
	if err != nil || gc != 500 {
		t.Fatalf("UpdateGCSafePoint capped by service safe point = %d, %v", gc, err)
	}
	if min, err = c.UpdateServiceGCSafePoint(ctx, "br-1", 0, 0); err != nil || min != 0 {
		t.Fatalf("delete service safe point = %d, %v", min, err)
	}
	if gc, err = c.UpdateGCSafePoint(ctx, 0); err != nil || gc != 500 {
		t.Fatalf("read gc safe point = %d, %v", gc, err)
	}

	h := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	id1, err := raw.AllocID(ctx, &pdpb.AllocIDRequest{Header: h})
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := raw.AllocID(ctx, &pdpb.AllocIDRequest{Header: h})
	if id2.GetId() <= id1.GetId() {
		t.Fatalf("alloc ids %d then %d", id1.GetId(), id2.GetId())
	}
	boot, err := raw.IsBootstrapped(ctx, &pdpb.IsBootstrappedRequest{Header: h})
	if err != nil || !boot.GetBootstrapped() {
		t.Fatalf("IsBootstrapped = %v, %v", boot, err)
	}
	rec, err := raw.IsSnapshotRecovering(ctx, &pdpb.IsSnapshotRecoveringRequest{Header: h})
	if err != nil || rec.GetMarked() {
		t.Fatalf("IsSnapshotRecovering = %v, %v", rec, err)
	}
	gsp, err := raw.GetGCSafePoint(ctx, &pdpb.GetGCSafePointRequest{Header: h})
	if err != nil || gsp.GetSafePoint() != 500 {
		t.Fatalf("GetGCSafePoint = %v, %v", gsp, err)
	}
	bad, err := raw.GetAllStores(ctx, &pdpb.GetAllStoresRequest{Header: &pdpb.RequestHeader{ClusterId: 42}})
	if err != nil || bad.GetHeader().GetError() == nil {
		t.Fatalf("foreign cluster id accepted: %v %v", bad, err)
	}
}

func TestPDHTTPClientDrivesAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := newFakeClock()
	s := startPD(t, Config{Now: clock.Now})
	defer func() { _ = s.Close() }()
	seedCluster(t, ctx, rawClient(t, s), s.ClusterID())

	c := pdhttp.NewClient("test", []string{s.URL()})
	if c == nil {
		t.Fatal("pd http client did not start")
	}
	defer c.Close()

	if v, err := c.GetPDVersion(ctx); err != nil || v != "v8.5.0" {
		t.Fatalf("GetPDVersion = %q, %v", v, err)
	}
	if v, err := c.GetClusterVersion(ctx); err != nil || v != "8.5.0" {
		t.Fatalf("GetClusterVersion = %q, %v", v, err)
	}
	names, err := c.GetSchedulers(ctx)
	if err != nil || len(names) != len(defaultSchedulers) {
		t.Fatalf("GetSchedulers = %v, %v", names, err)
	}
	if err := c.SetSchedulerDelay(ctx, "balance-leader-scheduler", 120); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSchedulerDelay(ctx, "no-such-scheduler", 120); err == nil {
		t.Fatal("pausing an unknown scheduler succeeded")
	}
	if p := s.pausedSchedulers(); len(p) != 1 || p[0] != "balance-leader-scheduler" {
		t.Fatalf("paused = %v", p)
	}

	cfg, err := c.GetScheduleConfig(ctx)
	if err != nil || cfg["merge-schedule-limit"] != 8.0 {
		t.Fatalf("GetScheduleConfig = %v, %v", cfg, err)
	}
	if err := c.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0, "schedule.enable-tikv-split-region": false}, 60); err != nil {
		t.Fatal(err)
	}
	// The TTL'd values apply to scheduling; GET /config/schedule shows the persisted ones.
	if cfg := s.EffectiveScheduleConfig(); cfg["merge-schedule-limit"] != 0.0 || cfg["enable-tikv-split-region"] != false {
		t.Fatalf("TTL config not applied: %v", cfg)
	}
	if cfg, _ = c.GetScheduleConfig(ctx); cfg["merge-schedule-limit"] != 8.0 || cfg["enable-tikv-split-region"] != true {
		t.Fatalf("GET /config/schedule shows TTL'd values: %v", cfg)
	}
	if err := c.SetConfig(ctx, map[string]any{"schedule.no-such-key": 1}, 60); err == nil ||
		!strings.Contains(err.Error(), "unsupported ttl config schedule.no-such-key") {
		t.Fatalf("unknown config key with a TTL: %v, want unsupported ttl config", err)
	}

	min, stores, err := c.GetMinResolvedTSByStoresIDs(ctx, []uint64{2, 3})
	if err != nil || min != 1002 || stores[3] != 1003 {
		t.Fatalf("GetMinResolvedTSByStoresIDs = %d %v %v", min, stores, err)
	}
	if min, _, err = c.GetMinResolvedTSByStoresIDs(ctx, nil); err != nil || min != 1001 {
		t.Fatalf("cluster min resolved ts = %d, %v", min, err)
	}

	err = c.ResetBaseAllocID(ctx, 5000)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("base-alloc-id without the mark: %v", err)
	}
	if err := c.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatalf("mark is not idempotent: %v", err)
	}
	if !s.recovering() {
		t.Fatal("mark not set")
	}
	if err := c.ResetBaseAllocID(ctx, 5000); err != nil {
		t.Fatal(err)
	}
	if id, _ := s.allocID(); id != 5001 {
		t.Fatalf("AllocID after base 5000 = %d", id)
	}
	target := s.currentTS() + 1<<30
	if err := c.ResetTS(ctx, target, true); err != nil {
		t.Fatal(err)
	}
	if cur := s.currentTS(); cur != target {
		t.Fatalf("ts after reset = %d, want %d", cur, target)
	}
	if err := c.ResetTS(ctx, 10, true); err != nil {
		t.Fatalf("force-use-larger with a smaller ts: %v", err)
	}
	if err := c.ResetTS(ctx, 10, false); err == nil {
		t.Fatal("moving the TSO backwards succeeded")
	}
	if cur := s.currentTS(); cur != target {
		t.Fatalf("ts moved backwards to %d", cur)
	}
	if err := c.DeleteSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshotRecoveringMark(ctx); err != nil || s.recovering() {
		t.Fatalf("unmark: %v", err)
	}
}

func TestTTLsExpireOnTheClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := newFakeClock()
	s := startPD(t, Config{Now: clock.Now, GCLifeTime: -1}) // safe points by hand only
	defer func() { _ = s.Close() }()
	seedCluster(t, ctx, rawClient(t, s), s.ClusterID())
	c := pdhttp.NewClient("test", []string{s.URL()})
	defer c.Close()

	if _, err := s.updateServiceSafePoint("br", 10, 700); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSchedulerDelay(ctx, "balance-region-scheduler", 10); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConfig(ctx, map[string]any{"schedule.leader-schedule-limit": 0}, 10); err != nil {
		t.Fatal(err)
	}
	clock.Add(9 * time.Second)
	if gc, _ := s.updateGCSafePoint(900); gc != 700 {
		t.Fatalf("service safe point released early: gc = %d", gc)
	}
	if p := s.pausedSchedulers(); len(p) != 1 {
		t.Fatalf("pause released early: %v", p)
	}
	clock.Add(2 * time.Second)
	if gc, _ := s.updateGCSafePoint(900); gc != 900 {
		t.Fatalf("service safe point did not expire: gc = %d", gc)
	}
	if p := s.pausedSchedulers(); len(p) != 0 {
		t.Fatalf("pause did not expire: %v", p)
	}
	if cfg := s.EffectiveScheduleConfig(); cfg["leader-schedule-limit"] != 4.0 {
		t.Fatalf("TTL config did not revert: %v", cfg)
	}
	// ttlSecond=0 reverts at once.
	_ = c.SetConfig(ctx, map[string]any{"schedule.leader-schedule-limit": 0}, 100)
	if cfg := s.EffectiveScheduleConfig(); cfg["leader-schedule-limit"] != 0.0 {
		t.Fatalf("TTL config not applied: %v", cfg)
	}
	_ = c.SetConfig(ctx, map[string]any{"schedule.leader-schedule-limit": 0}, 0)
	if cfg := s.EffectiveScheduleConfig(); cfg["leader-schedule-limit"] != 4.0 {
		t.Fatalf("ttlSecond=0 did not revert: %v", cfg)
	}
	// A safe point below the minimum (gc_worker's, raised as TiDB's GC worker does) is not stored.
	if _, err := s.updateServiceSafePoint(GCWorkerService, math.MaxInt64, 900); err != nil {
		t.Fatal(err)
	}
	if min, _ := s.updateServiceSafePoint("late", 10, 100); min.SafePoint != 900 || min.ServiceID != GCWorkerService {
		t.Fatalf("stale service safe point accepted: min = %+v", min)
	}
}

func TestRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	clock := newFakeClock()
	s := startPD(t, Config{DataDir: dir, Now: clock.Now, GCLifeTime: -1})
	seedCluster(t, ctx, rawClient(t, s), s.ClusterID())
	id := s.ClusterID()
	var lastTS uint64
	for range 10 {
		ts, err := s.allocTSO(3)
		if err != nil {
			t.Fatal(err)
		}
		lastTS = composeTS(ts.Physical, ts.Logical)
	}
	lastID, _ := s.allocID()
	_ = s.setRecovering(true)
	_, _ = s.updateServiceSafePoint("br", 100, 77)
	// Simulate kill -9: no Close-time flush beyond what was already synced.
	s.grpc.Stop()
	_ = s.http.Close()
	_ = s.lis.Close()

	s2 := startPD(t, Config{DataDir: dir, Now: clock.Now, GCLifeTime: -1})
	defer func() { _ = s2.Close() }()
	if s2.ClusterID() != id {
		t.Fatalf("cluster id changed %d -> %d", id, s2.ClusterID())
	}
	ts, _ := s2.allocTSO(1)
	if composeTS(ts.Physical, ts.Logical) <= lastTS {
		t.Fatalf("tso after restart %d <= %d", composeTS(ts.Physical, ts.Logical), lastTS)
	}
	if next, _ := s2.allocID(); next <= lastID {
		t.Fatalf("alloc id after restart %d <= %d", next, lastID)
	}
	if !s2.recovering() {
		t.Fatal("recovering mark lost")
	}
	if l := s2.gcSafePoints(); !slices.Contains(l.Services, serviceSafePoint{ServiceID: "br", SafePoint: 77, ExpiredAt: clock.Now().Add(100 * time.Second).Unix()}) {
		t.Fatalf("service safe point lost: %+v", l.Services)
	}
	s2.mu.Lock()
	n := len(s2.regions.sorted)
	s2.mu.Unlock()
	if n != 2 {
		t.Fatalf("regions after restart = %d", n)
	}
}

func TestSchedulersHandOutOperatorsOnlyWhenActive(t *testing.T) {
	clock := newFakeClock()
	s := startPD(t, Config{Now: clock.Now, OperatorRate: 1, SplitKeys: 100, MergeKeys: 5})
	defer func() { _ = s.Close() }()
	if err := s.bootstrap(&metapb.Store{Id: 1}, nil); err != nil {
		t.Fatal(err)
	}
	beat := func(r *metapb.Region, keys uint64) *pdpb.RegionHeartbeatResponse {
		t.Helper()
		r.RegionEpoch.Version++
		op, err := s.regionHeartbeat(&regionEntry{Region: r, Leader: r.Peers[0], Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	a := region(10, "", "k", 1, 1, 2, 3)
	b := region(11, "k", "", 1, 1, 2, 3)
	beat(b, 50)
	if op := beat(a, 500); op.GetSplitRegion() == nil {
		t.Fatalf("big region not split: %v", op)
	}
	// Merge, move and leader transfer are tried in a random order.
	for range 50 {
		if op := beat(a, 1); op.GetMerge() != nil {
			t.Fatalf("merge with a big neighbour: %v", op)
		}
	}
	beat(b, 1)
	merged := false
	for range 50 {
		if op := beat(a, 1); op.GetMerge() != nil {
			if op.GetMerge().GetTarget().GetId() != 11 {
				t.Fatalf("merge into the wrong region: %v", op)
			}
			merged = true
		}
	}
	if !merged {
		t.Fatal("small neighbours not merged")
	}
	// A leader keeps its region for leaderSettle after PD first heard of it.
	if op := beat(a, 50); op.GetTransferLeader() != nil {
		t.Fatalf("leader moved right after it was placed: %v", op)
	}
	clock.Add(leaderSettle)
	if op := beat(a, 50); op.GetTransferLeader() == nil {
		t.Fatalf("no leader transfer: %v", op)
	}

	// Pause exactly as BR does.
	for _, n := range defaultSchedulers {
		if err := s.pauseScheduler(n, 30); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.setTTLConfig(map[string]any{
		"schedule.merge-schedule-limit": 0, "schedule.leader-schedule-limit": 0,
		"schedule.region-schedule-limit": 0, "schedule.enable-tikv-split-region": false,
	}, 30); err != nil {
		t.Fatal(err)
	}
	for _, keys := range []uint64{500, 1, 50} {
		if op := beat(a, keys); op != nil {
			t.Fatalf("operator while paused: %v", op)
		}
	}
	clock.Add(31 * time.Second)
	if op := beat(a, 500); op.GetSplitRegion() == nil {
		t.Fatalf("schedulers did not resume after TTL: %v", op)
	}
}

func TestRegionTreeReplacesStaleOverlaps(t *testing.T) {
	tr := newRegionTree()
	tr.put(&regionEntry{Region: region(1, "", "", 1, 1)})
	if !tr.put(&regionEntry{Region: region(2, "", "m", 5, 1)}) {
		t.Fatal("newer region rejected")
	}
	if _, ok := tr.byID[1]; ok {
		t.Fatal("overlapped bootstrap region kept")
	}
	if tr.put(&regionEntry{Region: region(3, "a", "c", 1, 1)}) {
		t.Fatal("stale overlapping region accepted")
	}
	tr.put(&regionEntry{Region: region(4, "m", "", 5, 1)})
	if e := tr.find([]byte("zz")); e == nil || e.Region.GetId() != 4 {
		t.Fatalf("find = %v", e)
	}
	if e := tr.prev([]byte("q")); e == nil || e.Region.GetId() != 2 {
		t.Fatalf("prev = %v", e)
	}
	if got := tr.scan([]byte("b"), []byte("n"), 0); len(got) != 2 {
		t.Fatalf("scan = %d regions", len(got))
	}
}

// BenchmarkTSO measures timestamps per second through the real PD client.
func BenchmarkTSO(b *testing.B) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	s, err := Start(context.Background(), Config{DataDir: b.TempDir()}, lis)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	c, err := pd.NewClientWithContext(context.Background(), []string{s.URL()}, pd.SecurityOption{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.GetTS(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
