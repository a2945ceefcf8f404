package chain

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	cmdrv "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
)

const cloudStores = 6

// cloudLab is the AWS double with one instance per store, each data volume holding a little
// data, and the backup's storage holding their clustermeta.
type cloudLab struct {
	awsdoubletest.Lab
	dir   string
	store *meta.Store
}

func newCloudLab(t *testing.T, ctx context.Context, opts awsdouble.Options) *cloudLab {
	t.Helper()
	l := &cloudLab{Lab: serveAWS(t, opts), dir: t.TempDir()}
	dirs, rec := awsVolumes(t, l.Server, cloudStores)
	for id, d := range dirs {
		if err := volumelock.NewWriter(d).Append("wal", []byte(filepath.Base(d))); err != nil {
			t.Fatalf("store %d: %v", id, err)
		}
	}
	b, err := blob.NewDir(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	l.store = meta.NewStore(b, nil)
	if err := l.store.PutClusterMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return l
}

// snapshot runs the snapshot engine at a fixed backup ts (the pause is not under test here).
func (l *cloudLab) snapshot(t *testing.T, ctx context.Context) (snapshot.Result, error) {
	t.Helper()
	return snapshot.Run(ctx, snapshot.Deps{Cloud: l.Provider, Store: l.store},
		snapshot.Options{BackupID: backupID, BackupTS: 451000000000000001, SkipClusterCheck: true, CleanupTimeout: 30 * time.Second, Progress: logWriter{t}})
}

// TestThrottlingStormDuringSnapshot: with half of all AWS calls throttled, the snapshot
// succeeds without surfacing an error; the provider's retries absorb the storm.
func TestThrottlingStormDuringSnapshot(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{})
	l.Server.SetFaults(awsdouble.Faults{Throttle: 0.5})
	start := time.Now()
	res, err := l.snapshot(t, ctx)
	if err != nil {
		t.Fatalf("snapshot under a throttling storm: %v", err)
	}
	inv := l.Server.Inventory(meta.BackupTags(backupID))
	if len(res.Snapshots) != cloudStores || len(inv.Snapshots) != cloudStores {
		t.Fatalf("result %d snapshots, %d tagged in the double, want %d", len(res.Snapshots), len(inv.Snapshots), cloudStores)
	}
	for _, s := range inv.Snapshots {
		if s.State != "completed" {
			t.Errorf("snapshot %s is %s", s.ID, s.State)
		}
	}
	st := l.Server.Stats()
	if st.InjectedThrottles == 0 {
		t.Fatal("no call was throttled: the storm did not happen")
	}
	t.Logf("snapshot of %d volumes under a 50%% throttling storm: %d throttles absorbed, %s; calls %v", cloudStores, st.InjectedThrottles, time.Since(start).Round(time.Millisecond), st.Calls)
}

// TestSnapshotErrorFailsFast: one snapshot going to the error state fails the backup at once
// (the others would take an hour) and leaves no snapshot of the backup behind.
func TestSnapshotErrorFailsFast(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{SnapshotBaseDuration: time.Hour})
	cm, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Server.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{cm.TiKV.Stores[3].Volumes[0].ID}})
	start := time.Now()
	res, err := l.snapshot(t, ctx)
	if !errors.Is(err, cloud.ErrSnapshotFailed) {
		t.Fatalf("err = %v, want ErrSnapshotFailed", err)
	}
	if left := l.Server.Inventory(meta.BackupTags(backupID)).Snapshots; len(left) != 0 {
		t.Fatalf("snapshots of the failed backup left: %+v", left)
	}
	if _, err := l.store.BackupMetaAsIs(ctx); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("backupmeta of the failed backup: %v", err)
	}
	t.Logf("snapshot error failed the backup in %s; deleted %d snapshots, 0 left", time.Since(start).Round(time.Millisecond), len(res.Deleted))
}

// TestRestoreVolumesFailureLeavesZeroVolumes: restore-volumes failing midway (CreateVolume
// becomes unavailable after two volumes were created) deletes what it created.
func TestRestoreVolumesFailureLeavesZeroVolumes(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{})
	if _, err := l.snapshot(t, ctx); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	pdc, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: cloudStores})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdc.Close)
	_, h := pdClients(t, pdc)
	before := len(l.Server.Inventory(nil).Volumes)
	created := func() int { return len(l.Server.Inventory(meta.RestoreTags(restoreID)).Volumes) }
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for created() < 2 {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
		l.Server.SetFaults(awsdouble.Faults{Unavailable: []string{"CreateVolume"}})
	}()
	start := time.Now()
	res, err := restorevolumes.Run(ctx, l.Provider, cmdrv.PD{Client: h}, l.store,
		restorevolumes.Options{RestoreID: restoreID, TargetAZ: targetAZ, Concurrency: 1, CleanupTimeout: 30 * time.Second, Progress: logWriter{t}})
	cancel()
	if err == nil {
		t.Fatal("restore-volumes succeeded although CreateVolume was unavailable")
	}
	if len(res.Deleted) < 2 || len(res.Deleted) >= cloudStores {
		t.Errorf("deleted %v, want the volumes created before the failure", res.Deleted)
	}
	if _, err := l.store.RestoreMeta(ctx, restoreID); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("restoremeta of a failed restore: %v", err)
	}
	inv := l.Server.Inventory(nil)
	if n := len(l.Server.Inventory(meta.RestoreTags(restoreID)).Volumes); n != 0 || len(inv.Volumes) != before {
		t.Fatalf("%d volumes of the restore left; %d volumes now, %d before", n, len(inv.Volumes), before)
	}
	t.Logf("restore-volumes failed after %s (%v); deleted %d volumes, 0 left", time.Since(start).Round(time.Millisecond), err, len(res.Deleted))
}
