package pddouble

import (
	"bytes"
	"sort"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// regionEntry is what PD knows about one region: its meta as last reported
// by its leader and that leader.
type regionEntry struct {
	Region *metapb.Region `json:"region"`
	Leader *metapb.Peer   `json:"leader,omitempty"`
	Term   uint64         `json:"term,omitempty"`
	// Keys is the leader's approximate key count; schedulers use it to pick
	// splits and merges.
	Keys uint64 `json:"keys,omitempty"`
	// Pending are peers the leader reports as still catching up (a new
	// replica waiting for its snapshot).
	Pending []*metapb.Peer `json:"pending,omitempty"`
	// LeaderSince is when PD first heard of the current leader.
	LeaderSince time.Time `json:"-"`
	// Reported is when PD last heard from the leader about this region.
	Reported time.Time `json:"-"`
}

// RegionLeader is a region's leader as PD last heard of it.
type RegionLeader struct {
	Region uint64
	// Store is the leader's store, 0 if PD knows of no leader.
	Store uint64
	// Stores hold the region's peers that are not pending (caught up, as the leader reports).
	Stores []uint64
	// Reported is when that leader last reported the region (zero if it never did, e.g. the
	// bootstrap region before its first heartbeat).
	Reported time.Time
}

// Leaders lists every region PD knows of with its leader.
func (s *Server) Leaders() []RegionLeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RegionLeader, 0, len(s.regions.sorted))
	for _, e := range s.regions.sorted {
		l := RegionLeader{Region: e.Region.GetId(), Store: e.Leader.GetStoreId(), Reported: e.Reported}
		pending := map[uint64]bool{}
		for _, p := range e.Pending {
			pending[p.GetId()] = true
		}
		for _, p := range e.Region.GetPeers() {
			if !pending[p.GetId()] {
				l.Stores = append(l.Stores, p.GetStoreId())
			}
		}
		out = append(out, l)
	}
	return out
}

// regionTree indexes regions by id and by start key. Ranges never overlap:
// a newer report (higher epoch) evicts the stale regions it overlaps, which is
// how restored regions replace the throw-away bootstrap region.
type regionTree struct {
	byID   map[uint64]*regionEntry
	sorted []*regionEntry
}

func newRegionTree() *regionTree {
	return &regionTree{byID: map[uint64]*regionEntry{}}
}

// endAfter reports whether the region end bound is after key (empty end = +inf).
func endAfter(end, key []byte) bool {
	return len(end) == 0 || bytes.Compare(end, key) > 0
}

func containsKey(r *metapb.Region, key []byte) bool {
	return bytes.Compare(r.GetStartKey(), key) <= 0 && endAfter(r.GetEndKey(), key)
}

// stale reports whether epoch a is older than epoch b in either dimension.
func stale(a, b *metapb.RegionEpoch) bool {
	return a.GetVersion() < b.GetVersion() || a.GetConfVer() < b.GetConfVer()
}

// put stores e unless it is stale; it reports whether e was accepted.
func (t *regionTree) put(e *regionEntry) bool {
	r := e.Region
	if old, ok := t.byID[r.GetId()]; ok {
		if stale(r.GetRegionEpoch(), old.Region.GetRegionEpoch()) {
			return false
		}
	}
	over := t.overlaps(r.GetStartKey(), r.GetEndKey())
	for _, o := range over {
		if o.Region.GetId() != r.GetId() && o.Region.GetRegionEpoch().GetVersion() > r.GetRegionEpoch().GetVersion() {
			return false
		}
	}
	if old, ok := t.byID[r.GetId()]; ok {
		over = append(over, old)
	}
	t.remove(over)
	t.byID[r.GetId()] = e
	i := sort.Search(len(t.sorted), func(i int) bool {
		return bytes.Compare(t.sorted[i].Region.GetStartKey(), r.GetStartKey()) >= 0
	})
	t.sorted = append(t.sorted, nil)
	copy(t.sorted[i+1:], t.sorted[i:])
	t.sorted[i] = e
	return true
}

func (t *regionTree) remove(es []*regionEntry) {
	if len(es) == 0 {
		return
	}
	drop := map[*regionEntry]bool{}
	for _, e := range es {
		drop[e] = true
		if t.byID[e.Region.GetId()] == e {
			delete(t.byID, e.Region.GetId())
		}
	}
	kept := t.sorted[:0]
	for _, e := range t.sorted {
		if !drop[e] {
			kept = append(kept, e)
		}
	}
	for i := len(kept); i < len(t.sorted); i++ {
		t.sorted[i] = nil
	}
	t.sorted = kept
}

// overlaps returns the regions intersecting [start, end) (empty end = +inf).
func (t *regionTree) overlaps(start, end []byte) []*regionEntry {
	return t.scan(start, end, 0)
}

// indexOf returns the index of the last region whose start key is <= key, or -1.
func (t *regionTree) indexOf(key []byte) int {
	i := sort.Search(len(t.sorted), func(i int) bool {
		return bytes.Compare(t.sorted[i].Region.GetStartKey(), key) > 0
	})
	return i - 1
}

// find returns the region containing key, or nil.
func (t *regionTree) find(key []byte) *regionEntry {
	i := t.indexOf(key)
	if i < 0 || !containsKey(t.sorted[i].Region, key) {
		return nil
	}
	return t.sorted[i]
}

// prev returns the region right before the one containing key, or nil.
func (t *regionTree) prev(key []byte) *regionEntry {
	i := t.indexOf(key)
	if i < 1 {
		return nil
	}
	p := t.sorted[i-1]
	if !bytes.Equal(p.Region.GetEndKey(), t.sorted[i].Region.GetStartKey()) {
		return nil
	}
	return p
}

// next returns the region right after e, or nil.
func (t *regionTree) next(e *regionEntry) *regionEntry {
	if len(e.Region.GetEndKey()) == 0 {
		return nil
	}
	n := t.find(e.Region.GetEndKey())
	if n == nil || !bytes.Equal(n.Region.GetStartKey(), e.Region.GetEndKey()) {
		return nil
	}
	return n
}

// scan returns up to limit regions intersecting [start, end) in key order;
// limit <= 0 means no limit. It walks only what it returns, so a page of a
// million regions costs a page.
func (t *regionTree) scan(start, end []byte, limit int) []*regionEntry {
	var out []*regionEntry
	for i := max(t.indexOf(start), 0); i < len(t.sorted); i++ {
		if limit > 0 && len(out) >= limit {
			break
		}
		e := t.sorted[i]
		if len(end) > 0 && bytes.Compare(e.Region.GetStartKey(), end) >= 0 {
			break
		}
		if endAfter(e.Region.GetEndKey(), start) {
			out = append(out, e)
		}
	}
	return out
}
