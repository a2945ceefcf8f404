package tikvdouble

import (
	"context"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
)

// settle runs rounds of leader heartbeats, message exchange and apply on
// every store until the regions are quiet.
func settle(stores []*Store) {
	for range 3 {
		for _, s := range stores {
			for _, p := range s.peers {
				if p.role == leader {
					p.broadcast(s.rd)
				}
			}
		}
		exchange(stores, 0)
		for _, s := range stores {
			apply(s)
		}
	}
}

// adjacentRegions is three stores holding regions 1 ["", "m") and 2 ["m", ""),
// both led by store 1 and settled.
func adjacentRegions() []*Store {
	stores := []*Store{memStore(1), memStore(2), memStore(3)}
	src, dst := region3(1), region3(2)
	src.EndKey, dst.StartKey = []byte("m"), []byte("m")
	for _, s := range stores {
		s.createPeerLocked(src, 0)
		s.createPeerLocked(dst, 0)
	}
	s1 := stores[0]
	s1.peers[1].campaign(s1.rd)
	s1.peers[2].campaign(s1.rd)
	settle(stores)
	return stores
}

// apply runs one apply pass of s, followers included.
func apply(s *Store) {
	s.applyTick = true
	s.applyLocked()
	for _, cb := range s.callbacks {
		cb()
	}
	s.callbacks = nil
}

