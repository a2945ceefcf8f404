// Package tidb holds what every BR step needs to know about a TiDB cluster's topology as PD
// reports it.
package tidb

import (
	"context"
	"fmt"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/opt"
)

// StoreLister is the part of PD's client that lists stores; github.com/tikv/pd/client's Client
// satisfies it.
type StoreLister interface {
	GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error)
}

// IsTiFlash says the store is a TiFlash node, which holds no TiKV regions BR must handle.
func IsTiFlash(s *metapb.Store) bool {
	for _, l := range s.GetLabels() {
		if l.GetKey() == "engine" && l.GetValue() == "tiflash" {
			return true
		}
	}
	return false
}

// TiKVStores lists the TiKV stores PD knows, tombstones and TiFlash left out.
func TiKVStores(ctx context.Context, pd StoreLister) ([]*metapb.Store, error) {
	all, err := pd.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return nil, fmt.Errorf("list stores: %w", err)
	}
	var out []*metapb.Store
	for _, s := range all {
		if !IsTiFlash(s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// SameStores reports whether regions a and b have their replicas on the same set of stores
// (a merge needs it; PD's scheduler and the TiKV double both check it).
func SameStores(a, b *metapb.Region) bool {
	if len(a.GetPeers()) != len(b.GetPeers()) {
		return false
	}
	in := map[uint64]bool{}
	for _, p := range a.GetPeers() {
		in[p.GetStoreId()] = true
	}
	for _, p := range b.GetPeers() {
		if !in[p.GetStoreId()] {
			return false
		}
	}
	return true
}
