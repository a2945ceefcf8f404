// Package recovery decides, from the region metadata every TiKV reports after a volume restore,
// which peer of each region becomes its leader. It is a pure function: the BR engine gathers
// the metas over gRPC (ReadRegionMeta), calls Plan, and sends the result (RecoverRegion).
//
// The rules, and where fedbr differs from upstream BR:
//   - a region's best peer has the highest (last log term, last index, commit index), compared
//     as unsigned numbers (upstream compared by unsigned subtraction cast to int);
//   - overlapping regions (split or merge leftovers) are resolved by epoch version: the higher
//     version wins, the loser's peers are told to stay followers;
//   - the surviving regions must tile the whole key space ["", +inf) without a tombstone: a hole
//     anywhere, including at the end (upstream did not check the end), is an error that names
//     the missing range;
//   - leaders go to the least-loaded store among the peers that tie with the best one, in key
//     order, so the plan is balanced and deterministic (upstream iterated a Go map).
//
// Plan runs in O(n log n) for n metas and allocates a few words per meta.
package recovery

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// RegionMeta is one peer of one region as a store reports it (recoverdatapb.RegionMeta plus the
// reporting store).
type RegionMeta struct {
	StoreID     uint64
	RegionID    uint64
	PeerID      uint64
	LastLogTerm uint64
	LastIndex   uint64
	CommitIndex uint64
	Version     uint64
	Tombstone   bool
	// StartKey and EndKey bound the region; an empty EndKey is +inf.
	StartKey []byte
	EndKey   []byte
}

// Input is everything the planner needs.
type Input struct {
	// Stores are the TiKV stores expected to report (every non-tombstone store PD knows).
	Stores []uint64
	// Metas are the reports.
	Metas *Metas
	// Reported are the stores that answered, possibly with no region at all (a new or empty
	// store). Nil means "every store that sent a meta".
	Reported []uint64
	// MaxMissingStores is how many expected stores may not answer (one with
	// tolerateSingleTiKVOutage); their regions must still be covered by other peers.
	MaxMissingStores int
}

// Command is one RecoverRegion entry for a store.
type Command struct {
	RegionID uint64
	// AsLeader makes this store's peer the region's leader; otherwise the peer stays a follower
	// (and, for a region lost to a newer overlapping one, is marked Tombstone).
	AsLeader  bool
	Tombstone bool
}

// Result is the recovery plan.
type Result struct {
	// Commands per store, sorted by region id. Stores that lead nothing still get their
	// follower entries; the BR engine may skip stores without leaders.
	Commands map[uint64][]Command
	// Leaders is the number of regions each store leads.
	Leaders map[uint64]int
	// Regions is the number of regions that survive.
	Regions int
	// Dropped are the regions that lost to a newer overlapping region, sorted.
	Dropped []uint64
	// MaxAllocID is the largest store, region or peer id seen; PD's id allocator must be raised
	// past it so new ids never collide with restored ones.
	MaxAllocID uint64
	// MissingStores are expected stores that reported nothing, sorted.
	MissingStores []uint64
}

// region is one region id's summary: its best peer and its key range.
type region struct {
	id    uint64
	best  int32 // index into Metas
	ver   uint64
	start []byte
	end   []byte // nil or empty: +inf
}

// better reports whether a is a better leader candidate than b.
func better(a, b *RegionMeta) bool {
	if a.LastLogTerm != b.LastLogTerm {
		return a.LastLogTerm > b.LastLogTerm
	}
	if a.LastIndex != b.LastIndex {
		return a.LastIndex > b.LastIndex
	}
	return a.CommitIndex > b.CommitIndex
}

func ties(a, b *RegionMeta) bool {
	return a.LastLogTerm == b.LastLogTerm && a.LastIndex == b.LastIndex && a.CommitIndex == b.CommitIndex
}

