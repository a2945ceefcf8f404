package tikvdouble

import (
	"errors"
	"fmt"
)

// ErrFlashbackNotLatest is the assertion real TiKV trips when a flashback's commit ts is
// below a key's latest commit (src/storage/txn/actions/flashback_to_version.rs,
// flashback_to_version_read_write: "There is no any other write could happen after the
// flashback begins"). TiKV's panic hook then ends the process, and its pod restarts it.
var ErrFlashbackNotLatest = errors.New("assertion failed: latest_commit_ts <= flashback_commit_ts")

// ErrRecoverRegionRecv is the crash of a store whose RecoverRegion stream ended with an error
// before the client's half-close: TiKV unwraps every request it reads from that stream
// (components/snap_recovery/src/services.rs, recover_region: "rpc recv fail"), so a cancelled
// or killed restore-data panics the store mid-send.
var ErrRecoverRegionRecv = errors.New("rpc recv fail: RecoverRegion's stream ended with an error")

// crash ends the store the way a panicking TiKV ends: it logs err, records it for Crashed
// and CrashError, and stops at once as kill -9 would (Close; nothing acknowledged is lost).
// A `fedbr-lab lab tikv` process then exits non-zero.
func (s *Store) crash(err error) {
	s.crashOnce.Do(func() {
		s.log.Error("Store crashed", "err", err)
		s.mu.Lock()
		s.crashErr = err
		s.mu.Unlock()
		close(s.crashed)
		go func() { _ = s.Close() }()
	})
}

// Crashed is closed once the store crashed (CrashError says why).
func (s *Store) Crashed() <-chan struct{} { return s.crashed }

// CrashError is why the store crashed, or nil while it has not.
func (s *Store) CrashError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crashErr
}

// checkFlashbackLocked is TiKV's assertion in the flashback's read phase, on the leader: no
// key of [start, end) may have a put or delete committed after commitTS. It returns the
// crash error for the first key that has one, or nil.
func (s *Store) checkFlashbackLocked(start, end []byte, commitTS uint64) error {
	for _, k := range s.kv.rangeKeys(start, end) {
		if v := s.kv.keys[k].visible(^uint64(0)); v != nil && v.CommitTS > commitTS {
			return fmt.Errorf("%w: key %q has latest commit ts %d, the flashback's commit ts is %d",
				ErrFlashbackNotLatest, decode([]byte(k)), v.CommitTS, commitTS)
		}
	}
	return nil
}

// ErrClusterIDMismatch refuses a start in normal mode on a volume of another cluster than
// PD's: TiKV's check_store (src/server/node.rs; raft_server.rs in v8.5) compares the cluster id of the store's
// StoreIdent with PD's and refuses to start, so its pod restarts it again and again.
var ErrClusterIDMismatch = errors.New("cluster ID mismatch")

// adoptClusterID checks the volume's cluster id against PD's, or records PD's: on a volume
// that has none yet (a new store, as TiKV writes its StoreIdent when it bootstraps), and in
// recovery mode, where TiKV rewrites the StoreIdent's cluster id to PD's before it starts
// (components/snap_recovery/src/init_cluster.rs, start_recovery and set_cluster_id).
func (s *Store) adoptClusterID() error {
	switch {
	case s.volumeCluster == s.clusterID:
		return nil
	case s.volumeCluster != 0 && !s.recovery:
		return fmt.Errorf("store %d: %w: the volume's %d, PD's %d (a volume of another cluster, started before PD was marked snapshot-recovering?)",
			s.cfg.StoreID, ErrClusterIDMismatch, s.volumeCluster, s.clusterID)
	}
	if s.volumeCluster != 0 {
		s.log.Info("Recovery mode: the volume now belongs to PD's cluster", "was", s.volumeCluster, "cluster", s.clusterID)
	}
	if err := s.wal.append([]record{{Kind: "ident", ClusterID: s.clusterID}}); err != nil {
		return fmt.Errorf("store %d: record the cluster id: %w", s.cfg.StoreID, err)
	}
	s.volumeCluster = s.clusterID
	return nil
}
