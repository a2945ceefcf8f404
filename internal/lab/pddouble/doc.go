// Package pddouble is the lab's stand-in for a PD server: it serves the real
// pdpb gRPC service and the /pd/api/v1 HTTP endpoints that BR and TiKV use, on
// one address, so that the real PD client library drives it unchanged.
//
// It exists to make the pause/resume half of the backup protocol observable:
// service GC safe points, paused schedulers and TTL'd schedule config really
// expire on the injected clock, and the schedulers really stop handing region
// operators to the TiKV doubles while paused: splits (balance-region and
// region-schedule-limit), merges (merge-schedule-limit), replica moves
// (opt-in with Config.MoveReplicas or ShuffleRegionRate: balance-region adds
// a replica on a less loaded store, optionally shuffling like
// shuffle-region-scheduler; the replica checker removes the excess one once
// the new replica caught up, stopped only by replica-schedule-limit) and
// leader transfers (balance-leader and leader-schedule-limit).
//
// TiDB's GC worker is folded in (gc.go): every Config.GCRunInterval the
// GC safe point moves to the TSO minus Config.GCLifeTime, held back by the
// lowest live service safe point, so a backup that does not pin GC really
// loses history once the TiKV doubles collect. Config.API APIv75 serves
// PD v7.5's gRPC surface, without BatchScanRegions.
//
// Stores are Up, Disconnected after 20 s without a heartbeat and Down after
// max-store-down-time, on the injected clock (HTTP state_name; gRPC clients
// see last_heartbeat). GET /regions, /regions/count, /region/id/{id},
// /stores and /store/{id} answer in the JSON shapes of PD's HTTP client.
//
// All state lives in one data directory and survives kill -9. It is
// rewritten whole (temp file, fsync, rename) within 100 ms of a change that
// matters (a region's shape or leader), at once for what must be durable
// before PD answers (an id batch of 1000, the TSO window, config), and at
// most once a second for soft state (liveness, key counts, resolved ts).
// Heartbeat-driven writes happen outside the server lock, so a slow disk
// does not stall TSO.
package pddouble