// startBeforeEnd reports start < end, with an empty end as +inf.
func startBeforeEnd(start, end []byte) bool {
	return len(end) == 0 || bytes.Compare(start, end) < 0
}

// Plan computes the recovery plan.
func Plan(in Input) (Result, error) {
	res := Result{Commands: map[uint64][]Command{}, Leaders: map[uint64]int{}}
	if err := checkStores(in, &res); err != nil {
		return res, err
	}

	regions, regionOf, err := bestPeers(in.Metas, &res)
	if err != nil {
		return res, err
	}
	byStart := sortByStart(regions)
	accepted := resolveOverlaps(regions, byStart)
	survivors := make([]int32, 0, len(byStart))
	for _, ri := range byStart {
		if accepted[ri] {
			survivors = append(survivors, ri)
		}
	}
	if err := checkCoverage(in.Metas, regions, survivors); err != nil {
		return res, err
	}

	// Regions that lost: every peer stays a follower and is marked tombstone.
	for i := range regions {
		if !accepted[i] {
			res.Dropped = append(res.Dropped, regions[i].id)
		}
	}
	slices.Sort(res.Dropped)
	res.Regions = len(regions) - len(res.Dropped)

	assignLeaders(in.Metas, regions, regionOf, accepted, survivors, &res)
	for store := range res.Commands {
		slices.SortFunc(res.Commands[store], func(a, b Command) int { return cmp.Compare(a.RegionID, b.RegionID) })
	}
	return res, nil
}

// checkStores rejects reports from unknown stores and too many silent stores.
func checkStores(in Input, res *Result) error {
	expected := make(map[uint64]bool, len(in.Stores))
	for _, s := range in.Stores {
		expected[s] = true
		res.MaxAllocID = max(res.MaxAllocID, s)
	}
	reported := make(map[uint64]bool, len(in.Stores))
	for _, s := range in.Reported {
		reported[s] = true
	}
	for i := range in.Metas.Len() {
		s := in.Metas.At(i).StoreID
		if !expected[s] {
			return fmt.Errorf("store %d reported region %d but is not one of the %d expected stores", s, in.Metas.At(i).RegionID, len(in.Stores))
		}
		if in.Reported == nil {
			reported[s] = true
		}
	}
	for _, s := range in.Stores {
		if !reported[s] {
			res.MissingStores = append(res.MissingStores, s)
		}
	}
	slices.Sort(res.MissingStores)
	if len(res.MissingStores) > in.MaxMissingStores {
		return fmt.Errorf("stores %v did not answer; at most %d may be missing", res.MissingStores, in.MaxMissingStores)
	}
	return nil
}

// maxMetas bounds the metas Plan takes, so that every region position and every boundary key
// position (at most two per region) fits the int32 indexes the plan keeps.
const maxMetas = math.MaxInt32 / 2

// bestPeers groups metas by region and picks each region's best peer. It returns the regions
// and, for every meta, the position of its region.
func bestPeers(metas *Metas, res *Result) ([]region, []int32, error) {
	if metas.Len() > maxMetas {
		return nil, nil, fmt.Errorf("the stores reported %d region peers; at most %d are planned", metas.Len(), maxMetas)
	}
	index := make(map[uint64]int32, metas.Len()/3+1)
	regionOf := make([]int32, metas.Len())
	regions := make([]region, 0, metas.Len()/3+1)
	for i := range metas.Len() {
		m := metas.At(i)
		res.MaxAllocID = max(res.MaxAllocID, m.StoreID, m.RegionID, m.PeerID)
		if m.RegionID == 0 {
			return nil, nil, fmt.Errorf("store %d reported a region with id 0", m.StoreID)
		}
		if !startBeforeEnd(m.StartKey, m.EndKey) {
			return nil, nil, fmt.Errorf("store %d reported region %d with empty or reversed range [%s, %s)",
				m.StoreID, m.RegionID, hexKey(m.StartKey), hexKey(m.EndKey))
		}
		pos, ok := index[m.RegionID]
		if !ok {
			index[m.RegionID] = int32(len(regions)) //nolint:gosec // G115: len(regions) <= metas.Len() <= maxMetas, checked above
			regionOf[i] = index[m.RegionID]
			regions = append(regions, region{id: m.RegionID, best: int32(i)})
			continue
		}
		regionOf[i] = pos
		if better(m, metas.At(int(regions[pos].best))) {
			regions[pos].best = int32(i)
		}
	}
	for i := range regions {
		b := metas.At(int(regions[i].best))
		regions[i].ver, regions[i].start, regions[i].end = b.Version, b.StartKey, b.EndKey
	}
	return regions, regionOf, nil
}

