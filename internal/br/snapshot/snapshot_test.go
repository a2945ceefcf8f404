package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	brpb "github.com/pingcap/kvproto/pkg/brpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

const backupID = "bk-1"

type lab struct {
	srv   *awsdouble.Server
	p     *aws.Provider
	store *meta.Store
	// extra is a volume attached to store 1's instance that is not TiKV's; instance0 is that
	// instance and endpoint the double's URL.
	extra, instance0, endpoint string
	// dirs are the TiKV volumes' data directories by volume id.
	dirs map[string]string
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newLab serves the AWS double with one instance per store (data and raft volumes, plus an
// unrelated volume on store 1's instance) and writes the clustermeta of those stores.
func newLab(t *testing.T, stores int, faults awsdouble.Faults) *lab {
	t.Helper()
	al := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	srv, p := al.Server, al.Provider
	srv.SetFaults(faults)
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{srv: srv, p: p, store: meta.NewStore(d, nil), endpoint: al.Endpoint, dirs: map[string]string{}}
	rec := &meta.Record{TiKV: meta.TiKV{Replicas: stores}, PD: meta.Component{Replicas: 1}}
	for i := range stores {
		vols := []awsdouble.VolumeSpec{
			{Device: "/dev/xvdb", SizeGiB: 20, Tags: map[string]string{"CSIVolumeName": fmt.Sprintf("pvc-%d", i)}},
			{Device: "/dev/xvdc", SizeGiB: 10},
		}
		if i == 0 {
			vols = append(vols, awsdouble.VolumeSpec{Device: "/dev/xvdd", SizeGiB: 5})
		}
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: vols})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			l.extra, l.instance0 = in.Volumes[2].ID, in.ID
		}
		l.dirs[in.Volumes[0].ID], l.dirs[in.Volumes[1].ID] = in.Volumes[0].Dir, in.Volumes[1].Dir
		rec.TiKV.Stores = append(rec.TiKV.Stores, meta.TiKVStore{ID: uint64(i + 1), Volumes: []meta.Volume{
			{ID: in.Volumes[0].ID, Type: meta.DataDirType, MountPath: "/var/lib/tikv"},
			{ID: in.Volumes[1].ID, Type: "raft-engine.dir", MountPath: "/var/lib/raft"},
		}})
	}
	if err := l.store.PutClusterMeta(testContext(t), rec); err != nil {
		t.Fatal(err)
	}
	return l
}

// tagged lists the snapshots carrying the backup's identity.
func (l *lab) tagged() []awsdouble.InventoryItem {
	return l.srv.Inventory(meta.BackupTags(backupID)).Snapshots
}

