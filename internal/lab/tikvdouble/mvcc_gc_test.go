package tikvdouble

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
)

// history is one key's records, newest first, as TiKV's GC test lays them
// out: put@10, put@20, delete@30, put@40 and a rollback@55, plus an older
// rollback@8.
func history() []version {
	return []version{
		{CommitTS: 55, StartTS: 55, Kind: kindRollback},
		{CommitTS: 40, StartTS: 35, Kind: kindPut, Value: []byte("x35")},
		{CommitTS: 30, StartTS: 25, Kind: kindDelete},
		{CommitTS: 20, StartTS: 15, Kind: kindPut, Value: []byte("x15")},
		{CommitTS: 10, StartTS: 5, Kind: kindPut, Value: []byte("x5")},
		{CommitTS: 8, StartTS: 8, Kind: kindRollback},
	}
}

func TestGCKeepsNewestPutAtOrBelowSafePoint(t *testing.T) {
	for _, tc := range []struct {
		safePoint uint64
		keep      []uint64 // commit ts of the records left
	}{
		{0, []uint64{55, 40, 30, 20, 10, 8}},
		{7, []uint64{55, 40, 30, 20, 10, 8}},
		{8, []uint64{55, 40, 30, 20, 10}},  // a rollback at the safe point goes
		{12, []uint64{55, 40, 30, 20, 10}}, // put@10 is the newest at or below: kept
		{20, []uint64{55, 40, 30, 20}},     // put@20 at the safe point is kept, older goes
		{29, []uint64{55, 40, 30, 20}},
		{30, []uint64{55, 40}}, // the newest at or below is a delete: it goes too
		{45, []uint64{55, 40}},
		{55, []uint64{40}}, // rollbacks at or below go, the put stays
		{1 << 40, []uint64{40}},
	} {
		m := &mvccKey{Versions: history()}
		n := m.gc(tc.safePoint)
		var got []uint64
		for _, v := range m.Versions {
			got = append(got, v.CommitTS)
		}
		if !reflect.DeepEqual(got, tc.keep) || n != len(history())-len(tc.keep) {
			t.Errorf("gc at %d kept %v (dropped %d), want %v", tc.safePoint, got, n, tc.keep)
		}
	}
}

func TestGCDropsEmptyKeysButNotLocks(t *testing.T) {
	s := newKVStore()
	s.getOrCreate([]byte("deleted")).Versions = []version{{CommitTS: 20, StartTS: 19, Kind: kindDelete}, {CommitTS: 10, StartTS: 9, Kind: kindPut, Value: []byte("v")}}
	locked := s.getOrCreate([]byte("locked"))
	locked.Versions = []version{{CommitTS: 10, StartTS: 9, Kind: kindRollback}}
	locked.Lock = &lock{Primary: []byte("locked"), StartTS: 5, Op: kvrpcpb.Op_Put, Value: []byte("w")}
	s.getOrCreate([]byte("live")).Versions = []version{{CommitTS: 10, StartTS: 9, Kind: kindPut, Value: []byte("v")}}
	if n := s.gc(30); n != 3 {
		t.Fatalf("gc dropped %d records, want 3", n)
	}
	if !reflect.DeepEqual(s.sorted, []string{"live", "locked"}) || s.get([]byte("deleted")) != nil {
		t.Fatalf("keys after gc: %v", s.sorted)
	}
	if l := s.get([]byte("locked")).Lock; l == nil || l.StartTS != 5 {
		t.Fatalf("gc touched a lock: %+v", l)
	}
}

// TestGCPreservesReadsAtOrAboveSafePoint compares, over random histories,
// every read at or above the safe point before and after GC (GC must be
// invisible there), and checks that at most one record (a put) is left at
// or below the safe point.
func TestGCPreservesReadsAtOrAboveSafePoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{kindPut, kindDelete, kindRollback}
	for range 5000 {
		m := &mvccKey{}
		ts := uint64(0)
		for range rng.IntN(8) {
			ts += 1 + uint64(rng.IntN(3))
			m.addVersion(version{CommitTS: ts, StartTS: ts, Kind: kinds[rng.IntN(3)], Value: []byte{byte(ts)}})
		}
		sp := uint64(rng.IntN(int(ts) + 2))
		before := &mvccKey{Versions: append([]version(nil), m.Versions...)}
		m.gc(sp)
		for read := sp; read <= ts+1; read++ {
			a, b := before.visible(read), m.visible(read)
			collectedDelete := a != nil && a.Kind == kindDelete && b == nil // a delete reads as nothing
			if (a == nil) != (b == nil) && !collectedDelete {
				t.Fatalf("history %v, gc at %d: read at %d was %+v, is %+v", before.Versions, sp, read, a, b)
			}
			if a != nil && b != nil && (a.Kind != b.Kind || a.CommitTS != b.CommitTS) {
				t.Fatalf("history %v, gc at %d: read at %d was %+v, is %+v", before.Versions, sp, read, a, b)
			}
		}
		below := 0
		for _, v := range m.Versions {
			if v.CommitTS <= sp {
				below++
				if v.Kind != kindPut {
					t.Fatalf("history %v, gc at %d left %+v", before.Versions, sp, v)
				}
			}
		}
		if below > 1 {
			t.Fatalf("history %v, gc at %d left %d records at or below it: %v", before.Versions, sp, below, m.Versions)
		}
	}
}
