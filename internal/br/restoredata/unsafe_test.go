package restoredata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"

	"github.com/fedbr/fedbr/internal/recovery"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

func TestWorstLeadersMovesEveryLeaderToTheShortestLog(t *testing.T) {
	metas := []recovery.RegionMeta{
		{StoreID: 1, RegionID: 10, LastLogTerm: 5, LastIndex: 90, Version: 2, EndKey: []byte("m")},
		{StoreID: 2, RegionID: 10, LastLogTerm: 5, LastIndex: 70, Version: 2, EndKey: []byte("m")},
		{StoreID: 3, RegionID: 10, LastLogTerm: 5, LastIndex: 80, Version: 2, EndKey: []byte("m")},
		{StoreID: 1, RegionID: 20, LastLogTerm: 5, LastIndex: 40, Version: 2, StartKey: []byte("m")},
		{StoreID: 2, RegionID: 20, LastLogTerm: 5, LastIndex: 50, Version: 2, StartKey: []byte("m")},
	}
	plan, err := recovery.Plan(recovery.Input{Stores: []uint64{1, 2, 3}, Metas: recovery.NewMetas(metas...)})
	if err != nil {
		t.Fatal(err)
	}
	got := worstLeaders(plan, recovery.NewMetas(metas...))
	leaders := map[uint64]uint64{}
	for store, cmds := range got.Commands {
		for _, c := range cmds {
			if c.AsLeader {
				if _, dup := leaders[c.RegionID]; dup {
					t.Fatalf("region %d has two leaders: %v", c.RegionID, got.Commands)
				}
				leaders[c.RegionID] = store
			}
		}
	}
	if want := map[uint64]uint64{10: 2, 20: 1}; !reflect.DeepEqual(leaders, want) {
		t.Fatalf("leaders %v, want %v (the planner chose %v)", leaders, want, plan.Commands)
	}
	if want := map[uint64]int{2: 1, 1: 1}; !reflect.DeepEqual(got.Leaders, want) {
		t.Fatalf("leader counts %v, want %v", got.Leaders, want)
	}
}

func TestRawRegionsDecodesPDsBoundaries(t *testing.T) {
	pdRegion := func(start, end []byte) *router.Region {
		return &router.Region{Meta: &metapb.Region{Id: 7, StartKey: start, EndKey: end}}
	}
	r := &run{}
	in := pdRegion(codec.EncodeBytes([]byte("acct000015")), nil)
	got, err := r.rawRegions([]*router.Region{in})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Meta.GetStartKey(), []byte("acct000015")) || len(got[0].Meta.GetEndKey()) != 0 {
		t.Fatalf("decoded [%q, %q), want [acct000015, +inf)", got[0].Meta.GetStartKey(), got[0].Meta.GetEndKey())
	}
	if !bytes.Equal(in.Meta.GetStartKey(), codec.EncodeBytes([]byte("acct000015"))) {
		t.Fatal("the PD client's region was changed")
	}
	if _, err := r.rawRegions([]*router.Region{pdRegion([]byte("acct000015"), nil)}); !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("a raw boundary from PD: %v, want codec.ErrInvalid", err)
	}
	r.cfg.Unsafe.EncodedKeys = true
	got, err = r.rawRegions([]*router.Region{in})
	if err != nil || !bytes.Equal(got[0].Meta.GetStartKey(), in.Meta.GetStartKey()) {
		t.Fatalf("the EncodedKeys control decoded the boundaries: %v %v", got, err)
	}
}
