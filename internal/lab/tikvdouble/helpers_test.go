package tikvdouble

import (
	"encoding/json"

	"github.com/pingcap/kvproto/pkg/metapb"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func region3(id uint64) *metapb.Region {
	return &metapb.Region{Id: id, RegionEpoch: &metapb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: []*metapb.Peer{
		{Id: id*10 + 1, StoreId: 1}, {Id: id*10 + 2, StoreId: 2}, {Id: id*10 + 3, StoreId: 3}}}
}
