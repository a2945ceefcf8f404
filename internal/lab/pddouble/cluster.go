package pddouble

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/metapb"
)

var (
	errAlreadyBootstrapped = errors.New("cluster is already bootstrapped")
	errNotRecovering       = errors.New("base alloc id can only be reset while snapshot-recovering is marked")
	errStoreTombstone      = errors.New("store is tombstone")
)

func cloneStore(st *metapb.Store) *metapb.Store {
	return proto.Clone(st).(*metapb.Store)
}

// bootstrap records the first store and region; a second call fails.
func (s *Server) bootstrap(store *metapb.Store, region *metapb.Region) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Bootstrapped {
		return errAlreadyBootstrapped
	}
	s.st.Bootstrapped = true
	if store != nil {
		store.NodeState = metapb.NodeState_Serving
		s.st.Stores[store.GetId()] = store
	}
	if region != nil {
		var leader *metapb.Peer
		if len(region.GetPeers()) > 0 {
			leader = region.GetPeers()[0]
		}
		s.regions.put(&regionEntry{Region: region, Leader: leader})
	}
	return s.persistLocked()
}

func (s *Server) isBootstrapped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Bootstrapped
}

// idBatch is how many ids PD reserves per write of its allocator's end.
const idBatch = 1000

// allocID returns a fresh id.
func (s *Server) allocID() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocIDLocked()
}

// allocIDLocked hands out the next id. Like PD's allocator it persists only
// the end of a reserved batch (st.NextID), so ids cost one fsync per
// idBatch instead of one each; after a restart allocation resumes past the
// persisted end, skipping the unused rest of the batch, never reusing one.
func (s *Server) allocIDLocked() (uint64, error) {
	if s.nextID+1 > s.st.NextID {
		s.st.NextID = s.nextID + idBatch
		if err := s.persistLocked(); err != nil {
			s.st.NextID = s.nextID
			return 0, err
		}
	}
	s.nextID++
	return s.nextID, nil
}

// setBaseAllocID makes the next AllocID return id+1 (it may move backwards,
// as in PD); it requires the snapshot-recovering mark.
func (s *Server) setBaseAllocID(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.st.Recovering {
		return errNotRecovering
	}
	s.st.NextID, s.nextID = id, id
	return s.persistLocked()
}

func (s *Server) setRecovering(marked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Recovering = marked
	return s.persistLocked()
}

func (s *Server) recovering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Recovering
}

// putStore registers or updates a store (TiKV calls it on every start).
func (s *Server) putStore(store *metapb.Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.st.Bootstrapped {
		return errNotBootstrapped
	}
	if old, ok := s.st.Stores[store.GetId()]; ok && old.GetNodeState() == metapb.NodeState_Removed {
		return fmt.Errorf("put store %d: %w", store.GetId(), errStoreTombstone)
	}
	store = cloneStore(store)
	store.State = metapb.StoreState_Up
	store.NodeState = metapb.NodeState_Serving
	store.LastHeartbeat = s.now().UnixNano()
	s.st.Stores[store.GetId()] = store
	return s.persistLocked()
}

// storeHeartbeat refreshes a store's liveness.
func (s *Server) storeHeartbeat(id uint64, startTime uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.st.Stores[id]
	if !ok {
		return fmt.Errorf("store %d not found", id)
	}
	st.LastHeartbeat = s.now().UnixNano()
	if startTime != 0 && int64(startTime) != st.StartTimestamp {
		st.StartTimestamp = int64(startTime)
		s.dirty = true
	}
	s.softDirty = true
	return nil
}

func (s *Server) store(id uint64) *metapb.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.st.Stores[id]; ok {
		return cloneStore(st)
	}
	return nil
}

func (s *Server) allStores(excludeTombstone bool) []*metapb.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*metapb.Store, 0, len(s.st.Stores))
	for _, st := range s.st.Stores {
		if excludeTombstone && st.GetState() == metapb.StoreState_Tombstone {
			continue
		}
		out = append(out, cloneStore(st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out
}

// reportResolvedTS records a store's minimum resolved ts over its leaders.
func (s *Server) reportResolvedTS(store, ts uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts > s.st.ResolvedTS[store] {
		s.st.ResolvedTS[store] = ts
		s.softDirty = true
	}
}

// minResolved is PD's view of resolved ts: the minimum over the asked
// stores and the per-store values.
type minResolved struct {
	Min    uint64
	Stores map[uint64]uint64
}

// minResolvedTS returns the minimum over the given stores (all up stores when
// ids is empty). A store that never reported counts as 0, so the minimum is
// never ahead of a store PD has not heard from.
func (s *Server) minResolvedTS(ids []uint64) minResolved {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		for id, st := range s.st.Stores {
			if st.GetState() == metapb.StoreState_Up {
				ids = append(ids, id)
			}
		}
	}
	out := minResolved{Min: math.MaxUint64, Stores: map[uint64]uint64{}}
	for _, id := range ids {
		ts := s.st.ResolvedTS[id]
		out.Stores[id] = ts
		if ts < out.Min {
			out.Min = ts
		}
	}
	if out.Min == math.MaxUint64 {
		out.Min = 0
	}
	return out
}
