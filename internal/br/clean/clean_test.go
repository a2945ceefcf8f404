package clean_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
)

// lab is the AWS double on 127.0.0.1 driven by the production provider through the SDK,
// plus a backup prefix in a directory.
type lab struct {
	srv   *awsdouble.Server
	p     *aws.Provider
	dir   *blob.Dir
	store *meta.Store
}

func newLab(t *testing.T) *lab {
	t.Helper()
	al := awsdoubletest.Serve(t, awsdouble.Options{}, "standard")
	srv, p := al.Server, al.Provider
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &lab{srv: srv, p: p, dir: d, store: meta.NewStore(d, nil)}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// backup snapshots stores × 2 volumes tagged with backupID and returns the backupmeta.
func (l *lab) backup(t *testing.T, backupID string, stores int) *meta.Record {
	t.Helper()
	return l.backupIn(t, backupID, "", stores)
}

// backupIn is backup for a member in namespace: its snapshots also carry meta.TagNamespace,
// as the backup step tags them (none for "").
func (l *lab) backupIn(t *testing.T, backupID, namespace string, stores int) *meta.Record {
	t.Helper()
	tags := meta.BackupTags(backupID)
	if namespace != "" {
		tags[meta.TagNamespace] = namespace
	}
	ctx := testContext(t)
	rec := &meta.Record{
		ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 4242},
		TiKV:        meta.TiKV{Replicas: stores},
		Fedbr:       &meta.Extension{BackupID: backupID},
	}
	var ids []string
	for i := range stores {
		in, err := l.srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("db", []byte("data\n")); err != nil {
			t.Fatal(err)
		}
		snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID,
			VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		st := meta.TiKVStore{ID: uint64(i + 1), InstanceID: in.ID}
		for j, s := range snaps {
			typ := meta.DataDirType
			if j == 1 {
				typ = "raft-engine.dir"
			}
			st.Volumes = append(st.Volumes, meta.Volume{ID: s.VolumeID, Type: typ, SnapshotID: s.ID, AZ: in.AZ})
			ids = append(ids, s.ID)
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, st)
	}
	if _, err := l.p.WaitSnapshots(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (l *lab) writeMeta(t *testing.T, rec *meta.Record) {
	t.Helper()
	ctx := context.Background()
	c := rec.Clone()
	for si := range c.TiKV.Stores {
		for vi := range c.TiKV.Stores[si].Volumes {
			c.TiKV.Stores[si].Volumes[vi].SnapshotID = ""
		}
	}
	if err := l.store.PutClusterMeta(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.PutManifest(ctx, "tidb", "TidbCluster", "basic", []byte("kind: TidbCluster\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.store.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

func (l *lab) left(t *testing.T, backupID string) []string {
	t.Helper()
	var ids []string
	for _, s := range l.srv.Inventory(meta.BackupTags(backupID)).Snapshots {
		ids = append(ids, s.ID)
	}
	return ids
}

func (l *lab) keys(t *testing.T) []string {
	t.Helper()
	keys, err := l.store.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// virtualClock runs the pacing in virtual time: every wait returns at once and moves the
// clock, so the test checks the pace without measuring wall time.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newVirtualClock() *virtualClock {
	return &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

// TestCleanDeletesSnapshotsPacedThenMetadata: every snapshot of the backup goes at the delete
// ratio (6 deletions at 2/s take 2.5 s of virtual time: the first is free), then every
// metadata object but the tombstone; another backup's snapshots are untouched.
func TestCleanDeletesSnapshotsPacedThenMetadata(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 3)
	other := l.backup(t, "b2", 1)
	l.writeMeta(t, rec)
	clock := newVirtualClock()
	var progress bytes.Buffer
	var mu sync.Mutex
	var statuses []clean.Status
	report := func(s clean.Status) {
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, s)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{DeleteRatio: 2, Clock: clock, Progress: &progress, Report: report})
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, s := range statuses {
		if len(phases) == 0 || phases[len(phases)-1] != s.Phase {
			phases = append(phases, s.Phase)
		}
	}
	want := []string{clean.PhaseStarting, clean.PhaseDeletingSnapshots, clean.PhaseDeletingMetadata, clean.PhaseCompleted}
	if last := statuses[len(statuses)-1]; !slices.Equal(phases, want) || last.Deleted != 6 || last.Total != 6 {
		t.Errorf("phases %v, last status %+v; want %v with 6 of 6 deleted", phases, last, want)
	}
	if sum.Result != "cleaned" || sum.BackupID != "b1" || len(sum.Deleted) != 6 || len(sum.AlreadyGone) != 0 || len(sum.Orphans) != 0 {
		t.Fatalf("summary = %+v", sum)
	}
	if sum.ElapsedSeconds != 2.5 {
		t.Fatalf("6 deletions at 2/s took %v s of virtual time, want 2.5", sum.ElapsedSeconds)
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("snapshots left: %v", left)
	}
	if left := l.left(t, "b2"); len(left) != len(other.SnapshotIDs()) {
		t.Fatalf("another backup's snapshots were touched: %v", left)
	}
	if keys := l.keys(t); !slices.Equal(keys, []string{meta.TombstoneKey}) {
		t.Fatalf("metadata left: %v", keys)
	}
	if len(sum.Metadata) != 3 || sum.Metadata[len(sum.Metadata)-1] != meta.BackupMetaKey {
		t.Fatalf("metadata deleted = %v, want backupmeta last", sum.Metadata)
	}
	if !strings.Contains(progress.String(), "Deleted snapshot") {
		t.Fatalf("progress = %q", progress.String())
	}
}

// TestCleanRetryAfterPartialDeletion: a first clean deleted some snapshots and died; the
// retry deletes the rest, and a third run finds the backup already cleaned.
func TestCleanRetryAfterPartialDeletion(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 3)
	l.writeMeta(t, rec)
	ids := rec.SnapshotIDs()
	if err := l.p.DeleteSnapshots(ctx, ids[:2]); err != nil {
		t.Fatal(err)
	}
	o := clean.Options{BackupID: "b1", Clock: newVirtualClock()}
	sum, err := clean.Run(ctx, l.p, l.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.AlreadyGone, ids[:2]) || len(sum.Deleted) != 4 {
		t.Fatalf("summary = %+v", sum)
	}
	again, err := clean.Run(ctx, l.p, l.store, o)
	if err != nil {
		t.Fatalf("second clean: %v", err)
	}
	if !again.AlreadyCleaned || again.MetaFound || len(again.Deleted) != 0 || again.Result != "cleaned" {
		t.Fatalf("second summary = %+v", again)
	}
	ts, err := l.store.Tombstone(ctx)
	if err != nil || len(ts.Snapshots) != 6 {
		t.Fatalf("tombstone = %+v, %v", ts, err)
	}
}

// TestCleanSnapshotsAlreadyGone: every listed snapshot was deleted out of band (and one never
// existed): NotFound is success.
func TestCleanSnapshotsAlreadyGone(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	rec.TiKV.Stores[0].Volumes = append(rec.TiKV.Stores[0].Volumes, meta.Volume{ID: "vol-00000000000000000", SnapshotID: "snap-00000000000000000"})
	l.writeMeta(t, rec)
	if err := l.p.DeleteSnapshots(ctx, rec.SnapshotIDs()[:2]); err != nil {
		t.Fatal(err)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.AlreadyGone) != 3 || len(sum.Deleted) != 0 || sum.Result != "cleaned" {
		t.Fatalf("summary = %+v", sum)
	}
}

// TestCleanMissingMetaOfCompletedBackup: backupmeta lost for a completed backup: the clean
// finds the tagged orphans, deletes and reports them, keeps the other metadata and fails.
func TestCleanMissingMetaOfCompletedBackup(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 2)
	l.writeMeta(t, rec)
	if err := l.dir.Delete(ctx, meta.BackupMetaKey); err != nil {
		t.Fatal(err)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", Outcome: clean.Completed, Clock: newVirtualClock()})
	if !errors.Is(err, clean.ErrMetaMissing) {
		t.Fatalf("err = %v, want ErrMetaMissing", err)
	}
	want := slices.Sorted(slices.Values(rec.SnapshotIDs()))
	if sum.Result != "failed" || sum.MetaFound || !slices.Equal(sum.Orphans, want) || !slices.Equal(sum.Deleted, want) {
		t.Fatalf("summary = %+v, want orphans %v", sum, want)
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("orphans left: %v", left)
	}
	if keys := l.keys(t); !slices.Contains(keys, meta.ClusterMetaKey) {
		t.Fatalf("metadata of a leaked backup was deleted: %v", keys)
	}
	// Without an identity there is nothing to sweep with; still no success.
	if _, err := clean.Run(ctx, l.p, l.store, clean.Options{Clock: newVirtualClock()}); !errors.Is(err, clean.ErrMetaMissing) {
		t.Fatalf("no identity: err = %v", err)
	}
	// An operator accepts the loss: the rest of the metadata goes.
	sum, err = clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", AcceptMissingMeta: true, Clock: newVirtualClock()})
	if err != nil || sum.Result != "cleaned" {
		t.Fatalf("accepted: %+v, %v", sum, err)
	}
	if keys := l.keys(t); !slices.Equal(keys, []string{meta.TombstoneKey}) {
		t.Fatalf("metadata left: %v", keys)
	}
}

// TestCleanFailedBackupWithoutMeta: a failed backup never wrote backupmeta; its clean
// deletes whatever carries its tags and the metadata it has, and succeeds.
func TestCleanFailedBackupWithoutMeta(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	if err := l.dir.Delete(ctx, meta.BackupMetaKey); err != nil {
		t.Fatal(err)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", Outcome: clean.Failed, Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Orphans) != 2 || len(sum.Deleted) != 2 || sum.Result != "cleaned" {
		t.Fatalf("summary = %+v", sum)
	}
	if keys := l.keys(t); !slices.Equal(keys, []string{meta.TombstoneKey}) {
		t.Fatalf("metadata left: %v", keys)
	}
}

// TestCleanSweepsOrphansBesideMeta: a snapshot tagged with the backup but not listed in
// backupmeta (a retried snapshot step) is deleted too.
func TestCleanSweepsOrphansBesideMeta(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 2)
	stray := rec.TiKV.Stores[1]
	rec.TiKV.Stores = rec.TiKV.Stores[:1]
	l.writeMeta(t, rec)
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Orphans) != len(stray.Volumes) || len(sum.Deleted) != 4 {
		t.Fatalf("summary = %+v", sum)
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// TestCleanUnderThrottling: half of all AWS calls are throttled; the clean still completes.
func TestCleanUnderThrottling(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 3)
	l.writeMeta(t, rec)
	l.srv.SetFaults(awsdouble.Faults{Throttle: 0.5})
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Deleted) != 6 {
		t.Fatalf("summary = %+v", sum)
	}
	st := l.srv.Stats()
	l.srv.SetFaults(awsdouble.Faults{})
	if st.InjectedThrottles == 0 {
		t.Fatal("nothing was throttled")
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	t.Logf("%d calls throttled", st.InjectedThrottles)
}

// TestCleanDryRunDeletesNothing.
func TestCleanDryRunDeletesNothing(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	var progress bytes.Buffer
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{DryRun: true, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Result != "dry-run" || len(sum.Deleted) != 0 || len(l.left(t, "b1")) != 2 || len(l.keys(t)) != 3 {
		t.Fatalf("summary = %+v, keys %v", sum, l.keys(t))
	}
	if !strings.Contains(progress.String(), "Would delete snapshot") || !strings.Contains(progress.String(), "Would delete metadata backupmeta") {
		t.Fatalf("progress = %s", progress.String())
	}
}

// failingGets is a blob store whose reads fail (S3 unreachable).
type failingGets struct{ blob.Store }

func (failingGets) Get(context.Context, string, int64) ([]byte, error) {
	return nil, errors.New("connection refused")
}

// TestCleanUnreadableMetaIsNotMissing: a storage error is not a missing backupmeta; nothing
// is deleted (upstream reported success and leaked the snapshots).
func TestCleanUnreadableMetaIsNotMissing(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	_, err := clean.Run(ctx, l.p, meta.NewStore(failingGets{l.dir}, nil), clean.Options{Outcome: clean.Failed})
	if err == nil || errors.Is(err, clean.ErrMetaMissing) {
		t.Fatalf("err = %v", err)
	}
	if len(l.left(t, "b1")) != 2 || len(l.keys(t)) != 3 {
		t.Fatal("something was deleted")
	}
}

// TestCleanLeavesAnotherBackupsMetadata: b2 was pointed at b1's storage, where its snapshot
// step was refused. Its clean deletes the snapshots tagged b2 and nothing of b1's: as a failed
// backup it succeeds (upstream's clean failed forever, or deleted b1); a completed b2 could
// only have lost its own backupmeta, so that fails as a missing one, naming b1.
func TestCleanLeavesAnotherBackupsMetadata(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	keys := l.keys(t)
	l.backup(t, "b2", 1) // snapshots b2 took before it was refused (a retried step, say)

	_, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b2", Clock: newVirtualClock()})
	if !errors.Is(err, clean.ErrMetaMissing) || !strings.Contains(err.Error(), "backup b1") {
		t.Fatalf("completed b2: err = %v, want ErrMetaMissing naming backup b1", err)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b2", Outcome: clean.Failed, Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Result != "cleaned" || sum.OtherBackup != "backup b1" || sum.MetaFound || len(sum.Listed) != 0 || len(sum.Metadata) != 0 {
		t.Fatalf("summary = %+v", sum)
	}
	if left := l.left(t, "b2"); len(left) != 0 {
		t.Errorf("b2's snapshots left: %v", left)
	}
	if left := l.left(t, "b1"); len(left) != 2 {
		t.Errorf("b1's snapshots: %v, want its 2 untouched", left)
	}
	if got := l.keys(t); !slices.Equal(got, keys) {
		t.Errorf("metadata %v, want b1's %v untouched", got, keys)
	}

	// An upstream BR backupmeta (no fedbr identity) is another backup's too.
	up := rec.Clone()
	up.Fedbr = nil
	l2 := newLab(t)
	l2.writeMeta(t, up)
	sum, err = clean.Run(ctx, l2.p, l2.store, clean.Options{BackupID: "b3", Outcome: clean.Failed, Clock: newVirtualClock()})
	if err != nil || sum.OtherBackup != "an upstream BR backup" || len(sum.Metadata) != 0 || len(l2.keys(t)) != 3 {
		t.Fatalf("upstream backupmeta: %+v, %v, keys %v", sum, err, l2.keys(t))
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []clean.Options{{DeleteRatio: 0.05}, {DeleteRatio: 2.5}, {Outcome: "maybe"}, {BackupID: "a/b"},
		{Expected: []string{"vol-1,vol-2"}}, {Expected: []string{""}}, {SettleTimeout: -time.Second}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (clean.Options{DeleteRatio: 0.1, Outcome: clean.Failed, BackupID: "b1"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// cancelAfterFirstDelete cancels the clean's context once a snapshot was deleted (SIGTERM
// in the middle of the deletions).
type cancelAfterFirstDelete struct {
	cloud.Snapshots
	cancel context.CancelFunc
	calls  *atomic.Int32
}

func (c cancelAfterFirstDelete) DeleteSnapshots(ctx context.Context, ids []string) error {
	if c.calls.Add(1) > 1 {
		<-ctx.Done() // the signal arrives while this deletion is in flight
		return ctx.Err()
	}
	err := c.Snapshots.DeleteSnapshots(ctx, ids)
	c.cancel()
	return err
}

// TestCleanInterruptedKeepsMetadata: an interrupted clean fails and keeps every metadata
// object, so the retry still knows the remaining snapshots; the retry finishes the job.
func TestCleanInterruptedKeepsMetadata(t *testing.T) {
	l := newLab(t)
	rec := l.backup(t, "b1", 2)
	l.writeMeta(t, rec)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	sum, err := clean.Run(ctx, cancelAfterFirstDelete{Snapshots: l.p, cancel: cancel, calls: &atomic.Int32{}}, l.store, clean.Options{Clock: newVirtualClock()})
	if !errors.Is(err, context.Canceled) || sum.Result != "failed" {
		t.Fatalf("err = %v, summary %+v", err, sum)
	}
	if keys := l.keys(t); len(keys) != 3 || len(l.left(t, "b1")) != 3 || len(sum.Deleted) != 1 {
		t.Fatalf("after interruption: keys %v, snapshots left %v", keys, l.left(t, "b1"))
	}
	if _, err := clean.Run(testContext(t), l.p, l.store, clean.Options{Clock: newVirtualClock()}); err != nil {
		t.Fatal(err)
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("left after retry: %v", left)
	}
}

// TestCleanLeavesWhatItDidNotWrite: a backup whose prefix names another tenant's folder's
// parent (prefix team-b above team-b/nightly-az1) is cleaned of what fedbr wrote for it, and
// only that: the other backup's metadata below the prefix and a file no fedbr wrote stay, and
// the summary lists them.
func TestCleanLeavesWhatItDidNotWrite(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	others := []string{"README.txt", "nightly-az1/backupmeta", "nightly-az1/clustermeta", "nightly-az1/manifests/tidb/TidbCluster/basic.yaml",
		"nightly-az1/restoremeta/r-1"}
	for _, k := range others {
		if err := l.dir.Put(ctx, k, []byte("not b1's\n")); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", Outcome: clean.Completed, Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(others)
	wantDeleted := []string{"backupmeta", "clustermeta", "manifests/tidb/TidbCluster/basic.yaml"}
	if got := slices.Sorted(slices.Values(sum.Metadata)); !slices.Equal(got, wantDeleted) || !slices.Equal(sum.LeftAlone, others) {
		t.Errorf("deleted %v, left alone %v; want %v and %v", got, sum.LeftAlone, wantDeleted, others)
	}
	if got := l.keys(t); !slices.Equal(got, slices.Sorted(slices.Values(append([]string{meta.TombstoneKey}, others...)))) {
		t.Errorf("objects after the clean: %v, want the tombstone and %v", got, others)
	}
}

// TestCleanWaitsForCreateSnapshotsInFlight: the snapshot step was stopped while AWS held its
// CreateSnapshots (its caller gone, the call still to run). The clean, told the volumes the
// step was given, lists the backup's snapshots until AWS shows one of each, so the snapshots
// the call makes once AWS runs it are deleted by this clean, not left for the sweeper.
func TestCleanWaitsForCreateSnapshotsInFlight(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	in, err := l.srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	vols := []string{in.Volumes[0].ID, in.Volumes[1].ID}
	release := l.srv.Hold("CreateSnapshots")
	t.Cleanup(release)
	stepCtx, stop := context.WithCancel(ctx)
	stepDone := make(chan error, 1)
	go func() {
		_, err := l.p.SnapshotInstance(stepCtx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: vols, Tags: meta.BackupTags("b1")})
		stepDone <- err
	}()
	waitFor(t, ctx, "CreateSnapshots in flight", func() bool { return l.srv.Stats().InFlight["CreateSnapshots"] == 1 })
	stop() // the step's pod got SIGTERM and exited without the answer
	if err := <-stepDone; err == nil {
		t.Fatal("the stopped step got an answer")
	}

	settling := make(chan clean.Status, 1)
	var once sync.Once
	done := make(chan error, 1)
	var sum clean.Summary
	go func() {
		var err error
		sum, err = clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", Outcome: clean.Failed, Expected: vols,
			SettleInterval: 10 * time.Millisecond, SettleTimeout: time.Hour, Report: func(st clean.Status) {
				if st.Phase == clean.PhaseSettling {
					once.Do(func() { settling <- st })
				}
			}})
		done <- err
	}()
	select {
	case st := <-settling:
		if st.Seen != 0 || st.Expected != 2 {
			t.Errorf("settling %+v, want 0 of 2 volumes seen", st)
		}
	case err := <-done:
		t.Fatalf("the clean ended (%v, %+v) while AWS still held the CreateSnapshots", err, sum)
	}
	release() // AWS runs the call whose caller is gone
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(sum.Deleted) != 2 || len(sum.Orphans) != 2 || len(sum.Unseen) != 0 || sum.Result != "cleaned" {
		t.Fatalf("summary = %+v, want the 2 snapshots the held call made deleted", sum)
	}
	if left := l.left(t, "b1"); len(left) != 0 {
		t.Fatalf("snapshots of the backup left: %v", left)
	}
}

// TestCleanSettleIsBounded: an expected volume of which AWS never shows a snapshot (the step
// never started it) ends the wait after SettleTimeout and is reported Unseen, and the clean
// succeeds; volumes backupmeta lists a snapshot for are seen at once, without a wait.
func TestCleanSettleIsBounded(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t)
	rec := l.backup(t, "b1", 1)
	l.writeMeta(t, rec)
	var listed []string
	for _, v := range rec.Volumes() {
		listed = append(listed, v.ID)
	}
	sum, err := clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b1", Expected: listed, Clock: newVirtualClock()})
	if err != nil {
		t.Fatal(err)
	}
	if sum.SettleSeconds != 0 || len(sum.Unseen) != 0 || len(sum.Deleted) != 2 {
		t.Fatalf("summary = %+v, want no wait: backupmeta lists every expected volume", sum)
	}

	rec = l.backup(t, "b2", 1)
	l.writeMeta(t, rec)
	clock := newVirtualClock()
	sum, err = clean.Run(ctx, l.p, l.store, clean.Options{BackupID: "b2", Expected: append(listed[:0:0], rec.Volumes()[0].ID, "vol-0never"),
		SettleTimeout: time.Minute, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Unseen, []string{"vol-0never"}) || sum.SettleSeconds < 60 || len(sum.Deleted) != 2 || sum.Result != "cleaned" {
		t.Fatalf("summary = %+v, want vol-0never unseen after the minute and the backup cleaned", sum)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
