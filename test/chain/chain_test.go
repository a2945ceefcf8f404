package chain

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	cmdrv "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

const (
	chainStores = 9
	backupID    = "bk-chain"
	restoreID   = "rs-chain"
	targetAZ    = "us-west-2b"
)

var chainBank = bank.Config{Accounts: 60, Initial: 100}

// logWriter sends progress lines to t.Logf.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s %s", time.Now().Format("15:04:05.000"), p)
	return len(p), nil
}

// TestBackupRestoreChain is issue 5's "Done when": the bank workload on nine stores, each a
// `fedbr-lab lab tikv` process with two AWS-double volumes (data, and raft log apart, as a TiKV with
// storageVolumes has); pause → snapshot (real CreateSnapshots through the
// provider while transfers go on) → the pause stopped at the "snapshots created" signal →
// restore-volumes into another AZ against a fresh PD → TiKV doubles on the new volumes in
// recovery mode → restore-data → restart → the checker passes at the backup's resolved ts. Every store
// stop is a SIGKILL; a snapshot set that split a store's two volumes would not start.
func TestBackupRestoreChain(t *testing.T) {
	skipShort(t)
	bin := fedbr(t)
	ctx := testContext(t, 3*time.Minute)
	begin := time.Now()
	al := serveAWS(t, awsdouble.Options{SnapshotMBps: 200})
	vols := awsStoreVolumes(t, al.Server, chainStores, true)
	dirs, clusterMeta := vols.data, vols.rec
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: chainStores, StoreDirs: dirs, RaftDirs: vols.raft,
		Binary: bin, CompactBytes: 256 << 10,
		SplitKeys: bank.SplitKeys(chainBank.Accounts, 12), Tick: tick, PD: pddouble.Config{OperatorRate: 0.2}, SlowStore: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	waitPeersEverywhere(t, ctx, c)
	w := startWorkload(t, ctx, c, chainBank)
	pc, h := pdClients(t, c)
	w.waitBefore(t, ctx, h)

	bdir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(bdir, nil)
	if err := store.PutClusterMeta(ctx, clusterMeta); err != nil {
		t.Fatal(err)
	}

	// Backup: pause, then snapshot while the workload goes on.
	p := startPause(t, ctx, c, pause.Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second, RetryBackoff: 100 * time.Millisecond})
	st := p.waitReady(t, ctx)
	t.Logf("pause Ready at backup ts %d after %s", st.BackupTS, time.Since(begin).Round(time.Millisecond))
	w.waitCommits(t, ctx, 3)
	var once sync.Once
	var lifted time.Time
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: al.Provider, Store: store, PD: pc, PDHTTP: snapshot.NewPDHTTP(h), Dial: tidb.Plaintext.DialBackup},
		snapshot.Options{BackupID: backupID, Cluster: "lab", BackupTS: st.BackupTS, CheckInterval: 50 * time.Millisecond,
			StillPaused: func(context.Context, uint64) error {
				if ph := p.phase(); ph != pause.PhaseReady {
					return fmt.Errorf("the pause is %s", ph)
				}
				return nil
			},
			Progress: logWriter{t},
			Report: func(pr snapshot.Progress) {
				if snapshot.PauseMayLift(pr.Phase) {
					once.Do(func() { // "Snapshots started": the pause may be lifted
						lifted = time.Now()
						p.stop()
					})
				}
			}})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	set, _ := p.since(pause.PhaseGCPaused)
	removed, _ := p.since(pause.PhaseStopped)
	t.Logf("pause window (GC safepoint set → removed): %s; stop signalled %s after the safepoint was set, lifted %s after the signal",
		removed.Sub(set).Round(time.Millisecond), lifted.Sub(set).Round(time.Millisecond), removed.Sub(lifted).Round(time.Millisecond))
	if len(res.Snapshots) != 2*chainStores || res.ResolvedTS != st.BackupTS {
		t.Fatalf("snapshot result = %+v", res)
	}
	inv := al.Server.Inventory(meta.BackupTags(backupID)).Snapshots
	if len(inv) != 2*chainStores {
		t.Fatalf("%d snapshots tagged with the backup, want %d", len(inv), 2*chainStores)
	}
	started := map[string]time.Time{} // volume → its snapshot's start
	for _, sn := range inv {
		started[sn.Volume] = sn.Started
	}
	for _, st := range clusterMeta.TiKV.Stores {
		if a, b := started[st.Volumes[0].ID], started[st.Volumes[1].ID]; !a.Equal(b) {
			t.Errorf("store %d's data and raft volumes were snapshotted apart (%s, %s)", st.ID, a, b)
		}
	}
	w.waitAfter(t, ctx, st.BackupTS)
	w.finish()
	txns := w.log.Txns()
	t.Logf("backup ts %d: %d transactions, %+v; backup took %s", st.BackupTS, len(txns), bank.Count(txns, st.BackupTS), time.Since(begin).Round(time.Millisecond))
	for _, id := range c.StoreIDs() {
		c.StopStore(id) // the source cluster is gone; only the snapshots remain
	}

	// Restore: volumes in another AZ, PD marked and its TSO raised by restore-volumes.
	newDirs, newRaft := map[uint64]string{}, map[uint64]string{} // filled from the restoremeta before any store starts
	r := startRestoredPDWith(t, ctx, tidbcluster.Config{Stores: chainStores, StoreDirs: newDirs, RaftDirs: newRaft, Binary: bin})
	rv, err := restorevolumes.Run(ctx, al.Provider, cmdrv.PD{Client: r.h}, store,
		restorevolumes.Options{RestoreID: restoreID, TargetAZ: targetAZ, Concurrency: chainStores, CleanupTimeout: 30 * time.Second, Progress: logWriter{t}})
	if err != nil {
		t.Fatalf("restore-volumes: %v", err)
	}
	for _, v := range rv.Volumes {
		if v.AZ != targetAZ {
			t.Errorf("volume %s restored in %s, want %s", v.VolumeID, v.AZ, targetAZ)
		}
		into, old := newDirs, dirs
		if v.Type == raftEngineType {
			into, old = newRaft, vols.raft
		}
		if into[v.StoreID], err = al.Server.VolumeDir(v.VolumeID); err != nil {
			t.Fatal(err)
		}
		if into[v.StoreID] == old[v.StoreID] {
			t.Fatalf("store %d's %s volume restored onto its old volume", v.StoreID, v.Type)
		}
	}
	if len(newDirs) != chainStores || len(newRaft) != chainStores {
		t.Fatalf("restore-volumes restored %d stores' data volumes and %d raft volumes, want %d: %+v",
			len(newDirs), len(newRaft), chainStores, rv.Volumes)
	}
	if err := r.c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range r.c.StoreIDs() {
		if !r.c.Recovery(id) {
			t.Fatalf("store %d did not start in recovery mode", id)
		}
	}
	rd, err := r.restoreData(t, ctx, st.BackupTS, t.Logf)
	if err != nil {
		t.Fatalf("restore-data: %v", err)
	}
	t.Logf("restore-data: %+v", rd)
	// The Job's next attempt after one that finished (PD's snapshot-recovering mark lifted)
	// and was killed before it reported: it runs the whole phase again, and the data stays
	// exact.
	if rd, err = r.restoreData(t, ctx, st.BackupTS, t.Logf); err != nil {
		t.Fatalf("restore-data run again after it finished: %v", err)
	}
	t.Logf("restore-data again: %+v", rd)
	if err := r.restartAndCheck(t, ctx, chainBank, txns, st.BackupTS); err != nil {
		t.Fatalf("bank check at the backup's resolved ts: %v", err)
	}
	t.Logf("chain done in %s", time.Since(begin).Round(time.Millisecond))
}

// waitPeersEverywhere waits until every store holds a peer: restore-data treats a store that
// reports no region as missing.
func waitPeersEverywhere(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) {
	t.Helper()
	for {
		held := map[uint64]bool{}
		for _, l := range c.PD.Leaders() {
			for _, s := range l.Stores {
				held[s] = true
			}
		}
		empty := 0
		for _, id := range c.StoreIDs() {
			if !held[id] {
				empty++
			}
		}
		if empty == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d stores hold no region", empty)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
