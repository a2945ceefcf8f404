package aws_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

var identity = map[string]string{"fedbr.io/backup": "b1"}

// TestSnapshotGroupIsOneInstant: a writer appends record i to volume A, then record i to
// volume B, while snapshot sets of both volumes are taken. Every restored pair must show the
// two volumes at one instant: B never ahead of A, A at most one record ahead of B. The root
// volume and a volume of another store attached to the same instance are excluded; tags are
// copied from the source volume and fedbr's identity tags added.
func TestSnapshotGroupIsOneInstant(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	in := l.instance(t, awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{
		{Device: "/dev/xvdb", SizeGiB: 10, Tags: map[string]string{"role": "data"}},
		{Device: "/dev/xvdc", SizeGiB: 10, Tags: map[string]string{"role": "raft"}},
		{Device: "/dev/xvdd", SizeGiB: 10, Tags: map[string]string{"role": "other-store"}},
	}})
	a, b, foreign := in.Volumes[0], in.Volumes[1], in.Volumes[2]
	wa, wb := volumelock.NewWriter(a.Dir), volumelock.NewWriter(b.Dir)

	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			rec := []byte(fmt.Sprintf("%d\n", i))
			if err := wa.Append("log", rec); err != nil {
				writerDone <- err
				return
			}
			if err := wb.Append("log", rec); err != nil {
				writerDone <- err
				return
			}
		}
	}()

	var sets [][]cloud.Snapshot
	for range 8 {
		snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{a.ID, b.ID}, Tags: identity})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, snaps)
		time.Sleep(2 * time.Millisecond)
		l.srv.Advance(15 * time.Second) // AWS's per-volume snapshot interval

	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}

	var created []string
	var all []string
	for _, set := range sets {
		if len(set) != 2 {
			t.Fatalf("snapshot set has %d snapshots, want 2 (root and foreign volume excluded)", len(set))
		}
		if set[0].AfterLostAnswer || set[1].AfterLostAnswer {
			t.Fatalf("snapshot set %+v says an answer was lost; none was", set)
		}
		ids := []string{set[0].ID, set[1].ID}
		all = append(all, ids...)
		done, err := l.p.WaitSnapshots(ctx, ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, s := range done {
			if s.VolumeID == foreign.ID {
				t.Fatalf("foreign volume %s was snapshotted", foreign.ID)
			}
			if s.Tags["fedbr.io/backup"] != "b1" || s.Tags["role"] == "" {
				t.Fatalf("snapshot %s tags = %v, want source tags plus identity", s.ID, s.Tags)
			}
			// Completed carries EC2's completionTime: after the start, no later than now.
			if s.Completed.Before(s.Started) || s.Completed.After(l.srv.Now()) {
				t.Fatalf("snapshot %s started %v, completed %v", s.ID, s.Started, s.Completed)
			}
			v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: s.ID, AZ: "us-west-2a", Tags: identity})
			if err != nil {
				t.Fatal(err)
			}
			created = append(created, v.ID)
			if _, err := l.p.WaitVolumes(ctx, []string{v.ID}); err != nil {
				t.Fatal(err)
			}
			data := readFile(t, volumeDir(t, l, v.ID), "log")
			if len(data) > 0 && data[len(data)-1] != '\n' {
				t.Fatalf("restored volume has a torn record: %q", data[max(0, len(data)-10):])
			}
			counts[s.VolumeID] = countRecords(data)
		}
		na, nb := counts[a.ID], counts[b.ID]
		if nb > na || na > nb+1 {
			t.Fatalf("snapshot set is not one instant: volume A has %d records, volume B %d", na, nb)
		}
	}

	if err := l.p.DeleteVolumes(ctx, created); err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteSnapshots(ctx, all); err != nil {
		t.Fatal(err)
	}
	inv := l.srv.Inventory(identity)
	if len(inv.Snapshots) != 0 || len(inv.Volumes) != 0 {
		t.Fatalf("leaked: %+v", inv)
	}
}

// TestListByTag: the sweeper's view finds exactly what carries the identity tags.
func TestListByTag(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	var reqs []cloud.SnapshotRequest
	for i := range 4 {
		in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
		tags := identity
		if i == 3 {
			tags = map[string]string{"fedbr.io/backup": "other"}
		}
		reqs = append(reqs, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: tags})
	}
	if _, err := l.p.SnapshotInstances(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	snaps, err := l.p.ListSnapshots(ctx, identity)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 6 {
		t.Fatalf("found %d snapshots of b1, want 6", len(snaps))
	}
	all, err := l.p.ListSnapshots(ctx, map[string]string{"fedbr.io/backup": ""})
	if err != nil || len(all) != 8 {
		t.Fatalf("found %d snapshots with the key, want 8 (%v)", len(all), err)
	}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: "us-west-2a", Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := l.p.ListVolumes(ctx, identity)
	if err != nil || len(vols) != 1 || vols[0].ID != v.ID {
		t.Fatalf("volumes of b1 = %+v, %v", vols, err)
	}
}

