package aws_test

import (
	"maps"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// TestListByTagKeyAndUntag: a listing by tag key alone (empty value) finds every resource
// carrying the key whatever its value, a volume tells when it was created, and Untag removes
// only the keys asked for (a key a resource lacks is no error).
func TestListByTagKeyAndUntag(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID},
		Tags: map[string]string{"mark": "a/b", "keep": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	before := l.srv.Now()
	v, err := l.p.CreateVolume(ctx, cloud.VolumeSpec{SnapshotID: snaps[0].ID, AZ: in.AZ, Tags: map[string]string{"mark": "c/d", "keep": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	listedSnaps, err := l.p.ListSnapshots(ctx, map[string]string{"mark": ""})
	if err != nil || len(listedSnaps) != 1 || listedSnaps[0].ID != snaps[0].ID {
		t.Fatalf("snapshots by tag key: %+v, %v", listedSnaps, err)
	}
	vols, err := l.p.ListVolumes(ctx, map[string]string{"mark": ""})
	if err != nil || len(vols) != 1 || vols[0].ID != v.ID {
		t.Fatalf("volumes by tag key: %+v, %v", vols, err)
	}
	if c := vols[0].Created; c.Before(before.Add(-time.Second)) || c.After(l.srv.Now().Add(time.Second)) {
		t.Errorf("volume created at %v, want about %v", c, before)
	}
	if err := l.p.UntagSnapshots(ctx, []string{snaps[0].ID}, []string{"mark", "absent"}); err != nil {
		t.Fatal(err)
	}
	if err := l.p.UntagVolumes(ctx, []string{v.ID}, []string{"mark"}); err != nil {
		t.Fatal(err)
	}
	got, err := l.p.DescribeSnapshots(ctx, []string{snaps[0].ID})
	if err != nil || len(got) != 1 || !maps.Equal(got[0].Tags, map[string]string{"keep": "1"}) {
		t.Errorf("snapshot after untag: %+v, %v", got, err)
	}
	gotVols, err := l.p.DescribeVolumes(ctx, []string{v.ID})
	if err != nil || len(gotVols) != 1 || !maps.Equal(gotVols[0].Tags, map[string]string{"keep": "2"}) {
		t.Errorf("volume after untag: %+v, %v", gotVols, err)
	}
	if left, err := l.p.ListSnapshots(ctx, map[string]string{"mark": ""}); err != nil || len(left) != 0 {
		t.Errorf("snapshots still marked: %+v, %v", left, err)
	}
}
