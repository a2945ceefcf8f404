package restorevolumes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
)

const resolvedTS = 451000000000000001

type lab struct {
	srv   *awsdouble.Server
	p     *aws.Provider
	dir   *blob.Dir
	store *meta.Store
	rec   *meta.Record
}

// backupNamespace is the namespace newLab's backup was taken for (its snapshots' meta.TagNamespace).
const backupNamespace = "tidb"

// newLab serves the AWS double and takes a backup of two stores (data + raft volume each,
// each data volume holding a file naming it) tagged b1, for namespace backupNamespace.
func newLab(t *testing.T, opts awsdouble.Options) *lab {
	t.Helper()
	return newLabSized(t, opts, []int32{20, 20})
}

// newLabSized is newLab with one store per entry of dataGiB, its data volume of that size.
func newLabSized(t *testing.T, opts awsdouble.Options, dataGiB []int32) *lab {
	t.Helper()
	al := awsdoubletest.Serve(t, opts, "")
	srv, p := al.Server, al.Provider
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{srv: srv, p: p, dir: d, store: meta.NewStore(d, nil)}
	ctx := testContext(t)
	l.rec = &meta.Record{ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: resolvedTS},
		TiKV: meta.TiKV{Replicas: len(dataGiB)}, Fedbr: &meta.Extension{BackupID: "b1"}}
	var ids []string
	for i, size := range dataGiB {
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{
			{Device: "/dev/xvdb", SizeGiB: size, Tags: map[string]string{"CSIVolumeName": "pvc-" + string(rune('a'+i))}},
			{Device: "/dev/xvdc", SizeGiB: 10},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("whoami", []byte(in.Volumes[0].ID)); err != nil {
			t.Fatal(err)
		}
		// As the backup step tags them for a member in namespace backupNamespace.
		tags := meta.BackupTags("b1")
		tags[meta.TagNamespace] = backupNamespace
		snaps, err := p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: tags})
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
		l.rec.TiKV.Stores = append(l.rec.TiKV.Stores, st)
	}
	if _, err := p.WaitSnapshots(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.store.PutBackupMeta(ctx, l.rec); err != nil {
		t.Fatal(err)
	}
	return l
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakePD records the calls; fail makes them fail.
type fakePD struct {
	mu    sync.Mutex
	calls []string
	ts    uint64
	fail  error
	// before, when set, runs first in MarkSnapshotRecovering (a PD still starting).
	before func() error
}

func (f *fakePD) MarkSnapshotRecovering(context.Context) error {
	if f.before != nil {
		if err := f.before(); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "mark")
	return f.fail
}

func (f *fakePD) ResetTS(_ context.Context, ts uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "reset-ts")
	f.ts = max(f.ts, ts)
	return f.fail
}

func (l *lab) volumeCount() int { return len(l.srv.Inventory(nil).Volumes) }

const kmsKey = "arn:aws:kms:us-west-2:123456789012:key/fedbr-restore"