// TestRestoreToAnotherAZWithEncryptionAndTags restores a snapshot taken in one AZ into another
// with type, performance, encryption with a KMS key, and tags; more than 50 tags is refused
// before any call.
func TestRestoreToAnotherAZWithEncryptionAndTags(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	in := l.instance(t, awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 20}}})
	if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("db/000001.log", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}, Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.WaitSnapshots(ctx, []string{snaps[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	key := "arn:aws:kms:us-west-2:123456789012:key/fedbr-test"
	tags := map[string]string{"fedbr.io/restore": "r1", "snapshot/createdFromSnapshotId": snaps[0].ID}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: "us-west-2c", Type: "gp3", IOPS: 7000,
		Throughput: 400, Encrypted: true, KMSKeyID: key, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := l.p.WaitVolumes(ctx, []string{v.ID})
	if err != nil {
		t.Fatal(err)
	}
	got := vols[0]
	if got.AZ != "us-west-2c" || got.Type != "gp3" || got.IOPS != 7000 || got.Throughput != 400 || !got.Encrypted ||
		got.KMSKeyID != key || got.SizeGiB != 20 || got.Tags["fedbr.io/restore"] != "r1" || got.State != cloud.VolumeAvailable {
		t.Fatalf("restored volume = %+v", got)
	}
	if b := readFile(t, volumeDir(t, l, v.ID), "db/000001.log"); string(b) != "hello\n" {
		t.Fatalf("restored data = %q", b)
	}

	many := map[string]string{}
	for i := range 51 {
		many["k"+strconv.Itoa(i)] = "v"
	}
	before := l.srv.Stats().Calls["CreateVolume"]
	if _, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: "us-west-2b", Tags: many}); !errors.Is(err, cloud.ErrTooManyTags) {
		t.Fatalf("51 tags: err = %v, want ErrTooManyTags", err)
	}
	if after := l.srv.Stats().Calls["CreateVolume"]; after != before {
		t.Fatal("a request with 51 tags reached AWS")
	}
}

// TestFSRWithCredits asks FSR for 12 snapshots (two calls of at most 10 ids): the first 5
// are enabled, the 7 over AWS's quota come back refused with AWS's code, not as an error.
// It waits for the enabled ones' credits read from CloudWatch, and restores a fast-restored
// volume that consumes a credit.
func TestFSRWithCredits(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.double.TimeFactor = 3600 // an hour of AWS time per second
	l := newLab(t, o)
	var ids []string
	for range 6 {
		in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 100}, {Device: "/dev/xvdc", SizeGiB: 100}}})
		snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: identity})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, snaps[0].ID, snaps[1].ID)
	}
	if _, err := l.p.WaitSnapshots(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	const az = "us-west-2b"
	states, refused, err := l.p.EnableFSR(ctx, az, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 5 || len(refused) != len(ids)-5 {
		t.Fatalf("EnableFSR enabled %d and refused %d, want 5 and %d", len(states), len(refused), len(ids)-5)
	}
	for i, r := range refused {
		if r.SnapshotID != ids[5+i] || r.AZ != az || r.Code != awsdouble.FSRQuotaExceeded || !strings.Contains(r.Reason(), r.Message) {
			t.Fatalf("refusal %d: %+v, want %s in %s refused with %s", i, r, ids[5+i], az, awsdouble.FSRQuotaExceeded)
		}
	}
	ids = ids[:5]
	if n := l.srv.Stats().Calls["EnableFastSnapshotRestores"]; n != 2 {
		t.Fatalf("EnableFastSnapshotRestores calls = %d, want 2 batches", n)
	}
	capacity, _ := cloud.FSRBucket(100)
	if capacity != 10 {
		t.Fatalf("credit bucket of 100 GiB = %v, want 10", capacity)
	}
	var last cloud.Progress
	if err := l.p.WaitFSR(ctx, az, ids, func(p cloud.Progress) { last = p }); err != nil {
		t.Fatal(err)
	}
	if last.Done != len(ids) {
		t.Fatalf("last progress = %+v", last)
	}
	if err := l.p.WaitFSR(ctx, "us-west-2c", ids[:1], nil); err == nil {
		t.Fatal("waiting for FSR in an AZ where it was never enabled succeeded")
	}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: ids[0], AZ: az, Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if !v.FastRestored {
		t.Fatal("volume created with FSR credits is not fast-restored")
	}
	other, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: ids[0], AZ: "us-west-2a", Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if other.FastRestored {
		t.Fatal("volume in an AZ without FSR is fast-restored")
	}
	if err := l.p.DisableFSR(ctx, az, ids); err != nil {
		t.Fatal(err)
	}
	if credits, err := l.p.FSRCredits(ctx, ids[0], az); err != nil || credits != 0 {
		t.Fatalf("credits after disable = %v, %v", credits, err)
	}
}

// TestSnapshotSize checks full and incremental sizes against the blocks actually written,
// both from fullSnapshotSizeInBytes and by listing blocks.
func TestSnapshotSize(t *testing.T) {
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omitFullSize=%v", omit), func(t *testing.T) {
			ctx := testContext(t)
			o := defaultLabOptions()
			o.double.OmitFullSnapshotSize = omit
			l := newLab(t, o)
			in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
			w := volumelock.NewWriter(in.Volumes[0].Dir)
			const bs = awsdouble.BlockSize
			snap := func() string {
				s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.p.WaitSnapshots(ctx, []string{s[0].ID}, nil); err != nil {
					t.Fatal(err)
				}
				return s[0].ID
			}
			// 3 data blocks, one zero block (not written data), 1 data block.
			data := make([]byte, 5*bs)
			_, _ = rand.Read(data[:3*bs])
			_, _ = rand.Read(data[4*bs:])
			if err := w.Append("a", data); err != nil {
				t.Fatal(err)
			}
			first := snap()
			more := make([]byte, 2*bs)
			_, _ = rand.Read(more)
			if err := w.Append("a", more); err != nil {
				t.Fatal(err)
			}
			second := snap()
			sizes, err := l.p.SnapshotSizes(ctx, []cloud.SizeRequest{{SnapshotID: first}, {SnapshotID: second, PreviousID: first}})
			if err != nil {
				t.Fatal(err)
			}
			want := []cloud.Size{{FullBytes: 4 * bs, IncrementalBytes: 4 * bs}, {FullBytes: 6 * bs, IncrementalBytes: 2 * bs}}
			for i := range want {
				got := sizes[i]
				got.Elapsed = 0 // measured, not compared
				if got != want[i] {
					t.Errorf("size %d = %+v, want %+v", i, sizes[i], want[i])
				}
			}
			listed := l.srv.Stats().Calls["ListSnapshotBlocks"]
			if omit != (listed > 0) {
				t.Errorf("ListSnapshotBlocks calls = %d with omitFullSize=%v", listed, omit)
			}
		})
	}
}

