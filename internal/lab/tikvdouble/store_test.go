package tikvdouble_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

func startCluster(t *testing.T, ctx context.Context, cfg tidbcluster.Config) *tidbcluster.Cluster {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Stores == 0 {
		cfg.Stores = 3
	}
	if cfg.Tick == 0 {
		cfg.Tick = 20 * time.Millisecond
	}
	c, err := tidbcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dumpOnFailure(t, c)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// restartAll crashes every store at once, starts them again and waits for every leader.
func restartAll(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) {
	t.Helper()
	for _, id := range c.StoreIDs() {
		c.StopStore(id)
	}
	if err := c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
}

func client(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) *bank.Client {
	t.Helper()
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func put(t *testing.T, ctx context.Context, cl *bank.Client, kv map[string]string) uint64 {
	t.Helper()
	start, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	puts := map[string][]byte{}
	for k, v := range kv {
		puts[k] = []byte(v)
	}
	ts, err := cl.Commit(ctx, start, puts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestTransactionsAcrossRegions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{[]byte("k3"), []byte("k6")}, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	ts1 := put(t, ctx, cl, map[string]string{"k1": "a", "k5": "b", "k9": "c"})
	ts2 := put(t, ctx, cl, map[string]string{"k1": "A", "k9": "C"})
	for _, tc := range []struct {
		key  string
		ts   uint64
		want string
	}{{"k1", ts1, "a"}, {"k1", ts2, "A"}, {"k5", ts2, "b"}, {"k9", ts1, "c"}, {"k9", ts2, "C"}, {"k0", ts2, ""}} {
		got, err := cl.Get(ctx, []byte(tc.key), tc.ts)
		if err != nil || string(got) != tc.want {
			t.Errorf("get %s@%d = %q, %v; want %q", tc.key, tc.ts, got, err, tc.want)
		}
	}
	kvs, err := cl.Scan(ctx, nil, nil, ts2)
	if err != nil || len(kvs) != 3 {
		t.Fatalf("scan = %v, %v", kvs, err)
	}
	// A write conflict: a transaction that started before ts2 cannot overwrite k1.
	if _, err := cl.Commit(ctx, ts1+1, map[string][]byte{"k1": []byte("x")}); err == nil {
		t.Fatal("stale transaction committed")
	}
	if got, _ := cl.Get(ctx, []byte("k1"), ^uint64(0)>>2); string(got) != "A" {
		t.Fatalf("after conflict k1 = %q", got)
	}
}

// TestCrashRestartLeavesDivergentPeers kills every store under load (a
// store keeps nothing unflushed, so Close is kill -9) and restarts them:
// the replayed peers of one region disagree on applied index the way real
// replicas do (store 3 applies slowly), and no committed write is lost.
func TestCrashRestartLeavesDivergentPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{Tick: 30 * time.Millisecond, SlowStore: 3, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	var last uint64
	for i := range 30 {
		last = put(t, ctx, cl, map[string]string{fmt.Sprint("k", i%7): fmt.Sprint(i)})
	}
	started := map[uint64]int64{}
	for _, id := range c.StoreIDs() {
		st, err := cl.PD().GetStore(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		started[id] = st.GetStartTimestamp()
	}
	// Crash all stores at once while the slow follower is behind.
	for _, id := range c.StoreIDs() {
		c.StopStore(id)
	}
	if err := c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	for id, before := range started {
		st, err := cl.PD().GetStore(ctx, id)
		if err != nil || st.GetStartTimestamp() <= before {
			t.Fatalf("store %d start timestamp %d -> %v, %v: BR's reboot watcher would miss the restart", id, before, st.GetStartTimestamp(), err)
		}
	}
	applied := map[uint64]map[uint64]uint64{} // region -> store -> applied
	for _, id := range c.StoreIDs() {
		for _, r := range c.Store(id).Regions() {
			if applied[r.Region.GetId()] == nil {
				applied[r.Region.GetId()] = map[uint64]uint64{}
			}
			applied[r.Region.GetId()][id] = r.Applied
		}
	}
	diverged := false
	for _, byStore := range applied {
		for _, a := range byStore {
			diverged = diverged || a != byStore[1]
		}
	}
	if !diverged {
		t.Fatalf("replayed peers agree everywhere: %v", applied)
	}
	t.Logf("applied index per region per store after restart: %v", applied)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	cl2 := client(t, ctx, c)
	for i := 23; i < 30; i++ {
		got, err := cl2.Get(ctx, []byte(fmt.Sprint("k", i%7)), last)
		if err != nil || string(got) != fmt.Sprint(i) {
			t.Fatalf("k%d after restart = %q, %v; want %d", i%7, got, err, i)
		}
	}
}

// TestPrepareSnapshotBackupLease drives backup.Backup/PrepareSnapshotBackup
// with the kvproto client: lease results, per-region wait-apply with epoch
// checks, admin operators refused while the lease holds, Finish, and the
// FAILED_PRECONDITION of a wait-apply without a lease.
func TestPrepareSnapshotBackupLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{[]byte("m")}, PD: pddouble.Config{OperatorRate: 1, SplitKeys: 1 << 30}})
	cl := client(t, ctx, c)
	put(t, ctx, cl, map[string]string{"a": "1", "z": "2"})

	route, err := cl.Locate(ctx, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	r := *route.Region
	// The client's route has raw boundaries; BR sends PD's region, whose boundaries are encoded.
	r.Meta = proto.Clone(r.Meta).(*metapb.Region)
	r.Meta.StartKey, r.Meta.EndKey = codec.EncodeBoundary(r.Meta.GetStartKey()), codec.EncodeBoundary(r.Meta.GetEndKey())
	st := c.Store(r.Leader.GetStoreId())
	cc, err := grpc.NewClient(st.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	bc := brpb.NewBackupClient(cc)
	stream, err := bc.PrepareSnapshotBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease := func() bool {
		t.Helper()
		if err := stream.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: 60}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil || resp.GetTy() != brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult {
			t.Fatalf("lease: %v %v", resp, err)
		}
		return resp.GetLastLeaseIsValid()
	}
	if lease() {
		t.Fatal("fresh store reported a valid previous lease")
	}
	if !lease() {
		t.Fatal("renewal reported the lease invalid")
	}
	before := st.RejectedAdmin()
	epochs := ledBy(regionEpochs(c), st.ID())

	wrong := proto.Clone(r.Meta).(*metapb.Region)
	wrong.RegionEpoch.Version++
	for _, reg := range []*metapb.Region{r.Meta, wrong} {
		if err := stream.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_WaitApply, Regions: []*metapb.Region{reg}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]*brpb.PrepareSnapshotBackupResponse{}
	for range 2 {
		resp, err := stream.Recv()
		if err != nil || resp.GetTy() != brpb.PrepareSnapshotBackupEventType_WaitApplyDone {
			t.Fatalf("wait apply: %v %v", resp, err)
		}
		got[resp.GetRegion().GetRegionEpoch().GetVersion()] = resp
	}
	if e := got[r.Meta.GetRegionEpoch().GetVersion()].GetError(); e != nil {
		t.Fatalf("wait apply with the right epoch: %v", e)
	}
	if got[wrong.GetRegionEpoch().GetVersion()].GetError().GetEpochNotMatch() == nil {
		t.Fatalf("wait apply with a stale epoch: %v", got[wrong.GetRegionEpoch().GetVersion()])
	}

	// PD keeps handing out leader transfers; the lease refuses them.
	for st.RejectedAdmin() == before {
		select {
		case <-ctx.Done():
			t.Fatal("no operator was refused under the lease")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Leaders may move onto the leased store (others are not leased), but
	// none of its own leaders may move or split.
	now := regionEpochs(c)
	for id, v := range epochs {
		if now[id] != v {
			t.Fatalf("region %d changed under the lease: %s -> %s", id, v, now[id])
		}
	}

	// CheckPendingAdminOp answers once per leader region of the store.
	ca, err := bc.CheckPendingAdminOp(ctx, &brpb.CheckAdminRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		r, err := ca.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || r.GetHasPendingAdmin() {
			t.Fatalf("check pending admin: %v %v", r, err)
		}
		n++
	}
	if n < len(epochs) {
		t.Fatalf("check pending admin answered for %d regions, store leads %d", n, len(epochs))
	}

	if err := stream.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || !resp.GetLastLeaseIsValid() {
		t.Fatalf("finish: %v %v", resp, err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream not closed after finish: %v", err)
	}

	s2, err := bc.PrepareSnapshotBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_WaitApply, Regions: []*metapb.Region{r.Meta}})
	if _, err := s2.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("wait apply without a lease: %v", err)
	}
}

// regionEpochs maps region id to "version/leader store" as PD would see it.
func regionEpochs(c *tidbcluster.Cluster) map[uint64]string {
	out := map[uint64]string{}
	for _, id := range c.StoreIDs() {
		for _, r := range c.Store(id).Regions() {
			if r.Leader {
				out[r.Region.GetId()] = fmt.Sprintf("v%d@%d", r.Region.GetRegionEpoch().GetVersion(), id)
			}
		}
	}
	return out
}

// ledBy keeps the regions led by store id (the lease is per store).
func ledBy(epochs map[uint64]string, id uint64) map[uint64]string {
	out := map[uint64]string{}
	for r, v := range epochs {
		if strings.HasSuffix(v, fmt.Sprintf("@%d", id)) {
			out[r] = v
		}
	}
	return out
}

// TestSchedulersDriveSplitsAndLeaderMoves checks the background activity:
// with PD's schedulers active, regions split and leaders move.
func TestSchedulersDriveSplitsAndLeaderMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{PD: pddouble.Config{OperatorRate: 0.5, SplitKeys: 6}, CompactBytes: 8 << 10})
	cl := client(t, ctx, c)
	kv := map[string]string{}
	for i := range 40 {
		kv[fmt.Sprintf("key%03d", i)] = "v"
	}
	ts := put(t, ctx, cl, kv)
	first := regionEpochs(c)
	moved := false
	for len(regionEpochs(c)) < 4 || !moved {
		now := regionEpochs(c)
		for id, v := range first {
			if w, ok := now[id]; ok && w != v {
				moved = true
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no background activity: %v -> %v", first, now)
		case <-time.After(20 * time.Millisecond):
		}
	}
	kvs, err := cl.Scan(ctx, nil, nil, ts)
	if err != nil || len(kvs) != 40 {
		t.Fatalf("scan after splits: %d keys, %v", len(kvs), err)
	}
	// Splits, leader moves and compactions all replay after a crash.
	ts = put(t, ctx, cl, map[string]string{"key000": "w", "key039": "w"})
	restartAll(t, ctx, c)
	cl2 := client(t, ctx, c)
	kvs, err = cl2.Scan(ctx, nil, nil, ts)
	if err != nil || len(kvs) != 40 || string(kvs[0].Value) != "w" || string(kvs[39].Value) != "w" {
		t.Fatalf("scan after restart: %d keys, %v", len(kvs), err)
	}
}

// TestCompactionKeepsStateAcrossRestart compacts the wal many times under
// writes, then restarts every store from its compacted volume.
func TestCompactionKeepsStateAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{CompactBytes: 16 << 10, SplitKeys: [][]byte{[]byte("k5")}, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	var last uint64
	for i := range 60 {
		last = put(t, ctx, cl, map[string]string{fmt.Sprint("k", i%10): fmt.Sprint(i)})
	}
	for _, id := range c.StoreIDs() {
		st, err := os.Stat(filepath.Join(c.StoreDir(id), "raft.log"))
		if err != nil || st.Size() > 64<<10 {
			t.Fatalf("store %d wal not compacted: %v %v", id, st.Size(), err)
		}
		c.StopStore(id)
	}
	if err := c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	cl2 := client(t, ctx, c)
	for i := 50; i < 60; i++ {
		got, err := cl2.Get(ctx, []byte(fmt.Sprint("k", i%10)), last)
		if err != nil || string(got) != fmt.Sprint(i) {
			t.Fatalf("k%d = %q, %v; want %d", i%10, got, err, i)
		}
	}
	// And the cluster still takes writes.
	put(t, ctx, cl2, map[string]string{"k1": "after", "k9": "after"})
}

// TestReadersResolveStrandedLocks: a transaction whose client died after
// committing only its primary is committed by a reader (CheckTxnStatus +
// ResolveLock), and an expired, never-committed one is rolled back.
func TestReadersResolveStrandedLocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{[]byte("m")}, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	prewrite := func(start uint64, primary string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			for {
				route, err := cl.Locate(ctx, []byte(k))
				if err != nil {
					t.Fatal(err)
				}
				r, kv := route.Region, route.KV
				resp, err := kv.KvPrewrite(ctx, &kvrpcpb.PrewriteRequest{
					Context:     &kvrpcpb.Context{RegionId: r.Meta.GetId(), RegionEpoch: r.Meta.GetRegionEpoch(), Peer: r.Leader},
					PrimaryLock: []byte(primary), StartVersion: start, LockTtl: 1,
					Mutations: []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Put, Key: []byte(k), Value: []byte("v-" + k)}},
				})
				if err == nil && resp.GetRegionError() != nil && ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond) // PD still names the old leader
					continue
				}
				if err != nil || len(resp.GetErrors()) > 0 {
					t.Fatalf("prewrite %s: %v %v", k, resp, err)
				}
				break
			}
		}
	}
	start, _ := cl.TS(ctx)
	prewrite(start, "a", "a", "z")
	commitTS, _ := cl.TS(ctx)
	route, _ := cl.Locate(ctx, []byte("a"))
	r, kv := route.Region, route.KV
	if resp, err := kv.KvCommit(ctx, &kvrpcpb.CommitRequest{Context: &kvrpcpb.Context{RegionId: r.Meta.GetId(), RegionEpoch: r.Meta.GetRegionEpoch(), Peer: r.Leader},
		StartVersion: start, Keys: [][]byte{[]byte("a")}, CommitVersion: commitTS}); err != nil || resp.GetError() != nil {
		t.Fatalf("commit primary: %v %v", resp, err)
	}
	start2, _ := cl.TS(ctx)
	prewrite(start2, "b", "b", "y")
	time.Sleep(5 * time.Millisecond) // the 1 ms TTL runs out
	now, _ := cl.TS(ctx)
	if got, err := cl.Get(ctx, []byte("z"), now); err != nil || string(got) != "v-z" {
		t.Fatalf("secondary of a committed primary = %q, %v", got, err)
	}
	for _, k := range []string{"y", "b"} {
		if got, err := cl.Get(ctx, []byte(k), now); err != nil || got != nil {
			t.Fatalf("%s of an expired transaction = %q, %v", k, got, err)
		}
	}
}
