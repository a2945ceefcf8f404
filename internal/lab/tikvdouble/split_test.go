package tikvdouble

import (
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// memStore is a Store with no volume, PD or network: enough to drive its
// peers' raft by hand.
func memStore(id uint64) *Store {
	return &Store{
		cfg: Config{StoreID: id}, now: time.Now, log: slog.New(slog.DiscardHandler),
		rng:   rand.New(rand.NewPCG(1, id)),
		peers: map[uint64]*peer{}, kv: newKVStore(), rd: &ready{}, created: map[uint64]bool{},
		mergeProposed: map[uint64]mergeProposal{}, destroyed: map[uint64]bool{},
	}
}

// exchange delivers raft messages between stores until none is left, as if
// every store fsynced each round; a message for a region its store does not
// hold yet is dropped (TiKV waits for the split to create the peer). Store
// down (0: none) is cut off: everything it sends or would receive is lost.
func exchange(stores []*Store, down uint64) {
	for range 100 {
		sent := false
		for _, s := range stores {
			for _, p := range s.peers {
				p.persisted = p.lastIndex()
				p.maybeCommit(s.rd)
			}
			msgs := s.rd.msgs
			s.rd = &ready{}
			if s.cfg.StoreID == down {
				continue
			}
			for _, m := range msgs {
				to := stores[m.GetToPeer().GetStoreId()-1]
				if p := to.peers[m.GetRegionId()]; p != nil && to.cfg.StoreID != down {
					to.routeLocked(p, m)
					sent = true
				}
			}
		}
		if !sent {
			return
		}
	}
}

// TestSplitPeersAreElected: the new region's leader is elected like any
// other, so a store that applies the split while leading the parent in a
// later term cannot overwrite what the new region already committed. Before
// the fix, each parent leader made itself the new region's leader at its
// own term without votes: store 2 (parent leader at term 6 by the time it
// applied the split) replaced index 1 that stores 1 and 3 had committed at
// term 5, which lost acknowledged prewrites under load.
func TestSplitPeersAreElected(t *testing.T) {
	stores := []*Store{memStore(1), memStore(2), memStore(3)}
	parent := &metapb.Region{Id: 1, RegionEpoch: &metapb.RegionEpoch{Version: 1, ConfVer: 1},
		Peers: []*metapb.Peer{{Id: 11, StoreId: 1}, {Id: 12, StoreId: 2}, {Id: 13, StoreId: 3}}}
	parents := make([]*peer, 3)
	for i, s := range stores {
		parents[i] = s.createPeerLocked(parent, 5)
	}
	parents[0].role = leader
	split := func(i int) {
		t.Helper()
		c := &splitCmd{Key: []byte("m"), Version: 1, NewRegion: 2, NewPeerIDs: []uint64{21, 22, 23}}
		if res := stores[i].execSplitLocked(parents[i], c); res.err != "" {
			t.Fatalf("store %d split: %s", i+1, res.err)
		}
	}

	// Store 1 applies the split as the parent's leader, store 3 as a follower.
	split(0)
	split(2)
	exchange(stores, 0)
	r1 := stores[0].peers[2]
	if r1.role != leader || r1.commit < 1 {
		t.Fatalf("store 1 did not become the new region's leader with a commit: role %v commit %d", r1.role, r1.commit)
	}
	committed, _ := r1.termAt(1)

	// The parent's leadership moved to store 2 (term 6) before it applied the split.
	parents[0].role = follower
	parents[1].role, parents[1].term = leader, 6
	split(1)
	for range 3 {
		for _, s := range stores {
			for _, p := range s.peers {
				if p.role == leader {
					p.broadcast(s.rd)
				}
			}
		}
		exchange(stores, 0)
	}
	leaders := 0
	for i, s := range stores {
		p := s.peers[2]
		if got, ok := p.termAt(1); !ok || got != committed {
			t.Errorf("store %d: the new region's committed index 1 has term %d (present %v), want %d", i+1, got, ok, committed)
		}
		if p.role == leader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d leaders of the new region, want 1", leaders)
	}
}
