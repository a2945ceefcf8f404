package recovery

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/quick"
)

// peer builds a meta; regions are given by start and end key strings ("" end = +inf).
func peer(store, region uint64, term, index, version uint64, start, end string) RegionMeta {
	return RegionMeta{StoreID: store, RegionID: region, PeerID: region*10 + store, LastLogTerm: term,
		LastIndex: index, Version: version, StartKey: []byte(start), EndKey: []byte(end)}
}

// replicated returns the three peers of a region on stores 1-3 with equal logs.
func replicated(region, term, index, version uint64, start, end string) []RegionMeta {
	return []RegionMeta{
		peer(1, region, term, index, version, start, end),
		peer(2, region, term, index, version, start, end),
		peer(3, region, term, index, version, start, end),
	}
}

func concat(parts ...[]RegionMeta) []RegionMeta { return slices.Concat(parts...) }

// leaderOf returns the store told to lead region, failing if there is not exactly one.
func leaderOf(t *testing.T, res Result, region uint64) uint64 {
	t.Helper()
	var leaders []uint64
	for store, cmds := range res.Commands {
		for _, c := range cmds {
			if c.RegionID == region && c.AsLeader {
				leaders = append(leaders, store)
			}
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("region %d has leaders %v, want exactly one", region, leaders)
	}
	return leaders[0]
}

func TestPlan(t *testing.T) {
	stores := []uint64{1, 2, 3}
	tests := []struct {
		name        string
		in          Input
		wantErr     string
		wantLeaders map[uint64]uint64 // region -> store
		wantDropped []uint64
		check       func(t *testing.T, res Result)
	}{
		{
			name: "equal peers: leaders spread over the stores",
			in: Input{Stores: stores, Metas: NewMetas(concat(
				replicated(10, 5, 100, 1, "", "b"), replicated(11, 5, 100, 1, "b", "d"), replicated(12, 5, 100, 1, "d", ""))...)},
			check: func(t *testing.T, res Result) {
				for _, s := range stores {
					if res.Leaders[s] != 1 {
						t.Errorf("store %d leads %d regions, want 1 (%v)", s, res.Leaders[s], res.Leaders)
					}
				}
			},
		},
		{
			name: "highest term wins over a longer log",
			in: Input{Stores: stores, Metas: NewMetas([]RegionMeta{
				peer(1, 10, 6, 90, 1, "", ""), peer(2, 10, 5, 120, 1, "", ""), peer(3, 10, 5, 119, 1, "", "")}...)},
			wantLeaders: map[uint64]uint64{10: 1},
		},
		{
			name: "same term: longest log wins",
			in: Input{Stores: stores, Metas: NewMetas([]RegionMeta{
				peer(1, 10, 5, 99, 1, "", ""), peer(2, 10, 5, 101, 1, "", ""), peer(3, 10, 5, 100, 1, "", "")}...)},
			wantLeaders: map[uint64]uint64{10: 2},
		},
		{
			name: "same term and index: commit index breaks the tie",
			in: Input{Stores: stores, Metas: NewMetas(func() []RegionMeta {
				m := replicated(10, 5, 100, 1, "", "")
				m[2].CommitIndex = 100
				return m
			}()...)},
			wantLeaders: map[uint64]uint64{10: 3},
		},
		{
			name: "huge terms compare as unsigned numbers (upstream's subtraction overflowed)",
			in: Input{Stores: stores, Metas: NewMetas([]RegionMeta{
				peer(1, 10, 1, 5, 1, "", ""), peer(2, 10, math.MaxUint64, 5, 1, "", ""), peer(3, 10, 1<<63, 5, 1, "", "")}...)},
			wantLeaders: map[uint64]uint64{10: 2},
		},
		{
			name: "stale pre-split region loses to the split halves",
			in: Input{Stores: stores, Metas: NewMetas(concat(
				replicated(10, 5, 100, 2, "", "m"), replicated(11, 5, 100, 2, "m", ""),
				[]RegionMeta{peer(2, 9, 7, 300, 1, "", "")})...)}, // old whole-range region left on store 2
			wantDropped: []uint64{9},
			check: func(t *testing.T, res Result) {
				found := false
				for _, c := range res.Commands[2] {
					if c.RegionID == 9 {
						found = true
						if c.AsLeader || !c.Tombstone {
							t.Errorf("dropped region 9 got %+v, want a tombstone follower entry", c)
						}
					}
				}
				if !found {
					t.Error("store 2 got no entry for the dropped region 9")
				}
			},
		},
		{
			name: "merged region wins over its stale halves",
			in: Input{Stores: stores, Metas: NewMetas(concat(
				replicated(20, 5, 100, 3, "", ""),
				[]RegionMeta{peer(1, 21, 5, 100, 2, "", "k"), peer(3, 22, 5, 100, 2, "k", "")})...)},
			wantDropped: []uint64{21, 22},
		},
		{
			name: "hole in the middle is named",
			in: Input{Stores: stores, Metas: NewMetas(concat(
				replicated(10, 5, 100, 1, "", "b"), replicated(11, 5, 100, 1, "c", ""))...)},
			wantErr: "no region covers [62, 63)",
		},
		{
			name:    "hole at the start",
			in:      Input{Stores: stores, Metas: NewMetas(replicated(10, 5, 100, 1, "b", "")...)},
			wantErr: `no region covers ["", 62)`,
		},
		{
			name:    "hole at the end (upstream did not check)",
			in:      Input{Stores: stores, Metas: NewMetas(replicated(10, 5, 100, 1, "", "x")...)},
			wantErr: "no region covers [78, +inf)",
		},
		{
			name: "tombstone best peer",
			in: Input{Stores: stores, Metas: NewMetas(func() []RegionMeta {
				m := replicated(10, 5, 100, 1, "", "")
				m[0].Tombstone, m[0].LastIndex = true, 200
				return m
			}()...)},
			wantErr: "region 10: its best peer (store 1) is a tombstone",
		},
		{
			name:    "a silent store is refused without tolerance",
			in:      Input{Stores: []uint64{1, 2, 3, 4}, Metas: NewMetas(replicated(10, 5, 100, 1, "", "")...)},
			wantErr: "stores [4] did not answer; at most 0 may be missing",
		},
		{
			name: "a store that answered with no region is not missing",
			in:   Input{Stores: []uint64{1, 2, 3, 4}, Reported: []uint64{1, 2, 3, 4}, Metas: NewMetas(replicated(10, 5, 100, 1, "", "")...)},
			check: func(t *testing.T, res Result) {
				if len(res.MissingStores) != 0 {
					t.Errorf("MissingStores = %v, want none", res.MissingStores)
				}
			},
		},
		{
			name: "a silent store is tolerated when asked",
			in:   Input{Stores: []uint64{1, 2, 3, 4}, Metas: NewMetas(replicated(10, 5, 100, 1, "", "")...), MaxMissingStores: 1},
			check: func(t *testing.T, res Result) {
				if !slices.Equal(res.MissingStores, []uint64{4}) {
					t.Errorf("MissingStores = %v", res.MissingStores)
				}
			},
		},
		{
			name:    "a report from an unknown store is refused",
			in:      Input{Stores: []uint64{1, 2}, Metas: NewMetas(replicated(10, 5, 100, 1, "", "")...)},
			wantErr: "store 3 reported region 10 but is not one of the 2 expected stores",
		},
		{
			name:    "a reversed range is refused",
			in:      Input{Stores: stores, Metas: NewMetas(replicated(10, 5, 100, 1, "z", "a")...)},
			wantErr: "store 1 reported region 10 with empty or reversed range [7a, 61)",
		},
		{
			name:    "no metas at all",
			in:      Input{Stores: stores, MaxMissingStores: 3},
			wantErr: "no regions reported",
		},
		{
			name: "MaxAllocID covers store, region and peer ids",
			in: Input{Stores: []uint64{1, 2, 3, 500}, MaxMissingStores: 1, Metas: NewMetas(func() []RegionMeta {
				m := replicated(10, 5, 100, 1, "", "")
				m[1].PeerID = 9000
				return m
			}()...)},
			check: func(t *testing.T, res Result) {
				if res.MaxAllocID != 9000 {
					t.Errorf("MaxAllocID = %d, want 9000", res.MaxAllocID)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Plan(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				if hole := strings.Contains(tc.wantErr, "no region covers"); hole != errors.Is(err, ErrKeySpaceNotCovered) {
					t.Fatalf("error = %v: errors.Is(ErrKeySpaceNotCovered) = %v, want %v", err, !hole, hole)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for region, store := range tc.wantLeaders {
				if got := leaderOf(t, res, region); got != store {
					t.Errorf("region %d led by store %d, want %d", region, got, store)
				}
			}
			if tc.wantDropped != nil && !slices.Equal(res.Dropped, tc.wantDropped) {
				t.Errorf("Dropped = %v, want %v", res.Dropped, tc.wantDropped)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// TestPlanIsDeterministic: the same reports in any order give the same plan.
func TestPlanIsDeterministic(t *testing.T) {
	metas := synthetic(rand.New(rand.NewPCG(1, 2)), 2000, 7)
	want, err := Plan(Input{Stores: storeIDs(7), Metas: NewMetas(metas...)})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(5) {
		shuffled := slices.Clone(metas)
		rand.New(rand.NewPCG(seed, 9)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := Plan(Input{Stores: storeIDs(7), Metas: NewMetas(shuffled...)})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("plan differs for shuffle %d", seed)
		}
	}
	// Balanced: with all peers tied, leader counts differ by at most one.
	tied := synthetic(rand.New(rand.NewPCG(3, 4)), 2000, 7)
	for i := range tied {
		tied[i].LastIndex = 1000
		tied[i].LastLogTerm = 5
	}
	balanced, err := Plan(Input{Stores: storeIDs(7), Metas: NewMetas(tied...)})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := math.MaxInt, 0
	for _, n := range balanced.Leaders {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Errorf("leaders unbalanced: %v", balanced.Leaders)
	}
}

// naiveAccept is the obvious O(n²) overlap resolution the fast one must agree with.
func naiveAccept(regions []region) []bool {
	order := make([]int, len(regions))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if regions[a].ver != regions[b].ver {
			if regions[a].ver > regions[b].ver {
				return -1
			}
			return 1
		}
		if regions[a].id < regions[b].id {
			return -1
		}
		return 1
	})
	accepted := make([]bool, len(regions))
	overlaps := func(a, b *region) bool {
		return startBeforeEnd(a.start, b.end) && startBeforeEnd(b.start, a.end)
	}
	for _, i := range order {
		ok := true
		for j := range regions {
			if accepted[j] && overlaps(&regions[i], &regions[j]) {
				ok = false
				break
			}
		}
		accepted[i] = ok
	}
	return accepted
}

func TestResolveOverlapsAgreesWithNaive(t *testing.T) {
	f := func(seed uint64, n uint8) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		regions := make([]region, int(n%40)+1)
		for i := range regions {
			a, b := r.IntN(20), r.IntN(21)
			if b <= a {
				b = 20 // +inf
			}
			end := []byte(nil)
			if b < 20 {
				end = []byte{byte('a' + b)}
			}
			start := []byte{}
			if a > 0 {
				start = []byte{byte('a' + a)}
			}
			regions[i] = region{id: uint64(i + 1), ver: uint64(r.IntN(5)), start: start, end: end}
		}
		got := resolveOverlaps(regions, sortByStart(regions))
		want := naiveAccept(regions)
		if !slices.Equal(got, want) {
			t.Logf("regions %v: got %v want %v", regions, got, want)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 3000}); err != nil {
		t.Fatal(err)
	}
}

func storeIDs(n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	return ids
}

// synthetic builds n regions tiling the key space with 3 peers each on random distinct stores;
// followers lag the leader by a little, and a tenth of the regions have two tied peers.
func synthetic(r *rand.Rand, n, stores int) []RegionMeta {
	metas := make([]RegionMeta, 0, 3*n)
	key := func(i int) []byte {
		if i == 0 {
			return []byte{}
		}
		return fmt.Appendf(nil, "t%08d_r", i)
	}
	for i := range n {
		start, end := key(i), key(i+1)
		if i == n-1 {
			end = nil
		}
		perm := r.Perm(stores)[:3]
		term, index := uint64(5+r.IntN(3)), uint64(1000+r.IntN(1000))
		for p, s := range perm {
			lag := uint64(p)
			if p == 1 && i%10 == 0 {
				lag = 0
			}
			metas = append(metas, RegionMeta{StoreID: uint64(s + 1), RegionID: uint64(i + 1000), PeerID: uint64(3*i + p + 5000),
				LastLogTerm: term, LastIndex: index - lag, Version: 7, StartKey: start, EndKey: end})
		}
	}
	return metas
}

// BenchmarkPlan1MRegions is the architecture's target: 1 M regions × 3 peers on 100 stores in
// under 2 s and 1 GiB.
func BenchmarkPlan1MRegions(b *testing.B) {
	const regions = 1_000_000
	metas := synthetic(rand.New(rand.NewPCG(7, 7)), regions, 100)
	in := Input{Stores: storeIDs(100), Metas: NewMetas(metas...)}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Plan(in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/regions, "ns/region")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/regions, "bytes/region")
}

// BenchmarkPlanOverlapping measures the slow path: every tenth region has a stale pre-split twin.
func BenchmarkPlanOverlapping(b *testing.B) {
	metas := synthetic(rand.New(rand.NewPCG(7, 8)), 200_000, 100)
	for i := 0; i+1 < 200_000; i += 10 {
		stale := metas[3*i]
		stale.RegionID, stale.StoreID, stale.Version, stale.LastLogTerm = uint64(10_000_000+i), metas[3*i].StoreID, 1, 99
		stale.EndKey = metas[3*(i+1)].EndKey
		metas = append(metas, stale)
	}
	in := Input{Stores: storeIDs(100), Metas: NewMetas(metas...)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Plan(in); err != nil {
			b.Fatal(err)
		}
	}
}