// TestThrottlingStorm: half of all calls are throttled; a whole backup/restore/cleanup cycle
// still completes with no error surfaced. The full cycle runs with the SDK's standard retry
// mode; the adaptive mode (the production default), whose client-side limiter drops to 0.5
// attempts/s under a sustained storm, runs the snapshot/wait/delete part to keep the test
// short.
func TestThrottlingStorm(t *testing.T) {
	t.Run("standard", func(t *testing.T) {
		t.Parallel()
		o := defaultLabOptions()
		o.retry = "standard"
		stormCycle(t, newLab(t, o), 3, 2)
	})
	t.Run("adaptive", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		l := newLab(t, defaultLabOptions())
		in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
		l.srv.SetFaults(awsdouble.Faults{Throttle: 0.5})
		s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}, Tags: identity})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.p.WaitSnapshots(ctx, []string{s[0].ID}, nil); err != nil {
			t.Fatal(err)
		}
		if err := l.p.DeleteSnapshots(ctx, []string{s[0].ID}); err != nil {
			t.Fatal(err)
		}
		t.Logf("storm: %d calls throttled", l.srv.Stats().InjectedThrottles)
	})
}

func stormCycle(t *testing.T, l *lab, instances, volumes int) {
	ctx := testContext(t)
	var insts []awsdouble.InstanceInfo
	for range instances {
		var specs []awsdouble.VolumeSpec
		for i := range volumes {
			specs = append(specs, awsdouble.VolumeSpec{Device: fmt.Sprintf("/dev/xvd%c", 'b'+i), SizeGiB: 10})
		}
		insts = append(insts, l.instance(t, awsdouble.InstanceSpec{Volumes: specs}))
	}
	for _, in := range insts {
		if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("x", bytes.Repeat([]byte{1}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	l.srv.SetFaults(awsdouble.Faults{Throttle: 0.5})
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	errs := make(chan error, len(insts))
	for _, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var vids []string
			for _, v := range in.Volumes {
				vids = append(vids, v.ID)
			}
			s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: vids, Tags: identity})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			for _, x := range s {
				ids = append(ids, x.ID)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snaps, err := l.p.WaitSnapshots(ctx, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]cloud.SizeRequest, len(snaps))
	for i, s := range snaps {
		reqs[i] = cloud.SizeRequest{SnapshotID: s.ID}
	}
	if _, err := l.p.SnapshotSizes(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: "us-west-2b", Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.WaitVolumes(ctx, []string{v.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.FSRCredits(ctx, ids[0], "us-west-2b"); err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteVolumes(ctx, []string{v.ID}); err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteSnapshots(ctx, ids); err != nil {
		t.Fatal(err)
	}
	st := l.srv.Stats()
	if st.InjectedThrottles == 0 {
		t.Fatal("the storm throttled nothing")
	}
	t.Logf("storm: %d calls throttled, calls %v", st.InjectedThrottles, st.Calls)
	l.srv.SetFaults(awsdouble.Faults{})
	if inv := l.srv.Inventory(identity); len(inv.Snapshots)+len(inv.Volumes) != 0 {
		t.Fatalf("leaked: %+v", inv)
	}
}

// TestPendingQueue: with room for 4 pending snapshots, 12 snapshots started at once are held
// back client-side, so AWS never answers PendingSnapshotLimitExceeded and never has more than
// 4 pending.
func TestPendingQueue(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.limits.PendingSnapshots = 4
	limits := awsdouble.DefaultLimits()
	limits.PendingSnapshots = 4
	o.double.Limits = &limits
	o.double.SnapshotBaseDuration = 100 * time.Millisecond
	l := newLab(t, o)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}})
			if err == nil {
				_, err = l.p.WaitSnapshots(ctx, []string{s[0].ID, s[1].ID}, nil)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := l.srv.Stats()
	if st.Calls["CreateSnapshots"] != 6 || st.Errors["PendingSnapshotLimitExceeded"] != 0 || st.MaxPending > 4 {
		t.Fatalf("stats = %+v, want 6 CreateSnapshots, no PendingSnapshotLimitExceeded, at most 4 pending", st)
	}
}

// TestPendingLimitFromAWSIsRetried: when the account's pending snapshots come from elsewhere
// (the client queue does not know them), AWS's PendingSnapshotLimitExceeded is waited out.
func TestPendingLimitFromAWSIsRetried(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	limits := awsdouble.DefaultLimits()
	limits.PendingSnapshots = 2
	o.double.Limits = &limits
	o.double.SnapshotBaseDuration = 100 * time.Millisecond
	l := newLab(t, o)
	var ids []string
	for range 3 {
		in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
		s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s[0].ID, s[1].ID)
	}
	if _, err := l.p.WaitSnapshots(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	if l.srv.Stats().Errors["PendingSnapshotLimitExceeded"] == 0 {
		t.Fatal("AWS never refused; the test did not exercise the retry")
	}
}

// TestSnapshotErrorFailsFast: a snapshot that goes to the error state fails the wait at once,
// although its sibling would take an hour.
func TestSnapshotErrorFailsFast(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.double.SnapshotBaseDuration = time.Hour
	l := newLab(t, o)
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
	l.srv.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{in.Volumes[1].ID}})
	s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}})
	if err != nil {
		t.Fatal(err)
	}
	var reports int
	_, err = l.p.WaitSnapshots(ctx, []string{s[0].ID, s[1].ID}, func(cloud.Progress) { reports++ })
	if !errors.Is(err, cloud.ErrSnapshotFailed) {
		t.Fatalf("wait err = %v, want ErrSnapshotFailed", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the wait ran into the deadline instead of failing fast")
	}
}

