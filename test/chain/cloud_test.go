package chain

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

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

// backupAndFreshPD takes a backup of the lab's volumes and starts a fresh PD for
// restore-volumes, returning its HTTP client.
func (l *cloudLab) backupAndFreshPD(t *testing.T, ctx context.Context) pdhttp.Client {
	t.Helper()
	if _, err := l.snapshot(t, ctx); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	pdc, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: cloudStores})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdc.Close)
	_, h := pdClients(t, pdc)
	return h
}

// TestRestoreVolumesFailureLeavesZeroVolumes: restore-volumes failing midway (CreateVolume
// becomes unavailable after two volumes were created) deletes what it created.
func TestRestoreVolumesFailureLeavesZeroVolumes(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{})
	h := l.backupAndFreshPD(t, ctx)
	before := len(l.Server.Inventory(nil).Volumes)
	created := func() int { return len(l.Server.Inventory(meta.RestoreTags(restoreID)).Volumes) }
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each CreateVolume takes a moment, so the watcher sees the second volume before the
	// last ones are created.
	slow := map[string]awsdouble.Duration{"CreateVolume": awsdouble.Duration(20 * time.Millisecond)}
	l.Server.SetFaults(awsdouble.Faults{Latency: slow})
	go func() {
		for created() < 2 {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
		l.Server.SetFaults(awsdouble.Faults{Unavailable: []string{"CreateVolume"}, Latency: slow})
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

func inventoryIDs(items []awsdouble.InventoryItem) []string {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

func resultSnapshotIDs(res snapshot.Result) []string {
	ids := make([]string, 0, len(res.Snapshots))
	for _, s := range res.Snapshots {
		ids = append(ids, s.SnapshotID)
	}
	slices.Sort(ids)
	return ids
}

// TestSnapshotUnderEventualConsistencyAndLostAnswers: AWS shows new snapshots only a while
// after their creation and loses the answers of CreateSnapshots calls that ran; the backup
// succeeds with exactly one snapshot per volume, every one recorded, none left over. In the
// second case AWS hides a lost call's set for longer than its 15 s per-volume interval, so the
// resend starts a second set: the step deletes it once the backup completed.
func TestSnapshotUnderEventualConsistencyAndLostAnswers(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name   string
		opts   awsdouble.Options
		drops  int
		strays bool
	}{
		{name: "lost answer found", opts: awsdouble.Options{DescribeDelay: 300 * time.Millisecond}, drops: 2},
		{name: "lost answer found too late", drops: 1, strays: true,
			opts: awsdouble.Options{TimeFactor: 20, DescribeDelay: 30 * time.Second, SnapshotBaseDuration: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			l := newCloudLab(t, ctx, tc.opts)
			l.Server.SetFaults(awsdouble.Faults{DropResponses: map[string]int{"CreateSnapshots": tc.drops}})
			res, err := l.snapshot(t, ctx)
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			inv := l.Server.Inventory(meta.BackupTags(backupID)).Snapshots
			if got, want := inventoryIDs(inv), resultSnapshotIDs(res); len(want) != cloudStores || !slices.Equal(got, want) {
				t.Fatalf("AWS has %v, the backup recorded %v: want exactly the %d recorded", got, want, cloudStores)
			}
			st := l.Server.Stats()
			if st.DroppedResponses != tc.drops || st.Hidden == 0 {
				t.Fatalf("dropped %d answers (want %d), hid %d times (want some): the faults did not happen", st.DroppedResponses, tc.drops, st.Hidden)
			}
			if tc.strays != (len(res.Strays) > 0) {
				t.Fatalf("strays deleted: %v, want some: %v", res.Strays, tc.strays)
			}
			t.Logf("%d answers lost, %d hidden answers, strays deleted %v; calls %v", st.DroppedResponses, st.Hidden, res.Strays, st.Calls)
		})
	}
}

// TestSnapshotErrorAfterPendingFailsStep: a snapshot that was pending for a while turns error
// (AWS failing it after CreateSnapshots returned); the step fails with ErrSnapshotFailed
// naming it, deletes every snapshot of the backup, and writes no backupmeta.
func TestSnapshotErrorAfterPendingFailsStep(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{SnapshotBaseDuration: time.Hour, DescribeDelay: 200 * time.Millisecond})
	cm, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vol := cm.TiKV.Stores[2].Volumes[0].ID
	l.Server.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{vol}, SnapshotErrorAfter: awsdouble.Duration(time.Second)})
	res, err := l.snapshot(t, ctx)
	if !errors.Is(err, cloud.ErrSnapshotFailed) || !strings.Contains(err.Error(), vol) {
		t.Fatalf("err = %v, want ErrSnapshotFailed naming volume %s", err, vol)
	}
	if left := l.Server.Inventory(meta.BackupTags(backupID)).Snapshots; len(left) != 0 {
		t.Fatalf("snapshots of the failed backup left: %+v", left)
	}
	if _, err := l.store.BackupMetaAsIs(ctx); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("backupmeta of the failed backup: %v", err)
	}
	t.Logf("the snapshot failed after pending: %v; deleted %d snapshots", err, len(res.Deleted))
}