// startCluster runs a three-store TiDB double.
func startCluster(t *testing.T) snapshot.Deps {
	t.Helper()
	ctx := testContext(t)
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("m")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	pc, err := pd.NewClientWithContext(context.Background(), []string{c.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	t.Cleanup(hc.Close)
	return snapshot.Deps{PD: pc, PDHTTP: snapshot.NewPDHTTP(hc), Dial: tidb.Plaintext.DialBackup}
}

// TestSnapshot: with the cluster settled, every listed volume gets exactly one snapshot, one
// crash-consistent set per instance (the instance's other volume excluded), tagged with the
// backup and store identity on top of the source volume's tags; the backupmeta is written
// pending before the wait and completed after it, with PD's resolved ts and version.
func TestSnapshot(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 3, awsdouble.Faults{})
	d := startCluster(t)
	d.Cloud, d.Store = l.p, l.store
	var progress bytes.Buffer
	var mu sync.Mutex
	var phases []string
	backupTS := map[string]uint64{} // the backup ts each phase reported last
	pendingSeen, pauseAsked := false, false
	startedSeen := -1   // snapshots existing when Started was reported
	markedPending := -1 // snapshots marked pending while backupmeta was pending
	owner := &meta.Owner{Cluster: "3c5d3f0e-kube-system-uid", Namespace: "tidb"}
	manifests := []string{"manifests/tidb/TidbMonitor/mon.yaml", "manifests/tidb/TidbCluster/basic.yaml"}
	o := snapshot.Options{BackupID: backupID, Cluster: "east", Owner: owner, Manifests: manifests, Progress: &progress, CheckInterval: 50 * time.Millisecond,
		StillPaused: func(context.Context, uint64) error {
			mu.Lock()
			defer mu.Unlock()
			pauseAsked = true
			return nil
		},
		Report: func(p snapshot.Progress) {
			mu.Lock()
			defer mu.Unlock()
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
			backupTS[p.Phase] = p.BackupTS
			if p.Phase == snapshot.PhaseStarted && startedSeen < 0 {
				if !pauseAsked {
					t.Error("Started reported before the pause was confirmed to hold")
				}
				startedSeen = len(l.srv.Inventory(nil).Snapshots)
			}
			if p.Phase == snapshot.PhaseWaiting && !pendingSeen {
				rec, err := l.store.BackupMetaAsIs(ctx)
				pendingSeen = err == nil && rec.Pending()
				markedPending = len(l.srv.Inventory(meta.PendingBackupTags(owner)).Snapshots)
			}
		}}
	res, err := snapshot.Run(ctx, d, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !pendingSeen {
		t.Error("backupmeta was not written pending before the wait")
	}
	if markedPending != 6 {
		t.Errorf("%d snapshots were tagged %s=%s while the backup was pending, want 6", markedPending, meta.TagBackupPending, owner)
	}
	if left := l.srv.Inventory(map[string]string{meta.TagBackupPending: owner.String()}).Snapshots; len(left) != 0 {
		t.Errorf("the completed backup's snapshots are still marked pending: %v", left)
	}
	if want := []string{snapshot.PhaseChecking, snapshot.PhaseStarting, snapshot.PhaseStarted, snapshot.PhaseWaiting, snapshot.PhaseCompleted}; !slices.Equal(phases, want) {
		t.Errorf("phases = %v, want %v", phases, want)
	}
	if startedSeen != 6 {
		t.Errorf("%d snapshots existed when Started was reported, want all 6", startedSeen)
	}
	if res.Resumed || len(res.Snapshots) != 6 || res.SizeGiB != 90 || res.ResolvedTS == 0 || res.ClusterVersion != "8.5.0" {
		t.Fatalf("result = %+v", res)
	}
	for _, ph := range []string{snapshot.PhaseStarting, snapshot.PhaseStarted, snapshot.PhaseWaiting, snapshot.PhaseCompleted} {
		if backupTS[ph] != res.ResolvedTS {
			t.Errorf("phase %s reported backup ts %d, want %d", ph, backupTS[ph], res.ResolvedTS)
		}
	}
	rec, err := l.store.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci := rec.ClusterInfo; ci.ResolvedTS != res.ResolvedTS || ci.Version != "8.5.0" || ci.FullBackupType != meta.FullBackupTypeEBS {
		t.Errorf("cluster_info = %+v", ci)
	}
	if e := rec.Fedbr; e.BackupID != backupID || e.Cluster != "east" || e.Snapshots != meta.SnapshotsCompleted {
		t.Errorf("fedbr = %+v", e)
	}
	if got, want := rec.Fedbr.Manifests, slices.Sorted(slices.Values(manifests)); !slices.Equal(got, want) {
		t.Errorf("fedbr.manifests = %v, want %v", got, want)
	}
	snaps, err := l.p.DescribeSnapshots(ctx, rec.SnapshotIDs())
	if err != nil || len(snaps) != 6 {
		t.Fatalf("snapshots = %v, %v", snaps, err)
	}
	byID := map[string]cloud.Snapshot{}
	for _, s := range snaps {
		byID[s.ID] = s
	}
	for _, st := range rec.TiKV.Stores {
		if st.InstanceID == "" {
			t.Errorf("store %d: no instance recorded", st.ID)
		}
		started := map[string]bool{}
		for _, v := range st.Volumes {
			s := byID[v.SnapshotID]
			if s.VolumeID != v.ID || s.State != cloud.SnapshotCompleted || v.AZ != "us-west-2a" || v.MountPath == "" {
				t.Errorf("store %d volume %+v: snapshot %+v", st.ID, v, s)
			}
			if s.Tags[meta.TagBackup] != backupID || s.Tags[snapshot.TagStore] != fmt.Sprint(st.ID) {
				t.Errorf("snapshot %s tags = %v", s.ID, s.Tags)
			}
			if v.Type == meta.DataDirType && s.Tags["CSIVolumeName"] == "" {
				t.Errorf("snapshot %s did not copy its volume's tags: %v", s.ID, s.Tags)
			}
			started[s.Started.String()] = true
		}
		if len(started) != 1 {
			t.Errorf("store %d: snapshots started at %v, want one set", st.ID, started)
		}
	}
	if n := len(l.tagged()); n != 6 {
		t.Errorf("%d snapshots tagged with the backup, want 6", n)
	}
	for _, s := range l.srv.Inventory(nil).Snapshots {
		if byID[s.ID].ID == "" {
			t.Errorf("unexpected snapshot %+v (the unrelated volume %s must be excluded)", s, l.extra)
		}
	}
	if !strings.Contains(progress.String(), "6 of 6 completed") {
		t.Errorf("progress lines:\n%s", progress.String())
	}

	// A re-run after completion takes nothing new.
	again, err := snapshot.Run(ctx, d, o)
	if err != nil || !again.Resumed || len(again.Snapshots) != 6 || again.ResolvedTS != res.ResolvedTS {
		t.Fatalf("re-run = %+v, %v", again, err)
	}
	if n := len(l.tagged()); n != 6 {
		t.Errorf("after a re-run %d snapshots are tagged, want 6", n)
	}
}

// TestSnapshotErrorCleansUp: a snapshot going to the error state fails the backup at once,
// and every snapshot of the attempt plus its pending backupmeta are deleted.
func TestSnapshotErrorCleansUp(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 3, awsdouble.Faults{})
	cm, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Store 1's data volume holds 3 blocks, store 2's raft volume 2; store 3's raft volume's
	// snapshot fails 3 s after its start, the others complete within a few tens of ms.
	for id, blocks := range map[string]int{cm.TiKV.Stores[0].Volumes[0].ID: 3, cm.TiKV.Stores[1].Volumes[1].ID: 2} {
		if err := volumelock.NewWriter(l.dirs[id]).Append("data", bytes.Repeat([]byte{0x5a}, blocks*awsdouble.BlockSize)); err != nil {
			t.Fatal(err)
		}
	}
	l.srv.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{cm.TiKV.Stores[2].Volumes[1].ID}, SnapshotErrorAfter: awsdouble.Duration(3 * time.Second)})
	var progress bytes.Buffer
	var failed []snapshot.Progress
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store},
		snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true, Progress: &progress,
			Report: func(p snapshot.Progress) {
				if p.Phase == snapshot.PhaseFailed {
					failed = append(failed, p)
				}
			}})
	if !errors.Is(err, cloud.ErrSnapshotFailed) {
		t.Fatalf("err = %v, want ErrSnapshotFailed\n%s", err, progress.String())
	}
	if len(res.Deleted) != 6 {
		t.Errorf("deleted = %v, want the 6 snapshots", res.Deleted)
	}
	if left := l.srv.Inventory(nil).Snapshots; len(left) != 0 {
		t.Errorf("snapshots left: %+v", left)
	}
	if _, err := l.store.BackupMetaAsIs(ctx); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("backupmeta after the failure: %v, want it removed", err)
	}
	if !strings.Contains(progress.String(), "Deleted 6 snapshots") {
		t.Errorf("progress lines:\n%s", progress.String())
	}
	// What it had snapshotted was measured before the deletion: the 5 completed snapshots,
	// 5 blocks in all; the failed one is not sized. The Failed report carries it.
	if fs := res.FailedSize; fs == nil || fs.Snapshots != 6 || fs.Sized != 5 || fs.FullBytes != 5*awsdouble.BlockSize {
		t.Errorf("failed size = %+v, want 5 of 6 snapshots sized, %d bytes", fs, 5*awsdouble.BlockSize)
	}
	if len(failed) != 1 || failed[0].Sized != 5 || failed[0].SizedBytes != 5*awsdouble.BlockSize || failed[0].Error == "" {
		t.Errorf("Failed reports = %+v, want one with the error, 5 sized, %d bytes", failed, 5*awsdouble.BlockSize)
	}
	if sized, deleting := strings.Index(progress.String(), "Sized before deleting: 5 of the 6"), strings.Index(progress.String(), "Deleting the 6 snapshots"); sized < 0 || deleting < sized {
		t.Errorf("want the size measured before the deletion:\n%s", progress.String())
	}
}

