package tikvdouble_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// TestKeysAreRawOnTheWireAndEncodedInRegions: as with TiKV (API v1, TxnKV), region boundaries
// are memcomparable-encoded in PD and in ReadRegionMeta, while transactional and flashback
// requests carry raw keys that the store encodes before comparing them with its region. A
// client that sends PD's boundaries as keys is refused with key_not_in_region.
func TestKeysAreRawOnTheWireAndEncodedInRegions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Keys sharing their first 8 bytes: an encoded key sent as raw sorts past the region's
	// end, as the bank's account keys do.
	lo, hi := []byte("key0000010"), []byte("key0000020")
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{lo, hi}, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	ts := put(t, ctx, cl, map[string]string{"key0000015": "v"})

	pc, err := pd.NewClientWithContext(ctx, []string{c.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r, err := pc.GetRegion(ctx, codec.EncodeBytes([]byte("key0000015")))
	if err != nil || r == nil {
		t.Fatalf("get region: %v %v", r, err)
	}
	if !bytes.Equal(r.Meta.GetStartKey(), codec.EncodeBytes(lo)) || !bytes.Equal(r.Meta.GetEndKey(), codec.EncodeBytes(hi)) {
		t.Fatalf("PD's region is [%x, %x), want the encoded split keys [%x, %x)", r.Meta.GetStartKey(), r.Meta.GetEndKey(), codec.EncodeBytes(lo), codec.EncodeBytes(hi))
	}
	route, err := cl.Locate(ctx, []byte("key0000015"))
	if err != nil {
		t.Fatal(err)
	}
	rc := &kvrpcpb.Context{RegionId: r.Meta.GetId(), RegionEpoch: r.Meta.GetRegionEpoch(), Peer: route.Region.Leader}

	got, err := route.KV.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc, Key: []byte("key0000015"), Version: ts})
	if err != nil || got.GetRegionError() != nil || string(got.GetValue()) != "v" {
		t.Fatalf("get of a raw key in the region: %v %v", got, err)
	}
	got, err = route.KV.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc, Key: hi, Version: ts})
	if err != nil || got.GetRegionError().GetKeyNotInRegion() == nil {
		t.Fatalf("get of the next region's first key: %v %v, want key_not_in_region", got, err)
	}

	// Flashback with PD's boundaries as they are is refused; with them decoded it is taken.
	prep, err := route.KV.KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{Context: rc,
		StartKey: r.Meta.GetStartKey(), EndKey: r.Meta.GetEndKey(), StartTs: ts + 1, Version: ts})
	if err != nil || prep.GetRegionError().GetKeyNotInRegion() == nil {
		t.Fatalf("prepare flashback with encoded keys: %v %v, want key_not_in_region", prep, err)
	}
	prep, err = route.KV.KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{Context: rc,
		StartKey: lo, EndKey: hi, StartTs: ts + 1, Version: ts})
	if err != nil || prep.GetRegionError() != nil || prep.GetError() != "" {
		t.Fatalf("prepare flashback with raw keys: %v %v", prep, err)
	}

	// A crash image read in recovery mode reports the same encoded boundaries.
	images := t.TempDir()
	if err := c.SnapshotAll(images); err != nil {
		t.Fatal(err)
	}
	rcl, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: images, Stores: 3, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	h := pdhttp.NewClient("test", []string{rcl.PDAddr()})
	defer h.Close()
	if err := h.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rcl.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	reported := 0
	for _, id := range rcl.StoreIDs() {
		for _, m := range readRegionMeta(t, ctx, rcl.Store(id).Addr()) {
			if m.GetRegionId() != r.Meta.GetId() {
				continue
			}
			reported++
			if !bytes.Equal(m.GetStartKey(), codec.EncodeBytes(lo)) || !bytes.Equal(m.GetEndKey(), codec.EncodeBytes(hi)) {
				t.Errorf("store %d reports region %d as [%x, %x), want the encoded split keys", id, m.GetRegionId(), m.GetStartKey(), m.GetEndKey())
			}
		}
	}
	if reported != 3 {
		t.Fatalf("region %d reported by %d stores in recovery mode, want its 3 peers", r.Meta.GetId(), reported)
	}
}
