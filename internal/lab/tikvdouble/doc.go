// Package tikvdouble is the lab's stand-in for a TiKV store: one Store per
// process, serving the real kvproto gRPC services (tikvpb.Tikv for
// transactions, flashback and peer replication; backup.Backup for
// PrepareSnapshotBackup; recover_data.RecoverData in recovery mode) and
// talking to the PD double over pdpb like TiKV does.
//
// It exists so that consistency bugs in backup and restore become visible.
// Each region has three peers on different stores and a replicated log
// (term, index); followers persist and apply at their own pace, so the
// on-disk images of three stores captured at different instants disagree the
// way real ones do. Every byte of a store's state is in its data directory
// (the volume), written as append-only checksummed records under the volume
// lock, so a lab snapshot is exactly what a crash at that instant leaves.
package tikvdouble