// TestRestoreVolumes: every backed-up volume is restored into the target AZ with the
// requested type, performance, encryption, KMS key and tags, holds the backed-up data, and
// the old → new map is this restore's restoremeta. PD is marked and its TSO raised first.
// A retry returns the recorded volumes without creating any.
func TestRestoreVolumes(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	pd := &fakePD{}
	var progress bytes.Buffer
	var phases []string
	var last restorevolumes.Status
	owner := &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "restored"}
	markedPending := -1 // volumes marked pending while they were waited for
	o := restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2c", VolumeType: "gp3", IOPS: 4000, Throughput: 200,
		Encrypted: true, KMSKeyID: kmsKey, Tags: map[string]string{"team": "db"}, Owner: owner, Progress: &progress,
		SourceNamespaces: meta.Namespaces{backupNamespace}, // the backup's; its owner may act on it
		Report: func(s restorevolumes.Status) {
			if len(phases) == 0 || phases[len(phases)-1] != s.Phase {
				phases = append(phases, s.Phase)
			}
			if s.Phase == restorevolumes.PhaseWaitingVolumes {
				markedPending = len(l.srv.Inventory(meta.PendingRestoreTags(owner)).Volumes)
			}
			last = s
		}}
	res, err := restorevolumes.Run(ctx, l.p, pd, l.store, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{restorevolumes.PhaseStarting, restorevolumes.PhasePreparingPD, restorevolumes.PhaseCreatingVolumes,
		restorevolumes.PhaseWaitingVolumes, restorevolumes.PhaseCompleted}
	if !slices.Equal(phases, want) || last.ResolvedTS != resolvedTS || last.Volumes != len(res.Volumes) {
		t.Errorf("phases %v, last status %+v; want %v with the resolved ts and %d volumes", phases, last, want, len(res.Volumes))
	}
	o.Report = nil
	if markedPending != 4 {
		t.Errorf("%d volumes were tagged %s=%s before restoremeta recorded them, want 4", markedPending, meta.TagRestorePending, owner)
	}
	if left := l.srv.Inventory(map[string]string{meta.TagRestorePending: owner.String()}).Volumes; len(left) != 0 {
		t.Errorf("volumes restoremeta records are still marked pending: %v", left)
	}
	var snapIDs []string
	for _, v := range l.rec.Volumes() {
		snapIDs = append(snapIDs, v.SnapshotID)
	}
	snaps, err := l.p.DescribeSnapshots(ctx, snapIDs)
	if err != nil {
		t.Fatal(err)
	}
	// The snapshots were taken now, long after the resolved ts: PD's TSO goes past their start.
	if wantTS := restorevolumes.RecoveryTS(resolvedTS, snaps); !slices.Equal(pd.calls, []string{"mark", "reset-ts"}) || pd.ts != wantTS || wantTS <= resolvedTS {
		t.Fatalf("PD calls = %v, ts %d; want the TSO raised to %d, above the resolved ts %d", pd.calls, pd.ts, wantTS, uint64(resolvedTS))
	}
	if len(res.Volumes) != 4 || res.SizeGiB != 60 || res.Reused || res.ResolvedTS != resolvedTS {
		t.Fatalf("result = %+v", res)
	}
	var newIDs []string
	for _, v := range res.Volumes {
		newIDs = append(newIDs, v.VolumeID)
	}
	vols, err := l.p.DescribeVolumes(ctx, newIDs)
	if err != nil || len(vols) != 4 {
		t.Fatalf("volumes = %+v, %v", vols, err)
	}
	for i, v := range vols {
		rv := res.Volumes[slices.IndexFunc(res.Volumes, func(x restorevolumes.Volume) bool { return x.VolumeID == v.ID })]
		if v.AZ != "us-west-2c" || v.Type != "gp3" || v.IOPS != 4000 || v.Throughput != 200 || !v.Encrypted || v.KMSKeyID != kmsKey {
			t.Errorf("volume %d = %+v", i, v)
		}
		want := map[string]string{meta.TagRestore: "r1", "team": "db", restorevolumes.TagRestoredBy: "new", restorevolumes.TagCSICluster: "true",
			restorevolumes.TagFromSnapshot: rv.SnapshotID, "snapshot/" + meta.TagBackup: "b1"}
		for k, val := range want {
			if v.Tags[k] != val {
				t.Errorf("volume %s tag %s = %q, want %q (tags %v)", v.ID, k, v.Tags[k], val, v.Tags)
			}
		}
		if rv.Type == meta.DataDirType {
			dir, err := l.srv.VolumeDir(v.ID)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "whoami"))
			if err != nil || string(b) != rv.BackupVolumeID {
				t.Errorf("restored volume %s holds %q, %v; want the data of %s", v.ID, b, err, rv.BackupVolumeID)
			}
			if v.Tags["snapshot/CSIVolumeName"] == "" {
				t.Errorf("source volume tags were not copied: %v", v.Tags)
			}
		}
	}
	rm, err := l.store.RestoreMeta(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	m := rm.RestoredVolumes()
	for _, v := range res.Volumes {
		if m[v.BackupVolumeID] != v.VolumeID {
			t.Errorf("restoremeta maps %s to %q, want %s", v.BackupVolumeID, m[v.BackupVolumeID], v.VolumeID)
		}
	}
	if rm.TiKV.Stores[0].Volumes[0].RestoreAZ != "us-west-2c" || rm.Fedbr.RestoreID != "r1" || rm.Fedbr.BackupID != "b1" {
		t.Fatalf("restoremeta = %+v / %+v", rm.TiKV.Stores[0].Volumes[0], rm.Fedbr)
	}
	if !strings.Contains(progress.String(), "restoremeta written") {
		t.Fatalf("progress = %q", progress.String())
	}

	creates := l.srv.Stats().Calls["CreateVolume"]
	again, err := restorevolumes.Run(ctx, l.p, pd, l.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || len(again.Volumes) != 4 || l.srv.Stats().Calls["CreateVolume"] != creates {
		t.Fatalf("retry = %+v, CreateVolume calls %d → %d", again, creates, l.srv.Stats().Calls["CreateVolume"])
	}
	for _, v := range again.Volumes {
		if !slices.Contains(newIDs, v.VolumeID) {
			t.Fatalf("retry returned volume %s, not one of %v", v.VolumeID, newIDs)
		}
	}
}

// TestTwoRestoresOfOneBackup: each restore has its own restoremeta and volumes.
func TestTwoRestoresOfOneBackup(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	for _, id := range []string{"r1", "r2"} {
		if _, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: id, Scope: restorevolumes.ScopeData}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := l.store.Restores(ctx)
	if err != nil || !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Fatalf("restores = %v, %v", ids, err)
	}
	r1, _ := l.store.RestoreMeta(ctx, "r1")
	r2, _ := l.store.RestoreMeta(ctx, "r2")
	m1, m2 := r1.RestoredVolumes(), r2.RestoredVolumes()
	if len(m1) != 2 || len(m2) != 2 {
		t.Fatalf("scope data restored %d and %d volumes, want the 2 data volumes each", len(m1), len(m2))
	}
	for k, v := range m1 {
		if m2[k] == v {
			t.Fatalf("both restores recorded volume %s", v)
		}
	}
	if len(l.srv.Inventory(meta.RestoreTags("r1")).Volumes) != 2 || len(l.srv.Inventory(meta.RestoreTags("r2")).Volumes) != 2 {
		t.Fatal("restore volumes are not tagged per restore")
	}
}