// TestStoppedStepDeletesWithoutSizing: a step stopped by a signal (its context cancelled)
// deletes its snapshots at once and measures nothing.
func TestStoppedStepDeletesWithoutSizing(t *testing.T) {
	l := newLab(t, 1, awsdouble.Faults{})
	cm, err := l.store.ClusterMeta(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	// The first snapshot fails only after a while: the step waits, and is stopped meanwhile.
	l.srv.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{cm.TiKV.Stores[0].Volumes[1].ID}, SnapshotErrorAfter: awsdouble.Duration(time.Hour)})
	ctx, cancel := context.WithCancel(testContext(t))
	var progress bytes.Buffer
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store},
		snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true, Progress: &progress,
			Report: func(p snapshot.Progress) {
				if p.Phase == snapshot.PhaseWaiting {
					cancel()
				}
			}})
	if err == nil {
		t.Fatal("a stopped step succeeded")
	}
	if res.FailedSize != nil || len(res.Deleted) != 2 || !strings.Contains(progress.String(), "Stopped: deleting the snapshots without sizing them") {
		t.Errorf("failed size %+v, deleted %v, want none measured and both deleted:\n%s", res.FailedSize, res.Deleted, progress.String())
	}
}

// stuck is the provider with a wait that fails and deletions that fail: an attempt killed
// after it recorded its snapshots.
type stuck struct {
	*aws.Provider
}

var errKilled = errors.New("killed")

func (stuck) WaitSnapshots(context.Context, []string, func(cloud.Progress)) ([]cloud.Snapshot, error) {
	return nil, errKilled
}

func (stuck) DeleteSnapshots(context.Context, []string) error { return errKilled }