// TestSnapshotPerVolumeRateBetweenBackups: a second backup of the same volumes right after
// the first is refused by AWS (SnapshotCreationPerVolumeRateExceeded, 15 s per volume) until
// the interval passed; it waits and succeeds.
func TestSnapshotPerVolumeRateBetweenBackups(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{TimeFactor: 20})
	if _, err := l.snapshot(t, ctx); err != nil {
		t.Fatalf("first backup: %v", err)
	}
	cm, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	second := meta.NewStore(b, nil)
	if err := second.PutClusterMeta(ctx, cm); err != nil {
		t.Fatal(err)
	}
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.Provider, Store: second},
		snapshot.Options{BackupID: backupID + "-2", BackupTS: 451000000000000002, SkipClusterCheck: true, CleanupTimeout: 30 * time.Second, Progress: logWriter{t}})
	if err != nil {
		t.Fatalf("second backup right after the first: %v", err)
	}
	if n := l.Server.Stats().Errors["SnapshotCreationPerVolumeRateExceeded"]; n == 0 {
		t.Fatal("AWS never refused the second backup: the test did not exercise the rule")
	}
	if got := len(l.Server.Inventory(meta.BackupTags(backupID + "-2")).Snapshots); got != cloudStores || len(res.Snapshots) != cloudStores {
		t.Fatalf("second backup: %d snapshots in AWS, %d recorded, want %d", got, len(res.Snapshots), cloudStores)
	}
}

// TestRestoreVolumesUnderEventualConsistencyAndLostAnswers: restore-volumes while AWS shows new
// volumes late and loses CreateVolume answers (the calls ran): exactly one volume per backed-up
// volume, all recorded.
func TestRestoreVolumesUnderEventualConsistencyAndLostAnswers(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	l := newCloudLab(t, ctx, awsdouble.Options{})
	h := l.backupAndFreshPD(t, ctx)
	l.Server.SetFaults(awsdouble.Faults{DescribeDelay: awsdouble.Duration(300 * time.Millisecond), DropResponses: map[string]int{"CreateVolume": 3}})
	res, err := restorevolumes.Run(ctx, l.Provider, cmdrv.PD{Client: h}, l.store,
		restorevolumes.Options{RestoreID: restoreID, TargetAZ: targetAZ, Concurrency: 2, CleanupTimeout: 30 * time.Second, Progress: logWriter{t}})
	if err != nil {
		t.Fatalf("restore-volumes: %v", err)
	}
	var recorded []string
	for _, v := range res.Volumes {
		recorded = append(recorded, v.VolumeID)
	}
	slices.Sort(recorded)
	inv := inventoryIDs(l.Server.Inventory(meta.RestoreTags(restoreID)).Volumes)
	if len(recorded) != cloudStores || !slices.Equal(inv, recorded) {
		t.Fatalf("AWS has %v, the restore recorded %v: want exactly the %d recorded", inv, recorded, cloudStores)
	}
	if st := l.Server.Stats(); st.DroppedResponses != 3 || st.Hidden == 0 {
		t.Fatalf("dropped %d answers (want 3), hid %d times (want some): the faults did not happen", st.DroppedResponses, st.Hidden)
	}
}