// failingCreates fails the n-th CreateVolume; everything else reaches the double.
type failingCreates struct {
	restorevolumes.Cloud
	n     int32
	calls atomic.Int32
}

func (f *failingCreates) CreateVolume(ctx context.Context, spec cloud.VolumeSpec) (cloud.Volume, error) {
	if f.calls.Add(1) == f.n {
		return cloud.Volume{}, errors.New("injected CreateVolume failure")
	}
	return f.Cloud.CreateVolume(ctx, spec)
}

// failingPuts is a blob store whose writes of restoremeta fail.
type failingPuts struct{ blob.Store }

func (f failingPuts) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, meta.RestoreMetaPrefix) {
		return errors.New("injected storage failure")
	}
	return f.Store.Put(ctx, key, data)
}

// TestFailureLeavesZeroVolumes: a failure while creating volumes, or after all of them were
// created when restoremeta cannot be written, leaves no volume behind.
func TestFailureLeavesZeroVolumes(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		ctx := testContext(t)
		l := newLab(t, awsdouble.Options{})
		before := l.volumeCount()
		c := &failingCreates{Cloud: l.p, n: 3}
		res, err := restorevolumes.Run(ctx, c, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", Concurrency: 1})
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("err = %v", err)
		}
		if len(res.Deleted) != 2 {
			t.Fatalf("deleted %v, want the 2 volumes created before the failure", res.Deleted)
		}
		if n := l.volumeCount(); n != before {
			t.Fatalf("%d volumes after the failure, %d before", n, before)
		}
		if _, err := l.store.RestoreMeta(ctx, "r1"); !errors.Is(err, meta.ErrNotFound) {
			t.Fatalf("restoremeta of a failed restore: %v", err)
		}
	})
	t.Run("restoremeta", func(t *testing.T) {
		ctx := testContext(t)
		l := newLab(t, awsdouble.Options{})
		before := l.volumeCount()
		store := meta.NewStore(failingPuts{l.dir}, nil)
		res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, store, restorevolumes.Options{RestoreID: "r1"})
		if err == nil || !strings.Contains(err.Error(), "injected storage failure") {
			t.Fatalf("err = %v", err)
		}
		if len(res.Deleted) != 4 || len(res.Volumes) != 0 || l.volumeCount() != before || len(l.srv.Inventory(meta.RestoreTags("r1")).Volumes) != 0 {
			t.Fatalf("deleted %v; %d volumes now, %d before", res.Deleted, l.volumeCount(), before)
		}
	})
	// PD is prepared while the volumes are created. When it fails, the attempt fails with its
	// error and deletes the volumes it created, unrecorded, as any failure does; a retry
	// with PD up restores. A retry after success prepares PD again and reuses the volumes.
	t.Run("pd", func(t *testing.T) {
		ctx := testContext(t)
		l := newLab(t, awsdouble.Options{})
		before := l.volumeCount()
		var last restorevolumes.Status
		res, err := restorevolumes.Run(ctx, l.p, &fakePD{fail: errors.New("PD down")}, l.store,
			restorevolumes.Options{RestoreID: "r1", Report: func(s restorevolumes.Status) { last = s }})
		if err == nil || !strings.Contains(err.Error(), "PD down") {
			t.Fatalf("err = %v, want the PD error", err)
		}
		if last.Phase != restorevolumes.PhaseFailed || !strings.Contains(last.Error, "PD down") {
			t.Errorf("last status %+v, want Failed with the PD error", last)
		}
		if _, err := l.store.RestoreMeta(ctx, "r1"); !errors.Is(err, meta.ErrNotFound) || len(res.Deleted) != 4 ||
			l.volumeCount() != before || len(l.srv.Inventory(meta.RestoreTags("r1")).Volumes) != 0 {
			t.Fatalf("restoremeta err %v, deleted %v, %d volumes now, %d before: want the attempt's volumes deleted, none recorded",
				err, res.Deleted, l.volumeCount(), before)
		}
		// A PD that answers only once the volumes are being created: the step creates them
		// while it waits, rather than after.
		base := l.srv.Stats().Calls["CreateVolume"]
		slow := &fakePD{before: func() error {
			for deadline := time.Now().Add(10 * time.Second); l.srv.Stats().Calls["CreateVolume"] < base+4; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					return errors.New("no volume was created while PD was starting")
				}
			}
			return nil
		}}
		if _, err := restorevolumes.Run(ctx, l.p, slow, l.store, restorevolumes.Options{RestoreID: "r0"}); err != nil {
			t.Fatalf("restore while PD starts: %v", err)
		}
		for i, want := range []bool{false, true} {
			pd := &fakePD{}
			got, err := restorevolumes.Run(ctx, l.p, pd, l.store, restorevolumes.Options{RestoreID: "r1"})
			if err != nil || got.Reused != want || len(got.Volumes) != 4 || !slices.Equal(pd.calls, []string{"mark", "reset-ts"}) {
				t.Fatalf("retry %d: err %v, reused %v (want %v), %d volumes, PD calls %v", i+1, err, got.Reused, want, len(got.Volumes), pd.calls)
			}
		}
	})
}