// TestWaitReportsProgressAndHonoursContext: the wait reports progress and stops when its
// context ends.
func TestWaitReportsProgressAndHonoursContext(t *testing.T) {
	o := defaultLabOptions()
	o.double.SnapshotBaseDuration = time.Hour
	l := newLab(t, o)
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
	s, err := l.p.SnapshotInstance(testContext(t), cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var last cloud.Progress
	_, err = l.p.WaitSnapshots(ctx, []string{s[0].ID}, func(p cloud.Progress) { last = p })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if last.Total != 1 || last.Done != 0 {
		t.Fatalf("last progress = %+v", last)
	}
}

// TestDeleteMissingIsSuccess: deleting what is already gone succeeds.
func TestDeleteMissingIsSuccess(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	if err := l.p.DeleteSnapshots(ctx, []string{"snap-00000000000000000"}); err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteVolumes(ctx, []string{"vol-00000000000000000"}); err != nil {
		t.Fatal(err)
	}
}

// TestSurvivesOutage: the double drops every connection for a while (a stop/restart); calls
// made meanwhile succeed once it is back.
func TestSurvivesOutage(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
	l.srv.SetFaults(awsdouble.Faults{DownFor: awsdouble.Duration(300 * time.Millisecond)})
	s, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	l.srv.SetFaults(awsdouble.Faults{Unavailable: []string{"DescribeSnapshots"}})
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.srv.SetFaults(awsdouble.Faults{})
	}()
	if _, err := l.p.WaitSnapshots(ctx, []string{s[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
}