// TestRetryResumesRecordedSnapshots: an attempt that recorded its snapshots and died is
// resumed by the retry, which waits for the same snapshots instead of taking new ones.
func TestRetryResumesRecordedSnapshots(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	o := snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true}
	if _, err := snapshot.Run(ctx, snapshot.Deps{Cloud: stuck{l.p}, Store: l.store}, o); !errors.Is(err, errKilled) {
		t.Fatalf("first attempt: %v", err)
	}
	first, err := l.store.BackupMetaAsIs(ctx)
	if err != nil || !first.Pending() {
		t.Fatalf("first attempt left %+v, %v; want a pending backupmeta", first, err)
	}
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, o)
	if err != nil || !res.Resumed {
		t.Fatalf("retry = %+v, %v", res, err)
	}
	rec, err := l.store.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.SnapshotIDs(), first.SnapshotIDs()) {
		t.Errorf("snapshots %v, want the first attempt's %v", rec.SnapshotIDs(), first.SnapshotIDs())
	}
	if n := len(l.tagged()); n != 4 {
		t.Errorf("%d snapshots tagged, want 4", n)
	}
}

// sweepAfterDescribe holds the step's first ListSnapshots (the sweep of an earlier attempt)
// until the volumes were described: a preparation that made its calls one after another
// would never describe them.
type sweepAfterDescribe struct {
	*aws.Provider
	described chan struct{}
	once      sync.Once
	gated     atomic.Bool
}

func (c *sweepAfterDescribe) ListSnapshots(ctx context.Context, tags map[string]string) ([]cloud.Snapshot, error) {
	if c.gated.CompareAndSwap(false, true) {
		select {
		case <-c.described:
		case <-ctx.Done():
			return nil, fmt.Errorf("the sweep waited for the volumes to be described: %w", ctx.Err())
		}
	}
	return c.Provider.ListSnapshots(ctx, tags)
}

func (c *sweepAfterDescribe) DescribeVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error) {
	c.once.Do(func() { close(c.described) })
	return c.Provider.DescribeVolumes(ctx, ids)
}

// TestPreparationCallsAtOnce: the sweep of an earlier attempt's snapshots and the description
// of the volumes to snapshot go out at once; neither waits for the other's answer.
func TestPreparationCallsAtOnce(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	c := &sweepAfterDescribe{Provider: l.p, described: make(chan struct{})}
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: c, Store: l.store}, snapshot.Options{BackupID: "b-at-once", BackupTS: 42, SkipClusterCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Snapshots) == 0 || !c.gated.Load() {
		t.Errorf("%d snapshots, sweep gated %v; want the backup taken after both calls", len(res.Snapshots), c.gated.Load())
	}
}

// TestRetrySweepsUnrecordedSnapshots: snapshots an attempt started but never recorded have
// an unknown timestamp; the retry deletes them and takes one fresh set, never two.
func TestRetrySweepsUnrecordedSnapshots(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	cm, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vols, err := l.p.DescribeVolumes(ctx, []string{cm.TiKV.Stores[0].Volumes[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: vols[0].Attachments[0].InstanceID,
		VolumeIDs: []string{cm.TiKV.Stores[0].Volumes[0].ID, cm.TiKV.Stores[0].Volumes[1].ID}, Tags: meta.BackupTags(backupID)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swept) != 2 {
		t.Errorf("swept = %v, want the 2 orphans", res.Swept)
	}
	tagged := l.tagged()
	if len(tagged) != 4 {
		t.Fatalf("%d snapshots tagged, want 4: %+v", len(tagged), tagged)
	}
	for _, s := range tagged {
		if s.ID == orphans[0].ID || s.ID == orphans[1].ID {
			t.Errorf("orphan %s survived", s.ID)
		}
	}
}

// TestOtherBackupMetaIsRefused: a prefix holding another backup's backupmeta is never
// written to.
func TestOtherBackupMetaIsRefused(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 1, awsdouble.Faults{})
	o := snapshot.Options{BackupID: "other", BackupTS: 42, SkipClusterCheck: true}
	if _, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, o); err != nil {
		t.Fatal(err)
	}
	o.BackupID = backupID
	_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, o)
	if !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("err = %v, want ErrExists naming the other backup", err)
	}
	if n := len(l.tagged()); n != 0 {
		t.Errorf("%d snapshots taken for the refused backup", n)
	}
}

// staleTS is a PD whose min-resolved-ts is not kept in real time.
type staleTS struct{}

func (staleTS) ClusterVersion(context.Context) (string, error) { return "8.5.0", nil }

func (staleTS) MinResolvedTS(context.Context) (snapshot.ResolvedTS, error) {
	return snapshot.ResolvedTS{TS: 123}, nil
}

// TestMinResolvedTSNotRealTimeFromPD: a PD whose min-resolved-ts persistence is off answers
// is_real_time false (absent, as PD's omitempty field); through the real PD HTTP client the
// step refuses it and takes no snapshot.
func TestMinResolvedTSNotRealTimeFromPD(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 1, awsdouble.Faults{})
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3,
		PD: pddouble.Config{MinResolvedTSPersistenceInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	t.Cleanup(hc.Close)
	_, err = snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store, PDHTTP: snapshot.NewPDHTTP(hc)},
		snapshot.Options{BackupID: backupID, SkipClusterCheck: true})
	if err == nil || !strings.Contains(err.Error(), "is not real-time (is_real_time=false)") {
		t.Fatalf("err = %v, want a not-real-time error", err)
	}
	if n := len(l.srv.Inventory(nil).Snapshots); n != 0 {
		t.Errorf("%d snapshots taken", n)
	}
}