// TestRetrySweepsKilledAttempt: an attempt killed (no cleanup ran) left a tagged volume; the
// next attempt deletes it before creating its own.
func TestRetrySweepsKilledAttempt(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	left, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: l.rec.SnapshotIDs()[0], AZ: "us-west-2a", Tags: meta.RestoreTags("r1")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Swept, []string{left.ID}) || len(l.srv.Inventory(meta.RestoreTags("r1")).Volumes) != 4 {
		t.Fatalf("swept %v, tagged volumes %d", res.Swept, len(l.srv.Inventory(meta.RestoreTags("r1")).Volumes))
	}
}

// TestRestoreWithFSR: the data volumes come out fast-restored after FSR credits were
// waited for, and FSR is disabled at the end.
func TestRestoreWithFSR(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{TimeFactor: 3600})
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2b", FSR: true})
	if err != nil {
		t.Fatal(err)
	}
	var dataSnaps []string
	for _, v := range res.Volumes {
		if v.Type == meta.DataDirType {
			dataSnaps = append(dataSnaps, v.SnapshotID)
			if !v.FastRestored {
				t.Errorf("data volume %s is not fast-restored", v.VolumeID)
			}
		}
	}
	if len(dataSnaps) != 2 || l.srv.Stats().Calls["EnableFastSnapshotRestores"] != 1 || l.srv.Stats().Calls["DisableFastSnapshotRestores"] != 1 {
		t.Fatalf("data snapshots %v, calls %v", dataSnaps, l.srv.Stats().Calls)
	}
	states, err := l.p.DescribeFSR(ctx, dataSnaps)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.State != "disabling" && s.State != "disabled" {
			t.Errorf("FSR of %s in %s is %s after the restore", s.SnapshotID, s.AZ, s.State)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []restorevolumes.Options{
		{},
		{RestoreID: "r/1"},
		{RestoreID: "r1", VolumeType: "nvme"},
		{RestoreID: "r1", VolumeType: "gp2", IOPS: 3000},
		{RestoreID: "r1", VolumeType: "io2", Throughput: 100},
		{RestoreID: "r1", KMSKeyID: kmsKey},
		{RestoreID: "r1", Scope: "some"},
		{RestoreID: "r1", IOPS: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (restorevolumes.Options{RestoreID: "r1", VolumeType: "io2", IOPS: 16000, Encrypted: true, KMSKeyID: kmsKey}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// cancelOnWait cancels the run's context when it starts waiting for the volumes (SIGTERM
// after every volume was created).
type cancelOnWait struct {
	restorevolumes.Cloud
	cancel context.CancelFunc
}

func (c cancelOnWait) WaitVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error) {
	c.cancel()
	return c.Cloud.WaitVolumes(ctx, ids)
}

// TestCancelledRestoreLeavesZeroVolumes: the restore is cancelled while its volumes are still
// being created; the cleanup still runs and deletes them all.
func TestCancelledRestoreLeavesZeroVolumes(t *testing.T) {
	l := newLab(t, awsdouble.Options{VolumeCreateDuration: time.Hour})
	before := l.volumeCount()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	res, err := restorevolumes.Run(ctx, cancelOnWait{Cloud: l.p, cancel: cancel}, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if len(res.Deleted) != 4 || l.volumeCount() != before {
		t.Fatalf("deleted %v; %d volumes now, %d before", res.Deleted, l.volumeCount(), before)
	}
}

// flakyGets fails the first fails reads of the backupmeta with an error that may pass, and
// counts every read of it.
type flakyGets struct {
	blob.Store
	fails, reads *atomic.Int32
}

func (f flakyGets) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	if key == meta.BackupMetaKey {
		f.reads.Add(1)
		if f.fails.Add(-1) >= 0 {
			return nil, errors.New("injected: connection reset by peer")
		}
	}
	return f.Store.Get(ctx, key, limit)
}

// TestBackupMetaReadRetried: the step, not the agent, reads the backup, so a storage error
// that may pass is retried within Options.StorageRetry; a missing backup is final at once.
func TestBackupMetaReadRetried(t *testing.T) {
	read := func(t *testing.T, l *lab, fails int32, store blob.Store, retry time.Duration) (restorevolumes.Result, string, int32, error) {
		t.Helper()
		var reads, left atomic.Int32
		left.Store(fails)
		var log bytes.Buffer
		res, err := restorevolumes.Run(testContext(t), l.p, &fakePD{}, meta.NewStore(flakyGets{Store: store, fails: &left, reads: &reads}, nil),
			restorevolumes.Options{RestoreID: "r1", StorageRetry: retry, Progress: &log})
		return res, log.String(), reads.Load(), err
	}
	t.Run("an error that passes", func(t *testing.T) {
		l := newLab(t, awsdouble.Options{})
		res, log, reads, err := read(t, l, 1, l.dir, 0)
		if err != nil || len(res.Volumes) != 4 || reads != 2 {
			t.Fatalf("Run = %d volumes, %v after %d reads, want 4 volumes after 2", len(res.Volumes), err, reads)
		}
		if !strings.Contains(log, "Reading the backupmeta failed (attempt 1): read backupmeta: injected: connection reset by peer; retrying in 1s") {
			t.Errorf("progress %q, want the retried read", log)
		}
	})
	t.Run("an error that lasts", func(t *testing.T) {
		l := newLab(t, awsdouble.Options{})
		before := l.volumeCount()
		_, _, reads, err := read(t, l, 1000, l.dir, 1500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "injected: connection reset by peer (read 2 times over 1s)") || reads != 2 {
			t.Fatalf("Run = %v after %d reads, want the storage error after 2 reads (1 s, then 2 s would pass 1.5 s)", err, reads)
		}
		if n := l.volumeCount(); n != before {
			t.Errorf("%d volumes, %d before", n, before)
		}
	})
	t.Run("a missing backup", func(t *testing.T) {
		l := newLab(t, awsdouble.Options{})
		empty, err := blob.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		_, _, reads, err := read(t, l, 0, empty, 0)
		if !errors.Is(err, meta.ErrNotFound) || reads != 1 {
			t.Fatalf("Run = %v after %d reads, want ErrNotFound after 1", err, reads)
		}
	})
}