// sortByStart returns the region positions ordered by start key (ties: region id).
func sortByStart(regions []region) []int32 {
	return sortedPositions(regions, func(a, b *region) int { return bytes.Compare(a.start, b.start) })
}

// sortedPositions returns 0..len(regions)-1 ordered by less, ties broken by region id.
func sortedPositions(regions []region, less func(a, b *region) int) []int32 {
	order := make([]int32, len(regions))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := less(&regions[a], &regions[b]); c != 0 {
			return c
		}
		return cmp.Compare(regions[a].id, regions[b].id)
	})
	return order
}

// resolveOverlaps decides which regions survive: among overlapping regions the one with the
// higher epoch version wins (ties: lower region id, for determinism). Without overlaps — the
// normal case — this is one sort by start key.
func resolveOverlaps(regions []region, order []int32) []bool {
	accepted := make([]bool, len(regions))
	overlap := false
	for i := 1; i < len(order); i++ {
		prev, cur := &regions[order[i-1]], &regions[order[i]]
		if len(prev.end) == 0 || bytes.Compare(cur.start, prev.end) < 0 {
			overlap = true
			break
		}
	}
	if !overlap {
		for i := range accepted {
			accepted[i] = true
		}
		return accepted
	}
	return resolveOverlapsSlow(regions, accepted)
}