// TestMinResolvedTSNotRealTime: a min-resolved-ts PD does not keep in real time is no
// backup ts; the step says so and takes no snapshot.
func TestMinResolvedTSNotRealTime(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 1, awsdouble.Faults{})
	_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store, PDHTTP: staleTS{}},
		snapshot.Options{BackupID: backupID, SkipClusterCheck: true})
	if err == nil || !strings.Contains(err.Error(), "not real-time") {
		t.Fatalf("err = %v, want a not-real-time error", err)
	}
	if n := len(l.srv.Inventory(nil).Snapshots); n != 0 {
		t.Errorf("%d snapshots taken", n)
	}
}

// TestPauseGoneBeforeAnySnapshot: a pause that no longer holds when the backup ts arrived
// fails the step before any CreateSnapshots.
func TestPauseGoneBeforeAnySnapshot(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	var failed []snapshot.Progress
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true,
		Report: failedReports(&failed),
		StillPaused: func(_ context.Context, ts uint64) error {
			if ts != 42 {
				t.Errorf("asked whether the pause holds ts %d, want the step's backup ts 42", ts)
			}
			return tidb.ErrPauseGone
		}})
	if !errors.Is(err, tidb.ErrPauseGone) || !strings.Contains(err.Error(), "no snapshot was started") {
		t.Fatalf("err = %v, want the pause's error before any snapshot", err)
	}
	if n := len(l.srv.Inventory(nil).Snapshots); n != 0 || len(res.Deleted) != 0 {
		t.Errorf("%d snapshots exist, %v deleted: want none started", n, res.Deleted)
	}
	if len(failed) != 1 || !failed[0].Settled {
		t.Errorf("Failed reports %+v, want one saying settled: no CreateSnapshots was sent", failed)
	}
}

// failedReports collects the Failed reports into *failed.
func failedReports(failed *[]snapshot.Progress) func(snapshot.Progress) {
	return func(p snapshot.Progress) {
		if p.Phase == snapshot.PhaseFailed {
			*failed = append(*failed, p)
		}
	}
}

// TestPauseBrokeBeforeRecording: when the pause no longer holds once the snapshots started,
// they are not recorded but deleted; every call was answered and every snapshot deleted, so
// the Failed report says none can appear later (settled).
func TestPauseBrokeBeforeRecording(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	broke := errors.New("the pause is Failed, not Ready")
	var lifted []string
	var failed []snapshot.Progress
	asked := 0
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true,
		StillPaused: func(context.Context, uint64) error {
			if asked++; asked == 1 {
				return nil // held before the first snapshot
			}
			return broke
		},
		Report: func(p snapshot.Progress) {
			if snapshot.PauseMayLift(p.Phase) {
				lifted = append(lifted, p.Phase)
			}
			failedReports(&failed)(p)
		}})
	if !errors.Is(err, broke) {
		t.Fatalf("err = %v, want the pause's error", err)
	}
	if len(lifted) != 0 {
		t.Errorf("reported %v (the pause may be lifted) although the pause broke", lifted)
	}
	if len(res.Deleted) != 4 || len(l.srv.Inventory(nil).Snapshots) != 0 {
		t.Errorf("deleted %v; left %+v", res.Deleted, l.srv.Inventory(nil).Snapshots)
	}
	if _, err := l.store.BackupMetaAsIs(ctx); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("backupmeta: %v, want none", err)
	}
	if len(failed) != 1 || !failed[0].Settled {
		t.Errorf("Failed reports %+v, want one saying settled", failed)
	}
}

// TestUnsettledFailures: a failed step whose snapshots might still appear says so (Settled
// false): a CreateSnapshots whose answer was lost before the set was found, a start that
// failed, snapshots it could not delete, an earlier attempt's snapshots swept.
func TestUnsettledFailures(t *testing.T) {
	broke := errors.New("the pause is Failed, not Ready")
	for _, tc := range []struct {
		name   string
		faults awsdouble.Faults
		cloud  func(*lab) snapshot.Cloud
		before func(t *testing.T, l *lab)
	}{
		{name: "answer lost", faults: awsdouble.Faults{DropResponses: map[string]int{"CreateSnapshots": 1}}},
		{name: "start failed", faults: awsdouble.Faults{Unavailable: []string{"CreateSnapshots"}}},
		{name: "delete failed", cloud: func(l *lab) snapshot.Cloud { return undeletable{l.p} }},
		{name: "earlier attempt swept", before: func(t *testing.T, l *lab) {
			in, err := l.p.DescribeInstance(testContext(t), l.instance0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.p.SnapshotInstance(testContext(t), cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{l.extra}, Tags: meta.BackupTags(backupID)}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t, 2, awsdouble.Faults{})
			if tc.before != nil {
				tc.before(t, l)
			}
			l.srv.SetFaults(tc.faults)
			var p snapshot.Cloud = l.p
			if tc.cloud != nil {
				p = tc.cloud(l)
			}
			var failed []snapshot.Progress
			asked := 0
			_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: p, Store: l.store}, snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true,
				Report: failedReports(&failed),
				StillPaused: func(context.Context, uint64) error {
					if asked++; asked == 1 {
						return nil
					}
					return broke
				}})
			if err == nil {
				t.Fatal("the step succeeded")
			}
			if len(failed) != 1 || failed[0].Settled {
				t.Errorf("Failed reports %+v (err %v), want one not settled", failed, err)
			}
		})
	}
}

