package pause

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/gogo/protobuf/proto"
	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/metapb"
)

func ref(id uint64, ver uint64, start, end string, leader uint64) regionRef {
	return regionRef{ID: id, ConfVer: 1, Version: ver, Start: []byte(start), End: []byte(end), LeaderStore: leader}
}

func rng(start, end string) keyRange { return keyRange{Start: []byte(start), End: []byte(end)} }

func TestWaitApplyAllSucceed(t *testing.T) {
	w := newWaitApply(3)
	ranges, err := w.Start()
	if err != nil || len(ranges) != 1 || len(ranges[0].Start) != 0 || len(ranges[0].End) != 0 {
		t.Fatalf("Start = %v, %v; want the whole key space", ranges, err)
	}
	regions := []regionRef{ref(1, 1, "", "b", 1), ref(2, 1, "b", "m", 2), ref(3, 1, "m", "", 1)}
	byStore := w.Send(regions)
	if len(byStore[1]) != 2 || len(byStore[2]) != 1 {
		t.Fatalf("grouping by leader = %v", byStore)
	}
	for _, r := range regions {
		if !w.Done(r, false) {
			t.Fatalf("Done(%d) treated as stale", r.ID)
		}
	}
	if !w.Idle() {
		t.Fatal("not idle after every region reported")
	}
	next, err := w.Next()
	if err != nil || next != nil {
		t.Fatalf("Next = %v, %v; want prepared", next, err)
	}
}

func TestWaitApplyRetriesFailedAndStale(t *testing.T) {
	w := newWaitApply(5)
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Send([]regionRef{ref(1, 1, "", "b", 1), ref(2, 1, "b", "m", 2), ref(3, 1, "m", "", 3)})
	w.Done(ref(1, 1, "", "b", 1), false)
	// Region 2 split meanwhile: an answer with the new epoch is stale and ignored.
	if w.Done(ref(2, 2, "b", "f", 2), false) {
		t.Fatal("an answer with another epoch was accepted")
	}
	if w.Idle() {
		t.Fatal("idle while region 2 is still in flight")
	}
	w.Done(ref(2, 1, "b", "m", 2), true) // epoch_not_match
	w.Done(ref(3, 1, "m", "", 3), false)
	if !w.HasFailures() {
		t.Fatal("failure not recorded")
	}
	next, err := w.Next()
	if err != nil || !reflect.DeepEqual(next, []keyRange{rng("b", "m")}) {
		t.Fatalf("Next = %v, %v; want [b, m)", next, err)
	}
	// PD now has the split halves.
	w.Send([]regionRef{ref(2, 2, "b", "f", 2), ref(4, 2, "f", "m", 1)})
	w.Done(ref(2, 2, "b", "f", 2), false)
	w.Done(ref(4, 2, "f", "m", 1), false)
	if next, err := w.Next(); err != nil || next != nil {
		t.Fatalf("Next = %v, %v; want prepared", next, err)
	}
}

func TestWaitApplyFindsHoles(t *testing.T) {
	w := newWaitApply(5)
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	// PD's scan missed [c, d) (a region being created) and the tail.
	w.Send([]regionRef{ref(1, 1, "", "c", 1), ref(2, 1, "d", "x", 1)})
	w.Done(ref(1, 1, "", "c", 1), false)
	w.Done(ref(2, 1, "d", "x", 1), false)
	next, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := []keyRange{rng("c", "d"), {Start: []byte("x")}}
	if !reflect.DeepEqual(next, want) {
		t.Fatalf("holes = %v, want %v", describeRanges(next), describeRanges(want))
	}
}

func TestWaitApplyGivesUp(t *testing.T) {
	w := newWaitApply(2)
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for round := 0; ; round++ {
		w.Send([]regionRef{ref(1, uint64(round+1), "", "", 1)})
		w.Done(ref(1, uint64(round+1), "", "", 1), true)
		_, err := w.Next()
		if err != nil {
			if !strings.Contains(err.Error(), "did not cover [, +inf) after 2 rounds") {
				t.Fatalf("error = %v", err)
			}
			return
		}
		if round > 3 {
			t.Fatal("never gave up")
		}
	}
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]keyRange{rng("m", "p"), rng("a", "c"), rng("b", "d"), rng("d", "e"), {Start: []byte("o")}, rng("x", "z")})
	want := []keyRange{rng("a", "e"), {Start: []byte("m")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mergeRanges = %v, want %v", describeRanges(got), describeRanges(want))
	}
}

func TestWaitApplyRetriesLeaderlessRegionsAfterBackoff(t *testing.T) {
	w := newWaitApply(5)
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Send([]regionRef{ref(1, 1, "", "b", 1)})
	w.Later(rng("b", "")) // PD knows no leader for [b, +inf) yet
	w.Done(ref(1, 1, "", "b", 1), false)
	if !w.HasFailures() {
		t.Fatal("a leaderless range must make the driver back off")
	}
	next, err := w.Next()
	if err != nil || !reflect.DeepEqual(next, []keyRange{rng("b", "")}) {
		t.Fatalf("Next = %v, %v", describeRanges(next), err)
	}
}

func TestWaitApplyRequestsSplitAtLimit(t *testing.T) {
	region := func(id uint64, keyLen int) *metapb.Region {
		return &metapb.Region{Id: id, StartKey: bytes.Repeat([]byte{'a'}, keyLen), EndKey: bytes.Repeat([]byte{'b'}, keyLen),
			RegionEpoch: &metapb.RegionEpoch{ConfVer: 5, Version: id},
			Peers:       []*metapb.Peer{{Id: id*10 + 1, StoreId: 1}, {Id: id*10 + 2, StoreId: 2}, {Id: id*10 + 3, StoreId: 3}}}
	}
	many := func(n, keyLen int) []*metapb.Region {
		out := make([]*metapb.Region, n)
		for i := range out {
			out[i] = region(uint64(i+1), keyLen)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		regions []*metapb.Region
		limit   int
		minReqs int
	}{
		{"one region", many(1, 10), maxWaitApplyBytes, 1},
		{"under the limit", many(1000, 50), maxWaitApplyBytes, 1},
		{"100k regions", many(100_000, 60), maxWaitApplyBytes, 10},
		{"long keys", many(5000, 4096), maxWaitApplyBytes, 20},
		{"a region over the limit goes alone", []*metapb.Region{region(1, 10), region(2, 2000), region(3, 10)}, 1000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := waitApplyRequests(tc.regions, tc.limit)
			if len(reqs) < tc.minReqs {
				t.Errorf("%d requests, want at least %d", len(reqs), tc.minReqs)
			}
			var got []*metapb.Region
			for i, r := range reqs {
				if r.GetTy() != brpb.PrepareSnapshotBackupRequestType_WaitApply || len(r.GetRegions()) == 0 {
					t.Fatalf("request %d: %v with %d regions", i, r.GetTy(), len(r.GetRegions()))
				}
				if n := proto.Size(r); n > tc.limit && len(r.GetRegions()) > 1 {
					t.Errorf("request %d is %d bytes encoded (%d regions), over the limit %d", i, n, len(r.GetRegions()), tc.limit)
				}
				got = append(got, r.GetRegions()...)
			}
			if len(got) != len(tc.regions) {
				t.Fatalf("%d regions sent, want %d", len(got), len(tc.regions))
			}
			for i := range got {
				if got[i] != tc.regions[i] {
					t.Fatalf("region %d out of order or lost", i)
				}
			}
		})
	}
}
