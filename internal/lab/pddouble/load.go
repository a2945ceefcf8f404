package pddouble

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// SeedRegion is a region and its leader for LoadRegions.
type SeedRegion struct {
	Region *metapb.Region
	Leader *metapb.Peer
}

// LoadRegions is the region-only mode (see internal/lab/regiononly): it bootstraps a fresh PD
// with stores and regions that no TiKV double reports, at a scale the full doubles cannot hold
// (a million regions load in about a second). The regions must not overlap (a gap is a
// hole in PD's view, as during a recovery); PD keeps the given objects (callers must not change them) and serves them like
// reported ones. They live in memory only: the state file leaves them out, so a restarted PD
// has none. SetLeader stands in for the leaders' heartbeats.
func (s *Server) LoadRegions(stores []*metapb.Store, regions []SeedRegion) error {
	sorted := slices.Clone(regions)
	slices.SortFunc(sorted, func(a, b SeedRegion) int { return bytes.Compare(a.Region.GetStartKey(), b.Region.GetStartKey()) })
	entries := make([]*regionEntry, len(sorted))
	byID := make(map[uint64]*regionEntry, len(sorted))
	for i, r := range sorted {
		if i > 0 && endAfter(sorted[i-1].Region.GetEndKey(), r.Region.GetStartKey()) {
			return fmt.Errorf("load regions: region %d overlaps region %d at %x", sorted[i-1].Region.GetId(), r.Region.GetId(), r.Region.GetStartKey())
		}
		e := &regionEntry{Region: r.Region, Leader: r.Leader}
		if _, dup := byID[r.Region.GetId()]; dup {
			return fmt.Errorf("load regions: region id %d twice", r.Region.GetId())
		}
		entries[i], byID[r.Region.GetId()] = e, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Bootstrapped {
		return errAlreadyBootstrapped
	}
	s.st.Bootstrapped = true
	for _, st := range stores {
		st.NodeState = metapb.NodeState_Serving
		s.st.Stores[st.GetId()] = st
	}
	s.regions = &regionTree{byID: byID, sorted: entries}
	s.regionOnly = true
	return s.persistLocked()
}

// SetLeader records that a region-only store's peer leads its region, as that leader's
// heartbeat would tell PD.
func (s *Server) SetLeader(regionID uint64, leader *metapb.Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.regions.byID[regionID]
	if e == nil {
		return fmt.Errorf("set leader: PD knows no region %d", regionID)
	}
	e.Leader = leader
	return nil
}
