package tidb

import (
	"context"
	"errors"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/opt"
)

type lister struct {
	stores []*metapb.Store
	err    error
}

func (l lister) GetAllStores(context.Context, ...opt.GetStoreOption) ([]*metapb.Store, error) {
	return l.stores, l.err
}

func TestTiKVStoresLeavesTiFlashOut(t *testing.T) {
	flash := &metapb.Store{Id: 2, Labels: []*metapb.StoreLabel{{Key: "engine", Value: "tiflash"}}}
	kv := &metapb.Store{Id: 1, Labels: []*metapb.StoreLabel{{Key: "zone", Value: "a"}}}
	got, err := TiKVStores(context.Background(), lister{stores: []*metapb.Store{kv, flash}})
	if err != nil || len(got) != 1 || got[0].GetId() != 1 {
		t.Fatalf("TiKVStores = %v, %v", got, err)
	}
	if _, err := TiKVStores(context.Background(), lister{err: errors.New("down")}); err == nil {
		t.Fatal("a PD error was swallowed")
	}
}

func TestSameStores(t *testing.T) {
	region := func(stores ...uint64) *metapb.Region {
		r := &metapb.Region{}
		for i, s := range stores {
			r.Peers = append(r.Peers, &metapb.Peer{Id: uint64(100 + i), StoreId: s})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		a, b *metapb.Region
		want bool
	}{
		{"same stores, other order and peer ids", region(1, 2, 3), region(3, 1, 2), true},
		{"one store differs", region(1, 2, 3), region(1, 2, 4), false},
		{"a replica more", region(1, 2), region(1, 2, 3), false},
		{"no replicas", region(), region(), true},
	} {
		if got := SameStores(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: SameStores = %v, want %v", tc.name, got, tc.want)
		}
	}
}