// TestNoCommandBehindPrepareMerge: a write that reaches the source's leader
// after it proposed PrepareMerge but before it applied it is refused. Before
// the fix it was logged behind the PrepareMerge: the leader applied and
// acknowledged it, but CommitMerge catches the other replicas' source up
// only to the PrepareMerge, so they never applied it. The acknowledged
// prewrite lived on the leader's store alone, and a crash-restart or a
// leader move lost it (TestSchedulersDriveSplitsAndLeaderMoves: "scan after
// restart", "commit primary: txn lock not found").
func TestNoCommandBehindPrepareMerge(t *testing.T) {
	stores := adjacentRegions()
	s1 := stores[0]
	p := s1.peers[1]
	if p.role != leader || s1.peers[2].role != leader || p.applied < p.termStart {
		t.Fatalf("store 1 does not lead both regions: %v %v", p.role, s1.peers[2].role)
	}

	// PD asks for the merge: the PrepareMerge is logged, not applied yet,
	// when a prewrite arrives.
	s1.prepareMergeLocked(p, s1.peers[2].region)
	pm := p.lastIndex()
	if !adminPendingLocked(p) {
		t.Fatal("PrepareMerge not proposed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	kctx := &kvrpcpb.Context{RegionId: 1, RegionEpoch: proto.Clone(p.region.GetRegionEpoch()).(*metapb.RegionEpoch)}
	pw := &prewriteCmd{Primary: []byte("a"), StartTS: 10, TTL: 3000, Mutations: []mutation{{Op: kvrpcpb.Op_Put, Key: []byte("a"), Value: []byte("w")}}}
	res, err := s1.propose(ctx, kctx, [][]byte{[]byte("a")}, command{Prewrite: pw}, normal)
	if res.regionErr.GetProposalInMergingMode() == nil {
		t.Errorf("prewrite behind a PrepareMerge: %+v, %v; want ProposalInMergingMode", res, err)
	}
	// Before the fix it was logged and its proposal is still waiting.
	behind := p.pending[p.lastIndex()]

	// The followers log what the source's leader sent and acknowledge it;
	// the leader commits and applies it. The followers learn that commit
	// with the leader's next message: they lag, as under load.
	exchange(stores, 0)
	apply(s1)
	// The target's leader commits the merge; the followers apply it before
	// their source heard of the commit, so CommitMerge catches their source
	// up from its own log to the PrepareMerge and destroys it.
	s1.driveMergesLocked()
	for range 2 {
		s1.peers[2].broadcast(s1.rd)
		exchange(stores, 0)
	}
	for _, s := range stores {
		apply(s)
	}
	acked := false
	if behind != nil && p.lastIndex() > pm {
		select {
		case r := <-behind.done:
			acked = r.regionErr == nil && !r.notLeader && r.err == "" && len(r.keyErrs) == 0
		default:
		}
	}
	for i, s := range stores {
		if s.peers[1] != nil || len(s.peers[2].region.GetStartKey()) != 0 {
			t.Fatalf("store %d did not merge: source left %v, target %v", i+1, s.peers[1] != nil, s.peers[2].region)
		}
		m := s.kv.get([]byte("a"))
		if locked := m != nil && m.Lock != nil; locked != acked {
			t.Errorf("store %d: lock of the prewrite logged behind the PrepareMerge present %v, acknowledged %v", i+1, locked, acked)
		}
	}
}

// TestMergeRollsBackAfterStaleCommit: when the target changed under a
// merge (here a split applied before the CommitMerge, which then fails as
// stale), the source's leader rolls the merge back, even though its store
// also leads the target and even for the second merge it prepared in the
// same term. Before the fix the store remembered one term per source for
// all these proposals: the CommitMerge in the target's term 1, or the
// first merge's RollbackMerge, blocked the RollbackMerge in the source's
// term, and the source refused every request for good
// (TestSchedulersDriveSplitsAndLeaderMoves timed out on "scan after
// restart" with a region merging for a minute).
func TestMergeRollsBackAfterStaleCommit(t *testing.T) {
	stores := adjacentRegions()
	s1 := stores[0]
	p, tp := s1.peers[1], s1.peers[2]
	if p.role != leader || tp.role != leader || p.term != tp.term {
		t.Fatalf("store 1 does not lead both regions in one term: %v@%d %v@%d", p.role, p.term, tp.role, tp.term)
	}
	for i, key := range []string{"t", "p"} {
		s1.prepareMergeLocked(p, tp.region)
		settle(stores)
		if p.merging == nil {
			t.Fatalf("merge %d: PrepareMerge not applied", i+1)
		}
		// The target splits: the first time its split is logged before
		// the CommitMerge, the second time it applies before the store
		// proposes anything for this merge.
		if _, err := s1.proposeLocked(tp, command{Split: &splitCmd{Key: []byte(key), Version: tp.region.GetRegionEpoch().GetVersion(),
			NewRegion: uint64(3 + i), NewPeerIDs: []uint64{uint64(31 + 10*i), uint64(32 + 10*i), uint64(33 + 10*i)}}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			s1.driveMergesLocked()
		}
		settle(stores)
		if tp.region.GetRegionEpoch().GetVersion() == p.merging.Target.GetRegionEpoch().GetVersion() {
			t.Fatalf("merge %d: the target did not split", i+1)
		}
		s1.driveMergesLocked()
		settle(stores)
		for j, s := range stores {
			if q := s.peers[1]; q == nil || q.merging != nil {
				t.Fatalf("merge %d: store %d: the source is still merging into a target that changed", i+1, j+1)
			}
		}
	}
	if p.term != 1 {
		t.Fatalf("the source's term moved to %d", p.term)
	}
}

// TestSnapshotReplacesMergedSource: a replica that missed a merge (its
// source never applied the PrepareMerge, its target lags behind the
// leader's compaction) takes the target's snapshot and drops the stale
// source, whose keys the snapshot covers. Before the fix it refused the
// snapshot for overlapping the source, which has no leader anywhere: the
// store kept both forever and TestSchedulersDriveSplitsAndLeaderMoves timed
// out in "wait for leaders" after the restart.
func TestSnapshotReplacesMergedSource(t *testing.T) {
	stores := adjacentRegions()
	s1, s3 := stores[0], stores[2]
	p, tp := s1.peers[1], s1.peers[2]
	if p.role != leader || tp.role != leader {
		t.Fatalf("store 1 does not lead both regions: %v %v", p.role, tp.role)
	}

	// Store 3 is cut off from the PrepareMerge on; stores 1 and 2 merge
	// and take a write in the merged range.
	s1.prepareMergeLocked(p, tp.region)
	step := func() {
		for _, s := range stores {
			for _, q := range s.peers {
				if q.role == leader {
					q.broadcast(s.rd)
				}
			}
		}
		exchange(stores, 3)
		for _, s := range stores[:2] {
			apply(s)
		}
	}
	for range 3 {
		step()
	}
	s1.driveMergesLocked()
	for range 3 {
		step()
	}
	pw := &prewriteCmd{Primary: []byte("a"), StartTS: 10, TTL: 3000, Mutations: []mutation{{Op: kvrpcpb.Op_Put, Key: []byte("a"), Value: []byte("w")}}}
	if _, err := s1.proposeLocked(tp, command{Prewrite: pw}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		step()
	}
	if s1.peers[1] != nil || len(tp.region.GetStartKey()) != 0 || s1.kv.get([]byte("a")) == nil {
		t.Fatalf("stores 1 and 2 did not merge and write: %v", tp.region)
	}

	// Store 3 is back and gets the target's snapshot, as when the leader
	// compacted the entries it misses.
	s1.sendSnapshotLocked(tp, s3.peers[2].selfID)
	exchange(stores, 0)
	if s3.peers[1] != nil {
		t.Fatal("store 3 kept the merged source and refused the target's snapshot")
	}
	settle(stores)
	if r := s3.peers[2].region; len(r.GetStartKey()) != 0 || len(r.GetEndKey()) != 0 {
		t.Errorf("store 3's target %v, want the merged range", r)
	}
	if m := s3.kv.get([]byte("a")); m == nil || m.Lock == nil {
		t.Error("store 3 misses the write the snapshot carries")
	}
}
