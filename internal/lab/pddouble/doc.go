// Package pddouble is the lab's stand-in for a PD server: it serves the real
// pdpb gRPC service and the /pd/api/v1 HTTP endpoints that BR and TiKV use, on
// one address, so that the real PD client library drives it unchanged.
//
// It exists to make the pause/resume half of the backup protocol observable:
// service GC safe points, paused schedulers and TTL'd schedule config really
// expire on the injected clock, and the schedulers really stop handing region
// operators (split, merge, leader transfer) to the TiKV doubles while paused.
// All state lives in one data directory and survives kill -9.
package pddouble