// undeletable is the provider whose deletions fail.
type undeletable struct {
	*aws.Provider
}

func (undeletable) DeleteSnapshots(context.Context, []string) error { return errKilled }

// failingMeta fails every write of backupmeta.
type failingMeta struct{ blob.Store }

var errMetaWrite = errors.New("storage refused the write")

func (f failingMeta) Put(ctx context.Context, key string, data []byte) error {
	if key == meta.BackupMetaKey {
		return errMetaWrite
	}
	return f.Store.Put(ctx, key, data)
}

// TestRecordingFailsAfterStarted: the pause may already be lifted when backupmeta cannot be
// written; the step still fails and deletes every snapshot it started.
func TestRecordingFailsAfterStarted(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: meta.NewStore(failingMeta{d}, nil)},
		snapshot.Options{BackupID: backupID, BackupTS: 42, SkipClusterCheck: true, Input: in,
			Report: func(p snapshot.Progress) { phases = append(phases, p.Phase) }})
	if !errors.Is(err, errMetaWrite) {
		t.Fatalf("err = %v, want the storage's error", err)
	}
	if !slices.Contains(phases, snapshot.PhaseStarted) || phases[len(phases)-1] != snapshot.PhaseFailed {
		t.Errorf("phases = %v, want Started, then Failed last", phases)
	}
	if len(res.Deleted) != 4 || len(l.srv.Inventory(nil).Snapshots) != 0 {
		t.Errorf("deleted %v; left %+v", res.Deleted, l.srv.Inventory(nil).Snapshots)
	}
}

// TestArmedStepPreparesBeforeTheBackupTS: an armed step checks its volumes and instances
// before it asks for the backup ts (a bad volume fails it while nothing is paused yet), takes
// no snapshot before the ts arrives, records the ts it was given, and takes nothing when the
// wait fails.
func TestArmedStepPreparesBeforeTheBackupTS(t *testing.T) {
	ctx := testContext(t)
	t.Run("prepared, then snapshots at the given ts", func(t *testing.T) {
		l := newLab(t, 2, awsdouble.Faults{})
		asked := 0
		res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
			WaitBackupTS: func(context.Context) (uint64, error) {
				asked++
				if n := len(l.srv.Inventory(nil).Snapshots); n != 0 {
					t.Errorf("%d snapshots before the backup ts arrived", n)
				}
				return 4242, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if asked != 1 || res.ResolvedTS != 4242 || len(res.Snapshots) != 4 {
			t.Fatalf("asked %d times; result ts %d with %d snapshots, want once, 4242, 4", asked, res.ResolvedTS, len(res.Snapshots))
		}
	})
	t.Run("the stores are dialled while armed, once", func(t *testing.T) {
		l := newLab(t, 2, awsdouble.Faults{})
		d := startCluster(t)
		d.Cloud, d.Store = l.p, l.store
		var mu sync.Mutex
		dials := 0
		dial := d.Dial
		d.Dial = func(ctx context.Context, addr string) (brpb.BackupClient, func() error, error) {
			mu.Lock()
			dials++
			mu.Unlock()
			return dial(ctx, addr)
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return dials }
		atWait := 0
		_, err := snapshot.Run(ctx, d, snapshot.Options{BackupID: backupID, CheckInterval: 50 * time.Millisecond,
			WaitBackupTS: func(context.Context) (uint64, error) { atWait = count(); return 4242, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if atWait != 3 || count() != 3 {
			t.Errorf("%d stores dialled before the wait, %d in all; want 3 and 3", atWait, count())
		}
	})
	t.Run("the window holds the snapshot calls only; a volume attached meanwhile keeps no snapshot", func(t *testing.T) {
		l := newLab(t, 2, awsdouble.Faults{})
		c := ec2.NewFromConfig(awssdk.Config{Region: l.srv.Options().Region, Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
			func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(l.endpoint) })
		// The unrelated volume is not attached when the sets are prepared, and is again when
		// they start: it is not in their exclusion list, so CreateSnapshots takes it too.
		if _, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: awssdk.String(l.extra)}); err != nil {
			t.Fatal(err)
		}
		var atWait awsdouble.Stats
		res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
			WaitBackupTS: func(ctx context.Context) (uint64, error) {
				atWait = l.srv.Stats()
				_, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: awssdk.String(l.extra), InstanceId: awssdk.String(l.instance0), Device: awssdk.String("/dev/xvdd")})
				return 4242, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		after := l.srv.Stats()
		for _, call := range []string{"DescribeInstances", "DescribeVolumes"} {
			if d := after.Calls[call] - atWait.Calls[call]; d != 0 {
				t.Errorf("%d %s calls after the backup ts arrived, want 0", d, call)
			}
		}
		if len(res.Snapshots) != 4 {
			t.Errorf("%d snapshots recorded, want 4", len(res.Snapshots))
		}
		if after.Calls["DeleteSnapshot"] == atWait.Calls["DeleteSnapshot"] {
			t.Error("no snapshot deleted: the attached volume was not snapshotted, so this proves nothing")
		}
		left, err := l.p.ListSnapshots(ctx, meta.BackupTags(backupID))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range left {
			if s.VolumeID == l.extra {
				t.Errorf("snapshot %s of the volume attached while armed was kept", s.ID)
			}
		}
		if len(left) != 4 {
			t.Errorf("%d snapshots carry the backup's tag, want 4", len(left))
		}
	})
	t.Run("a missing volume fails before the wait", func(t *testing.T) {
		l := newLab(t, 1, awsdouble.Faults{})
		in := &meta.Record{TiKV: meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1, Volumes: []meta.Volume{
			{ID: "vol-0000000000000dead", Type: meta.DataDirType, MountPath: "/var/lib/tikv"}}}}}, PD: meta.Component{Replicas: 1}}
		_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true, Input: in,
			WaitBackupTS: func(context.Context) (uint64, error) {
				t.Error("asked for the backup ts though a volume does not exist")
				return 1, nil
			}})
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("err = %v, want the missing volume", err)
		}
	})
	t.Run("the wait fails: nothing taken", func(t *testing.T) {
		l := newLab(t, 1, awsdouble.Faults{})
		gone := errors.New("pause failed")
		_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
			WaitBackupTS: func(context.Context) (uint64, error) { return 0, gone }})
		if !errors.Is(err, gone) {
			t.Fatalf("err = %v, want the wait's error", err)
		}
		if n := len(l.srv.Inventory(nil).Snapshots); n != 0 {
			t.Errorf("%d snapshots taken", n)
		}
	})
}

