package aws_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// twoVolumes is an instance with two data volumes to snapshot.
func twoVolumes(t *testing.T, l *lab) (awsdouble.InstanceInfo, cloud.SnapshotRequest) {
	t.Helper()
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
	return in, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: identity}
}

func snapshotIDs(snaps []cloud.Snapshot) []string {
	var ids []string
	for _, s := range snaps {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

func inventoryIDs(items []awsdouble.InventoryItem) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestWaitsTolerateNotYetVisible: right after their creation AWS does not show the new
// snapshots and volume (DescribeDelay); the waits keep waiting instead of calling them gone.
func TestWaitsTolerateNotYetVisible(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.double.DescribeDelay = 300 * time.Millisecond
	l := newLab(t, o)
	in, req := twoVolumes(t, l)
	snaps, err := l.p.SnapshotInstance(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	done, err := l.p.WaitSnapshots(ctx, snapshotIDs(snaps), nil)
	if err != nil {
		t.Fatalf("wait for snapshots AWS does not show yet: %v", err)
	}
	hidden := l.srv.Stats().Hidden
	if hidden == 0 {
		t.Fatal("the double never hid the new snapshots: the test did not exercise the window")
	}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: done[0].ID, AZ: in.AZ, Type: "gp3", Tags: map[string]string{"fedbr.io/restore": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.WaitVolumes(ctx, []string{v.ID}); err != nil {
		t.Fatalf("wait for a volume AWS does not show yet: %v", err)
	}
	if l.srv.Stats().Hidden == hidden {
		t.Fatal("the double never hid the new volume: the test did not exercise the window")
	}
}

// TestDeleteRightAfterCreate: deleting what this provider just created, while AWS still
// answers NotFound for it, deletes it (NotFound is not taken for "already gone").
func TestDeleteRightAfterCreate(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.double.DescribeDelay = 300 * time.Millisecond
	l := newLab(t, o)
	in, req := twoVolumes(t, l)
	snaps, err := l.p.SnapshotInstance(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteSnapshots(ctx, snapshotIDs(snaps)); err != nil {
		t.Fatal(err)
	}
	if left := l.srv.Inventory(identity).Snapshots; len(left) != 0 {
		t.Fatalf("snapshots left after deleting them right after their creation: %+v", left)
	}
	if l.srv.Stats().Errors["InvalidSnapshot.NotFound"] == 0 {
		t.Fatal("no delete was answered NotFound: the test did not exercise the window")
	}

	in, req = twoVolumes(t, l) // fresh volumes: AWS wants 15 s between snapshots of one volume
	snaps, err = l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: req.VolumeIDs[:1], Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.WaitSnapshots(ctx, snapshotIDs(snaps), nil); err != nil {
		t.Fatal(err)
	}
	restore := map[string]string{"fedbr.io/restore": "r1"}
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: in.AZ, Type: "gp3", Tags: restore})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.p.DeleteVolumes(ctx, []string{v.ID}); err != nil {
		t.Fatal(err)
	}
	if left := l.srv.Inventory(restore).Volumes; len(left) != 0 {
		t.Fatalf("volumes left after deleting one right after its creation: %+v", left)
	}
}

// TestMissingIsBounded: what never shows up fails a wait once the consistency window from the
// wait's start has passed (never an endless wait), and deleting an unknown id is still a quick
// success (it was not created by this provider).
func TestMissingIsBounded(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.window = 200 * time.Millisecond
	l := newLab(t, o)
	if _, err := l.p.WaitSnapshots(ctx, []string{"snap-00000000000000000"}, nil); !errors.Is(err, cloud.ErrSnapshotFailed) {
		t.Fatalf("wait for a snapshot that never existed: %v, want ErrSnapshotFailed", err)
	}
	if _, err := l.p.WaitVolumes(ctx, []string{"vol-00000000000000000"}); !errors.Is(err, cloud.ErrVolumeFailed) {
		t.Fatalf("wait for a volume that never existed: %v, want ErrVolumeFailed", err)
	}
	calls := l.srv.Stats().Calls["DeleteSnapshot"]
	if err := l.p.DeleteSnapshots(ctx, []string{"snap-00000000000000000"}); err != nil {
		t.Fatal(err)
	}
	if n := l.srv.Stats().Calls["DeleteSnapshot"] - calls; n != 1 {
		t.Fatalf("deleting an unknown snapshot took %d calls, want 1", n)
	}
}

// TestLostCreateSnapshotsAnswer: CreateSnapshots ran but its answer was lost (once, then
// every time); the provider finds the set the lost call started instead of starting a second
// one, although AWS does not show it at first and refuses a resend within 15 s.
func TestLostCreateSnapshotsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drops int
	}{{"once", 1}, {"always", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			o := defaultLabOptions()
			o.double.DescribeDelay = 300 * time.Millisecond
			l := newLab(t, o)
			_, req := twoVolumes(t, l)
			l.srv.SetFaults(awsdouble.Faults{DropResponses: map[string]int{"CreateSnapshots": tc.drops}})
			snaps, err := l.p.SnapshotInstance(ctx, req)
			if err != nil {
				t.Fatalf("snapshot with lost answers: %v", err)
			}
			inv := l.srv.Inventory(identity).Snapshots
			if got, want := snapshotIDs(snaps), inventoryIDs(inv); !slices.Equal(got, want) {
				t.Fatalf("provider returned %v, AWS has %v: want the one set the lost call started", got, want)
			}
			for _, sn := range snaps {
				if !sn.AfterLostAnswer {
					t.Errorf("snapshot %s does not say an answer was lost before it", sn.ID)
				}
			}
			st := l.srv.Stats()
			if st.DroppedResponses == 0 {
				t.Fatal("no answer was dropped")
			}
			t.Logf("%d answers dropped, %d hidden; calls %v, errors %v", st.DroppedResponses, st.Hidden, st.Calls, st.Errors)
			if _, err := l.p.WaitSnapshots(ctx, snapshotIDs(snaps), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLostCreateVolumeAnswer: CreateVolume's answer is lost once (the SDK's resend carries the
// same client token and gets the same volume) or every time (the provider finds the volume by
// its tags and source once AWS shows it): one volume either way.
func TestLostCreateVolumeAnswer(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	l := newLab(t, o)
	in, req := twoVolumes(t, l)
	snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: req.VolumeIDs[:1], Tags: identity})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.WaitSnapshots(ctx, snapshotIDs(snaps), nil); err != nil {
		t.Fatal(err)
	}
	for i, drops := range []int{1, -1} {
		restore := map[string]string{"fedbr.io/restore": []string{"once", "always"}[i]}
		l.srv.SetFaults(awsdouble.Faults{DropResponses: map[string]int{"CreateVolume": drops}, DescribeDelay: awsdouble.Duration(300 * time.Millisecond)})
		v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: in.AZ, Type: "gp3", Tags: restore})
		if err != nil {
			t.Fatalf("drops %d: create volume with lost answers: %v", drops, err)
		}
		inv := l.srv.Inventory(restore).Volumes
		if len(inv) != 1 || inv[0].ID != v.ID {
			t.Fatalf("drops %d: provider returned %s, AWS has %+v: want exactly that one", drops, v.ID, inv)
		}
	}
	if l.srv.Stats().DroppedResponses < 2 {
		t.Fatal("answers were not dropped")
	}
}

// TestPerVolumeSnapshotRateIsWaitedOut: a second snapshot of the same volumes within AWS's
// 15 s is refused with SnapshotCreationPerVolumeRateExceeded, which the provider waits out.
func TestPerVolumeSnapshotRateIsWaitedOut(t *testing.T) {
	ctx := testContext(t)
	o := defaultLabOptions()
	o.double.TimeFactor = 20 // 15 s of AWS time pass in under a second
	l := newLab(t, o)
	_, req := twoVolumes(t, l)
	first, err := l.p.SnapshotInstance(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.p.SnapshotInstance(ctx, req)
	if err != nil {
		t.Fatalf("second snapshot of the same volumes: %v", err)
	}
	if l.srv.Stats().Errors["SnapshotCreationPerVolumeRateExceeded"] == 0 {
		t.Fatal("AWS never refused the second snapshot: the test did not exercise the rule")
	}
	if n := len(l.srv.Inventory(identity).Snapshots); n != len(first)+len(second) {
		t.Fatalf("%d snapshots, want %d", n, len(first)+len(second))
	}
}
