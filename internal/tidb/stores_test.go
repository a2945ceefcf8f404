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
