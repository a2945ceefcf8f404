// Package regiononly is the region-only mode of the TiDB doubles, for tests and benchmarks at
// a scale the full doubles cannot hold cheaply (a million regions over a hundred stores): the
// real PD double holds the regions in memory (pddouble.Server.LoadRegions), and each TiKV
// store is a stand-in that holds only which regions it has peers of and which of them it
// leads — no log, no data, no volume. The stores serve the real kvproto gRPC services and
// answer the BR protocol's region-level calls from that:
//
//   - backup.Backup: PrepareSnapshotBackup (the lease; WaitApply answered per region, done
//     when the region's epoch matches and the store leads it, else epoch_not_match or
//     not_leader; Finish) and CheckPendingAdminOp (every led region, no admin operation
//     pending);
//   - recover_data.RecoverData: ReadRegionMeta (one meta per peer, with PD's encoded
//     boundaries; the leader's log is the longest) and RecoverRegion (a planned peer leads at
//     once, and PD is told, as that leader's heartbeat would);
//   - tikvpb.Tikv: KvPrepareFlashbackToVersion and KvFlashbackToVersion on the region's
//     leader, with the raw start key encoded and checked against the region as TiKV does
//     (key_not_in_region), and flashback_not_prepared for a region not prepared.
//
// What region-only stores cannot show — replication, MVCC, crashes — the full doubles
// (pddouble, tikvdouble) do.
package regiononly

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// Config shapes a region-only cluster.
type Config struct {
	// Regions is the number of regions; they tile the key space in key order, region i
	// from raw key fmt("t%08d", i) (the first from the start of the key space) to the next.
	Regions int
	// Stores is the number of TiKV stores (at least 3); region i has peers on stores i, i+1
	// and i+2 (modulo Stores) and is led by one of them in turn.
	Stores int
	// API is the PD double's gRPC surface: pddouble.APIv85 (empty) or pddouble.APIv75.
	API string
	// DataDir is the PD double's data directory.
	DataDir string
	// NotInPD are regions (by index) PD does not know: a hole in PD's view that the stores
	// still hold.
	NotInPD []int
}

// The ids the cluster hands out: region i is FirstRegionID+i, its peers firstPeerID+3i+p.
const (
	FirstRegionID = 1_000_000
	firstPeerID   = 10_000_000
	// epoch of every region.
	confVer, version = 5, 7
)

// Cluster is a PD double in region-only mode and its stores.
type Cluster struct {
	PD      *pddouble.Server
	stores  []*store
	regions []*region

	mu sync.Mutex // guards every region's leader and flashback state
}

// region is one region and what the stores know of it.
type region struct {
	meta   *metapb.Region
	leader int // index into meta.Peers
	// inFlashback and flashedBack are its flashback state; waitApplied counts WaitApply
	// answers that found it applied.
	inFlashback, flashedBack bool
	waitApplied              atomic.Int32
}

// Key is the raw key region i starts at (the first starts at the empty key).
func Key(i int) []byte {
	if i == 0 {
		return []byte{}
	}
	return fmt.Appendf(nil, "t%08d", i)
}

// Start builds the regions, loads them into a fresh PD double and starts the stores.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Stores < 3 || cfg.Regions < 1 {
		return nil, fmt.Errorf("region-only cluster: %d regions over %d stores: want a region and 3 stores at least", cfg.Regions, cfg.Stores)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pd, err := pddouble.Start(ctx, pddouble.Config{DataDir: cfg.DataDir, API: cfg.API}, lis)
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	c := &Cluster{PD: pd, regions: make([]*region, cfg.Regions)}
	for i := range cfg.Stores {
		st, err := c.startStore(uint64(i + 1))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.stores = append(c.stores, st)
	}
	skip := map[int]bool{}
	for _, i := range cfg.NotInPD {
		skip[i] = true
	}
	seeds := make([]pddouble.SeedRegion, 0, cfg.Regions)
	for i := range cfg.Regions {
		meta := &metapb.Region{
			Id:          uint64(FirstRegionID + i),
			StartKey:    codec.EncodeBoundary(Key(i)),
			RegionEpoch: &metapb.RegionEpoch{ConfVer: confVer, Version: version},
		}
		if i+1 < cfg.Regions {
			meta.EndKey = codec.EncodeBoundary(Key(i + 1))
		}
		for p := range 3 {
			s := c.stores[(i+p)%cfg.Stores]
			meta.Peers = append(meta.Peers, &metapb.Peer{Id: uint64(firstPeerID + 3*i + p), StoreId: s.id})
			s.regions = append(s.regions, int32(i))
		}
		r := &region{meta: meta, leader: i % 3}
		c.regions[i] = r
		if !skip[i] {
			seeds = append(seeds, pddouble.SeedRegion{Region: meta, Leader: meta.Peers[r.leader]})
		}
	}
	stores := make([]*metapb.Store, len(c.stores))
	for i, s := range c.stores {
		stores[i] = &metapb.Store{Id: s.id, Address: s.addr(), State: metapb.StoreState_Up, Version: pdVersion(cfg.API)}
	}
	if err := pd.LoadRegions(stores, seeds); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func pdVersion(api string) string {
	if api == pddouble.APIv75 {
		return "7.5.0"
	}
	return "8.5.0"
}

// PDAddr is the PD double's gRPC (and HTTP) address.
func (c *Cluster) PDAddr() string { return c.PD.Addr() }

// Close stops the stores and PD.
func (c *Cluster) Close() {
	for _, s := range c.stores {
		s.grpc.Stop()
	}
	if c.PD != nil {
		_ = c.PD.Close()
	}
}

// NotWaitApplied counts the regions no WaitApply found applied yet.
func (c *Cluster) NotWaitApplied() int {
	n := 0
	for _, r := range c.regions {
		if r.waitApplied.Load() == 0 {
			n++
		}
	}
	return n
}

// NotFlashedBack counts the regions not flashed back yet.
func (c *Cluster) NotFlashedBack() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.regions {
		if !r.flashedBack {
			n++
		}
	}
	return n
}

// byID finds a region by id.
func (c *Cluster) byID(id uint64) *region {
	i := int(id) - FirstRegionID
	if id < FirstRegionID || i >= len(c.regions) {
		return nil
	}
	return c.regions[i]
}

// store is one region-only TiKV store.
type store struct {
	c       *Cluster
	id      uint64
	lis     net.Listener
	grpc    *grpc.Server
	regions []int32 // indexes of the regions it has a peer of, in key order

	leaseMu    sync.Mutex
	leaseUntil int64 // unix nanoseconds
}

func (s *store) addr() string { return s.lis.Addr().String() }

func (c *Cluster) startStore(id uint64) (*store, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// As the TiKV double: gRPC's default limits (4 MiB received), BR's 10 s keepalive pings
	// accepted.
	s := &store{c: c, id: id, lis: lis, grpc: grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}))}
	s.register()
	go func() { _ = s.grpc.Serve(lis) }()
	return s, nil
}

// peerOf is the store's peer of r, or nil.
func (s *store) peerOf(r *region) *metapb.Peer {
	for _, p := range r.meta.GetPeers() {
		if p.GetStoreId() == s.id {
			return p
		}
	}
	return nil
}

var errWrongStore = errors.New("request for another store")

// The scale of the region-only benchmarks: the architecture's target of a million regions over
// a hundred stores.
const (
	BenchRegions = 1_000_000
	BenchStores  = 100
)
