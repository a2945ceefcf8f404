// Package pause holds a TiDB cluster still for a volume-snapshot backup and keeps it held until
// told to stop: it pins a GC service safepoint at the backup timestamp, takes a
// PrepareSnapshotBackup lease on every TiKV (which refuses splits, merges and other admin
// operations while it holds) and waits until every region has applied its log, and then pauses
// PD's schedulers and scheduling limits. Every piece is TTL-bound: stopping lifts everything at
// once, and a killed process lets everything lapse within one TTL.
package pause

import (
	"context"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/opt"

	"github.com/fedbr/fedbr/internal/tidb"
)

// PD is what pausing needs of PD's gRPC API; github.com/tikv/pd/client's Client satisfies it.
type PD interface {
	GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error)
	tidb.RegionPD
	tidb.GCReader
}

// PDHTTP is what pausing needs of PD's HTTP API; github.com/tikv/pd/client/http's Client
// satisfies it.
type PDHTTP interface {
	GetMinResolvedTSByStoresIDs(ctx context.Context, storeIDs []uint64) (uint64, map[uint64]uint64, error)
	SchedulePD
}

// SchedulePD is what pausing PD's scheduling needs of its HTTP API: the schedulers and the
// schedule config.
type SchedulePD interface {
	GetSchedulers(ctx context.Context) ([]string, error)
	SetSchedulerDelay(ctx context.Context, name string, delaySeconds int64) error
	GetScheduleConfig(ctx context.Context) (map[string]any, error)
	SetConfig(ctx context.Context, config map[string]any, ttlSecond ...float64) error
}
