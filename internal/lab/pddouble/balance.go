package pddouble

import (
	"sort"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// maxReplicas is the replica count PD keeps every region at.
const maxReplicas = 3

// moveStep is one step of moving a region's replica: add a peer on
// AddStore, or remove Remove. The zero value means nothing to do.
type moveStep struct {
	AddStore uint64
	Remove   *metapb.Peer
}

// balanceRegionStep is the balance-region scheduler's decision for one
// region, as a pure function of PD's view. A move is PD's two-step
// operator: first add a replica on the least loaded up store that has none
// (fed by a raft snapshot), then, once that replica is no longer pending,
// remove a follower from the most loaded store, bringing the region back to
// maxReplicas. load is the number of replicas per store; up lists the
// stores that may take a replica. A move starts only towards a store with
// fewer replicas than the busiest store of the region, unless shuffle is
// set (PD's shuffle-region-scheduler, which moves replicas regardless).
// Ties go to the lower store id, so the decision is deterministic; PD's
// randomness is in which regions it visits and when.
func balanceRegionStep(r *metapb.Region, leader *metapb.Peer, pending []*metapb.Peer, load map[uint64]int, up []uint64, shuffle bool) moveStep {
	peers := r.GetPeers()
	if len(pending) > 0 {
		return moveStep{} // a replica is still catching up
	}
	if len(peers) > maxReplicas {
		var victim *metapb.Peer
		for _, p := range peers {
			if p.GetId() == leader.GetId() {
				continue
			}
			if victim == nil || load[p.GetStoreId()] > load[victim.GetStoreId()] ||
				(load[p.GetStoreId()] == load[victim.GetStoreId()] && p.GetStoreId() < victim.GetStoreId()) {
				victim = p
			}
		}
		return moveStep{Remove: victim}
	}
	if len(peers) < maxReplicas {
		return moveStep{}
	}
	has := map[uint64]bool{}
	most := 0
	for _, p := range peers {
		has[p.GetStoreId()] = true
		most = max(most, load[p.GetStoreId()])
	}
	cands := make([]uint64, 0, len(up))
	for _, id := range up {
		if !has[id] {
			cands = append(cands, id)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i]] != load[cands[j]] {
			return load[cands[i]] < load[cands[j]]
		}
		return cands[i] < cands[j]
	})
	if len(cands) == 0 || (!shuffle && load[cands[0]] >= most) {
		return moveStep{}
	}
	return moveStep{AddStore: cands[0]}
}