// TestBackupMetaCountsTheWholeCluster: this plane backs up two of the cluster's three TiKV
// stores; its backupmeta's tikv.replicas is the whole cluster's count, which restore-data
// waits for whichever plane's backupmeta it reads. A clustermeta listing more stores than PD
// knows is refused before any snapshot starts.
func TestBackupMetaCountsTheWholeCluster(t *testing.T) {
	ctx := testContext(t)
	d := startCluster(t)
	l := newLab(t, 2, awsdouble.Faults{})
	d.Cloud, d.Store = l.p, l.store
	if _, err := snapshot.Run(ctx, d, snapshot.Options{BackupID: backupID, BackupTS: 42, CheckInterval: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	bm, err := l.store.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bm.TiKV.Replicas != 3 || len(bm.TiKV.Stores) != 2 {
		t.Errorf("backupmeta tikv.replicas %d with %d stores listed, want the cluster's 3 with this plane's 2", bm.TiKV.Replicas, len(bm.TiKV.Stores))
	}

	more := newLab(t, 4, awsdouble.Faults{})
	d.Cloud, d.Store = more.p, more.store
	_, err = snapshot.Run(ctx, d, snapshot.Options{BackupID: backupID, BackupTS: 42, CheckInterval: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "PD lists 3 TiKV stores, fewer than the 4 this plane backs up") {
		t.Fatalf("a clustermeta of 4 stores on a 3-store cluster: %v, want the refusal", err)
	}
	if n := len(more.tagged()); n != 0 {
		t.Errorf("%d snapshots started for the refused backup", n)
	}
}

// TestTooManyTagsFailsBeforeThePause: CreateSnapshots copies every tag of a volume to its
// snapshot, and AWS allows 50 per snapshot. A volume whose own tags and fedbr's exceed that
// fails an armed step while it prepares: it never asks for the backup ts, so it never
// reports Armed and the manager never starts the pause (startPause waits for every member
// armed), and nothing is snapshotted. The error names the volume, its tags and the limit. A
// volume that fills the 50 exactly is snapshotted. fedbr's own tags count: the permanent
// fedbr.io/namespace is one of the 7 the step adds.
func TestTooManyTagsFailsBeforeThePause(t *testing.T) {
	ctx := testContext(t)
	owner := &meta.Owner{Cluster: "3c5d3f0e-kube-system-uid", Namespace: "tidb"}
	userTags := map[string]string{"team": "db", "cost-center": "42", "env": "prod"}
	// fedbr's: the user's 3, fedbr.io/backup, fedbr.io/store, fedbr.io/backup-pending,
	// fedbr.io/namespace.
	const fedbrTags = 7
	for _, tt := range []struct {
		name    string
		volTags int // the data volume's own tags, all distinct from fedbr's
		want    string
	}{
		{"44 of the volume's own: 51 in all", 44, "volume %s of TiKV store 1 has 44 tags and the snapshot step adds 7: 51, more than the 50 AWS allows on a snapshot"},
		{"43 of the volume's own: 50 in all", 43, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, 1, awsdouble.Faults{})
			in, err := l.store.ClusterMeta(ctx)
			if err != nil {
				t.Fatal(err)
			}
			data := in.TiKV.Stores[0].Volumes[0].ID
			c := ec2.NewFromConfig(awssdk.Config{Region: l.srv.Options().Region, Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
				func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(l.endpoint) })
			var tags []types.Tag // newLab gave the volume CSIVolumeName already
			for i := range tt.volTags - 1 {
				tags = append(tags, types.Tag{Key: awssdk.String(fmt.Sprintf("owner-tag-%02d", i)), Value: awssdk.String("x")})
			}
			if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{data}, Tags: tags}); err != nil {
				t.Fatal(err)
			}
			if v, err := l.p.DescribeVolumes(ctx, []string{data}); err != nil || len(v) != 1 || len(v[0].Tags) != tt.volTags {
				t.Fatalf("volume %s: %+v, %v; want %d tags", data, v, err, tt.volTags)
			}
			asked := false
			res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
				Owner: owner, Tags: userTags,
				WaitBackupTS: func(context.Context) (uint64, error) { asked = true; return 4242, nil }})
			if tt.want == "" {
				if err != nil || len(res.Snapshots) != 2 {
					t.Fatalf("%d snapshots, %v; want both volumes snapshotted", len(res.Snapshots), err)
				}
				snaps, err := l.p.DescribeSnapshots(ctx, []string{res.Snapshots[0].SnapshotID, res.Snapshots[1].SnapshotID})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range snaps {
					if s.VolumeID == data && len(s.Tags) != tt.volTags+fedbrTags-1 { // fedbr.io/backup-pending is gone once completed
						t.Errorf("snapshot %s of the volume carries %d tags, want %d", s.ID, len(s.Tags), tt.volTags+fedbrTags-1)
					}
				}
				return
			}
			if err == nil || !errors.Is(err, cloud.ErrTooManyTags) || !strings.Contains(err.Error(), fmt.Sprintf(tt.want, data)) {
				t.Fatalf("err = %v, want cloud.ErrTooManyTags saying %q", err, fmt.Sprintf(tt.want, data))
			}
			if asked {
				t.Error("asked for the backup ts (reported Armed, so the pause would start) though a volume cannot be snapshotted")
			}
			if n := l.srv.Stats().Calls["CreateSnapshots"]; n != 0 || len(l.srv.Inventory(nil).Snapshots) != 0 {
				t.Errorf("%d CreateSnapshots calls, %d snapshots; want none", n, len(l.srv.Inventory(nil).Snapshots))
			}
		})
	}
}