// resolveOverlapsSlow handles overlapping regions in O(n log n): keys are compressed to
// elementary segments; regions are taken in version order and accepted when none of their
// segments is covered yet (a Fenwick tree counts covered segments, a next-uncovered pointer
// marks each segment once).
func resolveOverlapsSlow(regions []region, accepted []bool) []bool {
	keys := make([][]byte, 0, 2*len(regions))
	for i := range regions {
		keys = append(keys, regions[i].start)
		if len(regions[i].end) != 0 {
			keys = append(keys, regions[i].end)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	// Segment k is [keys[k], keys[k+1]), the last one ending at +inf; +inf itself is len(keys).
	n := len(keys)
	search := func(k []byte) int {
		return sort.Search(len(keys), func(i int) bool { return bytes.Compare(keys[i], k) >= 0 })
	}

	order := sortedPositions(regions, func(a, b *region) int { return cmp.Compare(b.ver, a.ver) })

	fen := make([]int32, n+1)
	add := func(i int) {
		for i++; i <= n; i += i & -i {
			fen[i]++
		}
	}
	prefix := func(i int) int32 { // covered segments in [0, i)
		var s int32
		for ; i > 0; i -= i & -i {
			s += fen[i]
		}
		return s
	}
	next := make([]int32, n+1) // next[j]: first uncovered segment >= j (path-compressed)
	for i := range next {
		next[i] = int32(i)
	}
	find := func(j int32) int32 {
		for next[j] != j {
			next[j] = next[next[j]]
			j = next[j]
		}
		return j
	}
	for _, ri := range order {
		r := &regions[ri]
		l, h := search(r.start), len(keys)
		if len(r.end) != 0 {
			h = search(r.end)
		}
		if prefix(h)-prefix(l) > 0 {
			continue
		}
		accepted[ri] = true
		for j := find(int32(l)); int(j) < h; j = find(j + 1) { //nolint:gosec // G115: l indexes keys, at most 2*len(regions) <= MaxInt32 (maxMetas)
			add(int(j))
			next[j] = j + 1
		}
	}
	return accepted
}

// ErrKeySpaceNotCovered fails a plan whose surviving regions leave part of the key space to no
// region: the stores' images disagree on which region holds it (a split, merge or replica move
// between two stores' captures), and the restore would lose that range.
var ErrKeySpaceNotCovered = errors.New("the regions do not cover the key space")

// checkCoverage verifies that the surviving regions, in key order, tile ["", +inf) and none is
// a tombstone.
func checkCoverage(metas *Metas, regions []region, order []int32) error {
	if len(order) == 0 {
		return fmt.Errorf("no regions reported")
	}
	var prevEnd []byte
	for k, ri := range order {
		r := &regions[ri]
		if metas.At(int(r.best)).Tombstone {
			return fmt.Errorf("region %d: its best peer (store %d) is a tombstone", r.id, metas.At(int(r.best)).StoreID)
		}
		if k == 0 && len(r.start) != 0 {
			return fmt.Errorf("%w: no region covers [\"\", %s): the first region %d starts there", ErrKeySpaceNotCovered, hexKey(r.start), r.id)
		}
		if k > 0 && !bytes.Equal(r.start, prevEnd) {
			return fmt.Errorf("%w: no region covers [%s, %s): a hole before region %d", ErrKeySpaceNotCovered, hexKey(prevEnd), hexKey(r.start), r.id)
		}
		prevEnd = r.end
	}
	if len(prevEnd) != 0 {
		return fmt.Errorf("%w: no region covers [%s, +inf): the last region %d ends there", ErrKeySpaceNotCovered, hexKey(prevEnd), regions[order[len(order)-1]].id)
	}
	return nil
}

// assignLeaders gives each surviving region's leadership to the least-loaded store among the
// peers that tie with its best one, in key order; every other peer gets a follower entry.
func assignLeaders(metas *Metas, regions []region, regionOf []int32, accepted []bool, order []int32, res *Result) {
	// Candidates per region in compressed-row form: counts, offsets, then store ids.
	offs := make([]int32, len(regions)+1)
	for i := range metas.Len() {
		ri := regionOf[i]
		if accepted[ri] && ties(metas.At(i), metas.At(int(regions[ri].best))) {
			offs[ri+1]++
		}
	}
	for i := 1; i < len(offs); i++ {
		offs[i] += offs[i-1]
	}
	cand := make([]uint64, offs[len(regions)])
	fill := slices.Clone(offs[:len(regions)])
	for i := range metas.Len() {
		m := metas.At(i)
		ri := regionOf[i]
		if !accepted[ri] {
			res.Commands[m.StoreID] = append(res.Commands[m.StoreID], Command{RegionID: m.RegionID, Tombstone: true})
			continue
		}
		if ties(m, metas.At(int(regions[ri].best))) {
			cand[fill[ri]] = m.StoreID
			fill[ri]++
		}
	}

	leader := make([]uint64, len(regions))
	for _, ri := range order {
		var pick uint64
		for _, s := range cand[offs[ri]:offs[ri+1]] {
			if pick == 0 || res.Leaders[s] < res.Leaders[pick] || (res.Leaders[s] == res.Leaders[pick] && s < pick) {
				pick = s
			}
		}
		leader[ri] = pick
		res.Leaders[pick]++
	}
	for i := range metas.Len() {
		m := metas.At(i)
		ri := regionOf[i]
		if !accepted[ri] {
			continue
		}
		res.Commands[m.StoreID] = append(res.Commands[m.StoreID], Command{RegionID: m.RegionID, AsLeader: leader[ri] == m.StoreID})
	}
}

func hexKey(k []byte) string {
	if len(k) == 0 {
		return `""`
	}
	return hex.EncodeToString(k)
}
