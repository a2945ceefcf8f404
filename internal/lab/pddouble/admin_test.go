package pddouble

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
)

func peers(ids ...uint64) []*metapb.Peer {
	var out []*metapb.Peer
	for _, st := range ids {
		out = append(out, &metapb.Peer{Id: 100 + st, StoreId: st})
	}
	return out
}

func TestBalanceRegionStep(t *testing.T) {
	up := []uint64{1, 2, 3, 4}
	for _, tc := range []struct {
		name    string
		stores  []uint64
		leader  uint64
		pending bool
		load    map[uint64]int
		shuffle bool
		want    moveStep
	}{
		{"balanced: nothing to do", []uint64{1, 2, 3}, 1, false, map[uint64]int{1: 3, 2: 3, 3: 3, 4: 3}, false, moveStep{}},
		{"balanced with shuffle: add on the only free store", []uint64{1, 2, 3}, 1, false, map[uint64]int{1: 3, 2: 3, 3: 3, 4: 3}, true, moveStep{AddStore: 4}},
		{"idle store: add there", []uint64{1, 2, 3}, 1, false, map[uint64]int{1: 4, 2: 3, 3: 3, 4: 1}, false, moveStep{AddStore: 4}},
		{"added replica still pending: wait", []uint64{1, 2, 3, 4}, 1, true, map[uint64]int{1: 4, 2: 3, 3: 3, 4: 2}, false, moveStep{}},
		{"excess replica: remove from the busiest follower store", []uint64{1, 2, 3, 4}, 2, false, map[uint64]int{1: 4, 2: 5, 3: 3, 4: 2}, false, moveStep{Remove: &metapb.Peer{Id: 101, StoreId: 1}}},
		{"never the leader", []uint64{1, 2, 3, 4}, 1, false, map[uint64]int{1: 9, 2: 3, 3: 3, 4: 3}, false, moveStep{Remove: &metapb.Peer{Id: 102, StoreId: 2}}},
		{"under-replicated: not balance-region's job", []uint64{1, 2}, 1, false, map[uint64]int{1: 1, 2: 1}, true, moveStep{}},
		{"every store holds it", []uint64{1, 2, 3}, 1, false, map[uint64]int{1: 1, 2: 1, 3: 1}, true, moveStep{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &metapb.Region{Id: 1, Peers: peers(tc.stores...)}
			var pending []*metapb.Peer
			if tc.pending {
				pending = r.Peers[len(r.Peers)-1:]
			}
			stores := up
			if tc.name == "every store holds it" {
				stores = []uint64{1, 2, 3}
			}
			got := balanceRegionStep(r, &metapb.Peer{Id: 100 + tc.leader, StoreId: tc.leader}, pending, tc.load, stores, tc.shuffle)
			if got.AddStore != tc.want.AddStore || got.Remove.GetId() != tc.want.Remove.GetId() {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStoreStateName(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	beat := func(ago time.Duration) int64 { return now.Add(-ago).UnixNano() }
	for _, tc := range []struct {
		st   *metapb.Store
		want string
	}{
		{&metapb.Store{LastHeartbeat: beat(time.Second)}, "Up"},
		{&metapb.Store{}, "Up"}, // registered, no heartbeat yet
		{&metapb.Store{LastHeartbeat: beat(21 * time.Second)}, "Disconnected"},
		{&metapb.Store{LastHeartbeat: beat(31 * time.Minute)}, "Down"},
		{&metapb.Store{State: metapb.StoreState_Offline, LastHeartbeat: beat(time.Hour)}, "Offline"},
		{&metapb.Store{State: metapb.StoreState_Tombstone}, "Tombstone"},
	} {
		if got := storeStateName(tc.st, now, 30*time.Minute); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.st, got, tc.want)
		}
	}
}

// TestHTTPRegionsAndStoreStates drives /regions, /region/id, /stores and
// /store through PD's own HTTP client: the shapes decode, keys are hex,
// and a store silent on the injected clock turns Disconnected, then Down.
func TestHTTPRegionsAndStoreStates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := newFakeClock()
	s := startPD(t, Config{Now: clock.Now, OperatorRate: -1})
	defer func() { _ = s.Close() }()
	seedCluster(t, ctx, rawClient(t, s), s.ClusterID())
	h := pdhttp.NewClient("test", []string{s.URL()})
	defer h.Close()

	rs, err := h.GetRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Count != 2 || len(rs.Regions) != 2 || rs.Regions[0].EndKey != "6D" || rs.Regions[1].StartKey != "6D" || len(rs.Regions[0].Peers) != 3 {
		t.Fatalf("regions %+v", rs)
	}
	r, err := h.GetRegionByID(ctx, 3)
	if err != nil || r.ID != 3 || r.Leader.StoreID != 2 || r.Epoch.Version != 1 {
		t.Fatalf("region 3: %+v %v", r, err)
	}
	states := func() map[int64]string {
		t.Helper()
		st, err := h.GetStores(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		for _, x := range st.Stores {
			out[x.Store.ID] = x.Store.StateName
		}
		return out
	}
	if got := fmt.Sprint(states()); got != "map[1:Up 2:Up 3:Up]" {
		t.Fatalf("fresh stores: %s", got)
	}
	pc := rawClient(t, s)
	hdr := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	clock.Add(25 * time.Second)
	if _, err := pc.StoreHeartbeat(ctx, &pdpb.StoreHeartbeatRequest{Header: hdr, Stats: &pdpb.StoreStats{StoreId: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(states()); got != "map[1:Up 2:Disconnected 3:Disconnected]" {
		t.Fatalf("after 25s of silence: %s", got)
	}
	clock.Add(31 * time.Minute)
	if _, err := pc.StoreHeartbeat(ctx, &pdpb.StoreHeartbeatRequest{Header: hdr, Stats: &pdpb.StoreStats{StoreId: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(states()); got != "map[1:Up 2:Down 3:Down]" {
		t.Fatalf("after max-store-down-time: %s", got)
	}
	one, err := h.GetStore(ctx, 2)
	if err != nil || one.Store.StateName != "Down" || one.Status.RegionCount != 2 {
		t.Fatalf("store 2: %+v %v", one, err)
	}
	// GetAllStores shows the lapse through last_heartbeat.
	c, err := pd.NewClientWithContext(ctx, []string{s.Addr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all, err := c.GetAllStores(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("get all stores: %v %v", all, err)
	}
	for _, st := range all {
		silent := clock.Now().Sub(time.Unix(0, st.GetLastHeartbeat()))
		if (st.GetId() == 1) != (silent < time.Second) {
			t.Fatalf("store %d silent for %v", st.GetId(), silent)
		}
	}
}

// TestBalanceRegionOperators: on heartbeats PD hands out a replica move in
// two steps (AddNode on a free store with a fresh id, then RemoveNode once
// the new peer is not pending), and pausing balance-region stops new moves
// but lets the removal of an excess replica through.
func TestBalanceRegionOperators(t *testing.T) {
	s := startPD(t, Config{OperatorRate: 1, ShuffleRegionRate: 1, SplitKeys: 1000, MergeKeys: 0})
	defer func() { _ = s.Close() }()
	if err := s.bootstrap(&metapb.Store{Id: 1}, nil); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 4; id++ {
		if err := s.putStore(&metapb.Store{Id: id, Address: fmt.Sprint("127.0.0.1:", id)}); err != nil {
			t.Fatal(err)
		}
	}
	// Leader transfers are not under test.
	if err := s.setConfig(map[string]any{"schedule.leader-schedule-limit": 0, "schedule.merge-schedule-limit": 0}); err != nil {
		t.Fatal(err)
	}
	r := region(10, "", "", 1, 1, 2, 3)
	beat := func(pending []*metapb.Peer) *pdpb.RegionHeartbeatResponse {
		t.Helper()
		op, err := s.regionHeartbeat(&regionEntry{Region: r, Leader: r.Peers[0], Keys: 10, Pending: pending})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	op := beat(nil)
	add := op.GetChangePeer()
	if add.GetChangeType() != eraftpb.ConfChangeType_AddNode || add.GetPeer().GetStoreId() != 4 || add.GetPeer().GetId() <= 1000 {
		t.Fatalf("first step: %v", op)
	}
	r.Peers = append(r.Peers, add.GetPeer())
	r.RegionEpoch.ConfVer++
	if op := beat([]*metapb.Peer{add.GetPeer()}); op != nil {
		t.Fatalf("operator while the new peer is pending: %v", op)
	}
	if err := s.pauseScheduler("balance-region-scheduler", 60); err != nil {
		t.Fatal(err)
	}
	op = beat(nil)
	rm := op.GetChangePeer()
	if rm.GetChangeType() != eraftpb.ConfChangeType_RemoveNode || rm.GetPeer().GetId() == r.Peers[0].GetId() {
		t.Fatalf("second step: %v", op)
	}
	r.Peers = r.Peers[:3]
	r.RegionEpoch.ConfVer++
	if op := beat(nil); op != nil {
		t.Fatalf("new move while balance-region is paused: %v", op)
	}
}

// TestHeartbeatsOnlySoftDirty: a heartbeat that changes nothing but
// liveness or key counts must not force a rewrite of the state file within
// the 100 ms cadence; a changed region shape must.
func TestHeartbeatsOnlySoftDirty(t *testing.T) {
	s := startPD(t, Config{OperatorRate: -1})
	defer func() { _ = s.Close() }()
	if err := s.bootstrap(&metapb.Store{Id: 1}, nil); err != nil {
		t.Fatal(err)
	}
	r := region(10, "", "", 1, 1, 2, 3)
	beat := func(keys uint64) (dirty, soft bool) {
		t.Helper()
		rc := proto.Clone(r).(*metapb.Region) // as the gRPC path decodes a fresh one
		if _, err := s.regionHeartbeat(&regionEntry{Region: rc, Leader: rc.Peers[0], Keys: keys}); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		d, sd := s.dirty, s.softDirty
		_ = s.persistLocked()
		return d, sd
	}
	if d, _ := beat(1); !d {
		t.Fatal("a new region did not mark the state dirty")
	}
	if d, soft := beat(2); d || !soft {
		t.Fatalf("a key-count change: dirty=%v soft=%v, want soft only", d, soft)
	}
	r.RegionEpoch.ConfVer++
	if d, _ := beat(2); !d {
		t.Fatal("a conf change did not mark the state dirty")
	}
	if err := s.storeHeartbeat(1, 0); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	d := s.dirty
	s.mu.Unlock()
	if d {
		t.Fatal("a store heartbeat marked the state dirty")
	}
}
