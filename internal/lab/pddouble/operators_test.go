package pddouble

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
)

// TestAdminOperatorsIgnoreTheSchedulerPause: an operator added through PD's operator API is
// handed to its region's leader step by step, with every scheduler and limit paused as BR
// pauses them and OperatorRate off, until the region shows it done; removing the leader's own
// peer moves the leader first.
func TestAdminOperatorsIgnoreTheSchedulerPause(t *testing.T) {
	s := startPD(t, Config{OperatorRate: -1})
	defer func() { _ = s.Close() }()
	if err := s.bootstrap(&metapb.Store{Id: 1}, nil); err != nil {
		t.Fatal(err)
	}
	for id := uint64(2); id <= 4; id++ {
		if err := s.putStore(&metapb.Store{Id: id, Address: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range defaultSchedulers {
		if err := s.pauseScheduler(n, 60); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.setTTLConfig(map[string]any{"schedule.region-schedule-limit": 0, "schedule.replica-schedule-limit": 0,
		"schedule.leader-schedule-limit": 0}, 60); err != nil {
		t.Fatal(err)
	}
	r := region(10, "", "", 1, 1, 2, 3)
	beat := func(leader uint64, pending ...*metapb.Peer) *pdpb.RegionHeartbeatResponse {
		t.Helper()
		var l *metapb.Peer
		for _, p := range r.Peers {
			if p.GetStoreId() == leader {
				l = p
			}
		}
		op, err := s.regionHeartbeat(&regionEntry{Region: r, Leader: l, Pending: pending})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	post := func(body map[string]any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(s.URL()+"/pd/api/v1/operators", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if op := beat(1); op != nil {
		t.Fatalf("operator with nothing asked: %v", op)
	}
	for _, bad := range []map[string]any{
		{"name": "add-peer", "region_id": 10, "store_id": 2},    // already there
		{"name": "remove-peer", "region_id": 10, "store_id": 4}, // not there
		{"name": "add-peer", "region_id": 99, "store_id": 4},    // no such region
		{"name": "split-region", "region_id": 10},               // not served
	} {
		if code := post(bad); code != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400", bad, code)
		}
	}

	if code := post(map[string]any{"name": "add-peer", "region_id": 10, "store_id": 4}); code != http.StatusOK {
		t.Fatalf("add-peer: status %d", code)
	}
	if code := post(map[string]any{"name": "remove-peer", "region_id": 10, "store_id": 2}); code != http.StatusBadRequest {
		t.Errorf("a second operator on the region: status %d, want 400", code)
	}
	op := beat(1)
	add := op.GetChangePeer()
	if add.GetChangeType() != eraftpb.ConfChangeType_AddNode || add.GetPeer().GetStoreId() != 4 || add.GetPeer().GetId() == 0 {
		t.Fatalf("add-peer step: %v", op)
	}
	if again := beat(1); again.GetChangePeer().GetPeer().GetId() != add.GetPeer().GetId() {
		t.Fatalf("add-peer not handed out again with the same peer while not done: %v", again)
	}
	r.Peers = append(r.Peers, add.GetPeer())
	r.RegionEpoch.ConfVer++
	if op := beat(1, add.GetPeer()); op != nil {
		t.Fatalf("step while the new peer waits for its snapshot: %v", op)
	}
	if op := beat(1); op != nil {
		t.Fatalf("add-peer not done once the peer caught up: %v", op)
	}

	if code := post(map[string]any{"name": "remove-peer", "region_id": 10, "store_id": 1}); code != http.StatusOK {
		t.Fatalf("remove-peer: status %d", code)
	}
	if op := beat(1); op.GetTransferLeader().GetPeer().GetStoreId() != 2 {
		t.Fatalf("removing the leader's peer: %v, want the leader moved to store 2 first", op)
	}
	if op := beat(2); op.GetChangePeer().GetChangeType() != eraftpb.ConfChangeType_RemoveNode || op.GetChangePeer().GetPeer().GetStoreId() != 1 {
		t.Fatalf("remove-peer step: %v", op)
	}
	r.Peers = r.Peers[1:]
	r.RegionEpoch.ConfVer++
	if op := beat(2); op != nil {
		t.Fatalf("remove-peer not done once the peer is gone: %v", op)
	}
}

// TestSplitRefusedWhileTiKVSplitIsOff: as PD, no split id is handed out while
// schedule.enable-tikv-split-region is off (BR's scheduler pause), whoever asks.
func TestSplitRefusedWhileTiKVSplitIsOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startPD(t, Config{GCLifeTime: -1})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())
	ask := func() *pdpb.AskBatchSplitResponse {
		t.Helper()
		resp, err := raw.AskBatchSplit(ctx, &pdpb.AskBatchSplitRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()},
			Region: region(2, "", "m", 1, 1, 2, 3), SplitCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if err := s.setTTLConfig(map[string]any{"schedule.enable-tikv-split-region": false}, 60); err != nil {
		t.Fatal(err)
	}
	if resp := ask(); resp.GetHeader().GetError() == nil || len(resp.GetIds()) != 0 {
		t.Fatalf("split asked while TiKV splits are off: %v", resp)
	}
	if err := s.setTTLConfig(map[string]any{"schedule.enable-tikv-split-region": false}, 0); err != nil {
		t.Fatal(err)
	}
	if resp := ask(); resp.GetHeader().GetError() != nil || len(resp.GetIds()) != 1 {
		t.Fatalf("split asked once TiKV splits are back on: %v", resp)
	}
}