// TestReportsCarryTheStepsTimes: the engine stamps each time once and carries it in every later
// report: when the armed step got its backup ts, when every snapshot had started (from Started
// on: the manager lifts the pause on it), when every one had completed, and in Waiting when the
// progress last moved.
func TestReportsCarryTheStepsTimes(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	var reports []snapshot.Progress
	var gotTS time.Time
	_, err := snapshot.Run(ctx, snapshot.Deps{Cloud: l.p, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
		WaitBackupTS: func(context.Context) (uint64, error) { gotTS = time.Now(); return 4242, nil },
		Report:       func(p snapshot.Progress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	var started, completed, waiting bool
	for _, p := range reports {
		if p.BackupTSAt.Before(gotTS) {
			t.Errorf("%s report: backupTSAt %v, before the ts came (%v)", p.Phase, p.BackupTSAt, gotTS)
		}
		if snapshot.PauseMayLift(p.Phase) != !p.StartedAt.IsZero() {
			t.Errorf("%s report: startedAt %v", p.Phase, p.StartedAt)
		}
		if (p.Phase == snapshot.PhaseCompleted) != !p.CompletedAt.IsZero() {
			t.Errorf("%s report: completedAt %v", p.Phase, p.CompletedAt)
		}
		if (p.Phase == snapshot.PhaseWaiting) != !p.ProgressAt.IsZero() {
			t.Errorf("%s report: progressAt %v", p.Phase, p.ProgressAt)
		}
		started = started || p.Phase == snapshot.PhaseStarted
		completed = completed || p.Phase == snapshot.PhaseCompleted
		waiting = waiting || p.Phase == snapshot.PhaseWaiting
		if p.Phase == snapshot.PhaseCompleted && (p.CompletedAt.Before(p.StartedAt) || p.StartedAt.Before(p.BackupTSAt)) {
			t.Errorf("times out of order: ts %v, started %v, completed %v", p.BackupTSAt, p.StartedAt, p.CompletedAt)
		}
	}
	if !started || !completed || !waiting {
		t.Errorf("phases reported %v: want Started, Waiting and Completed among them", reports)
	}
}
