// Package tikvdouble is the lab's stand-in for a TiKV store: one Store per
// process, serving the real kvproto gRPC services (tikvpb.Tikv for
// transactions, flashback and peer replication; backup.Backup for
// PrepareSnapshotBackup; import_sstpb.ImportSST for SuspendImportRPC;
// recover_data.RecoverData in recovery mode) and talking to the PD double
// over pdpb like TiKV does.
//
// It exists so that consistency bugs in backup and restore become visible.
// Each region has three peers on different stores and a replicated log
// (term, index); followers persist and apply at their own pace, so the
// on-disk images of three stores captured at different instants disagree the
// way real ones do. Every byte of a store's state is in its data directory
// (the volume), written as append-only checksummed records under the volume
// lock, so a lab snapshot is exactly what a crash at that instant leaves.
//
// Regions change shape on PD's say, through admin commands in the region's
// log, as in TiKV's raftstore:
//   - Split: both halves' epoch versions grow; the new region's peers sit on
//     the parent's stores, each starts empty at term 0 when its store applies
//     the split, and the new region's leader is elected (the parent leader's
//     store campaigns at once and repeats its vote requests every tick).
//   - Merge: PrepareMerge on the source (version and conf_ver grow; the source
//     then refuses every request with ProposalInMergingMode, and new commands
//     already once the PrepareMerge is in its log: CommitMerge catches a
//     lagging source replica up only to the PrepareMerge), CommitMerge on
//     the target (its range grows over the source's, version becomes
//     max(source, target)+1, the local source replica is caught up from the
//     entries the command carries and destroyed), or RollbackMerge when the
//     target changed meanwhile. The store holding the target's leader drives
//     the commit, so a prepared merge also completes in recovery mode.
//   - Peer move: ChangePeer adds a voter on a new store, which starts
//     uninitialized (in memory only, invisible to ReadRegionMeta) until the
//     leader's raft snapshot of the region's MVCC data arrives; a later
//     ChangePeer removes a follower, which destroys itself and its data when
//     it applies its removal, or when a current member answers its stale
//     messages with a tombstone. Each change grows conf_ver.
//   - Leader transfer.
//
// In recovery mode (PD's snapshot-recovering mark set when the store
// started) no peer elects on its own. Only the regions RecoverRegion names
// campaign, by ordinary vote without pre-vote, again every election timeout
// until they win (TiKV's LeaderKeeper); raft's vote rule keeps a peer whose
// log is behind a quorum's from winning, so a wrong plan stalls instead of
// overwriting committed entries, as with TiKV.
//
// While a PrepareSnapshotBackup lease holds, Split, PrepareMerge, ChangePeer
// and TransferLeader are refused (CommitMerge and RollbackMerge are not, so
// merges in flight finish); HoldMerges, Isolate and Close (kill -9) are the
// fault injections tests use.
package tikvdouble
