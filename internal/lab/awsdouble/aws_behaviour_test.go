package awsdouble_test

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// stopped is a double clock that practically stands still, so a test moves it with Advance
// and nothing depends on how fast the test runs.
const stopped = 1e-9

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func oneVolumeInstance(t *testing.T, srv *awsdouble.Server) awsdouble.InstanceInfo {
	t.Helper()
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1, Tags: map[string]string{"app": "tikv"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func createSnapshots(t *testing.T, ctx context.Context, c *ec2.Client, instanceID string) []string {
	t.Helper()
	out, err := c.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(instanceID), ExcludeBootVolume: awssdk.Bool(true)},
		CopyTagsFromSource:    types.CopyTagsFromSourceVolume,
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sn := range out.Snapshots {
		if sn.State != types.SnapshotStatePending {
			t.Fatalf("CreateSnapshots answered %s, want pending", sn.State)
		}
		ids = append(ids, awssdk.ToString(sn.SnapshotId))
	}
	return ids
}

func describeSnapshot(t *testing.T, ctx context.Context, c *ec2.Client, id string) types.Snapshot {
	t.Helper()
	out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return out.Snapshots[0]
}

// TestDescribeDelay: a new snapshot or volume is invisible for DescribeDelay after its
// creation returned: by id it is InvalidSnapshot.NotFound / InvalidVolume.NotFound (also to
// DeleteSnapshot, DeleteVolume and CreateTags), a listing leaves it out; then it is there.
func TestDescribeDelay(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped, DescribeDelay: 10 * time.Second})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	// Volumes made by the lab's admin API are there from the start.
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{in.Volumes[0].ID}}); err != nil {
		t.Fatalf("the instance's own volume: %v", err)
	}
	snap := createSnapshots(t, ctx, c, in.ID)[0]
	vol, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	volID := awssdk.ToString(vol.VolumeId)

	_, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{snap}})
	if code(err) != "InvalidSnapshot.NotFound" {
		t.Fatalf("describe the new snapshot by id: %v, want InvalidSnapshot.NotFound", err)
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{volID}})
	if code(err) != "InvalidVolume.NotFound" {
		t.Fatalf("describe the new volume by id: %v, want InvalidVolume.NotFound", err)
	}
	_, err = c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: awssdk.String(snap)})
	if code(err) != "InvalidSnapshot.NotFound" {
		t.Fatalf("delete the new snapshot: %v, want InvalidSnapshot.NotFound", err)
	}
	_, err = c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: awssdk.String(volID)})
	if code(err) != "InvalidVolume.NotFound" {
		t.Fatalf("delete the new volume: %v, want InvalidVolume.NotFound", err)
	}
	listed := func() (snaps, vols []string) {
		t.Helper()
		byFilter, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{Filters: []types.Filter{{Name: awssdk.String("snapshot-id"), Values: []string{snap}}}})
		if err != nil {
			t.Fatal(err)
		}
		byTag, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, Filters: []types.Filter{{Name: awssdk.String("tag:app"), Values: []string{"tikv"}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(byFilter.Snapshots, byTag.Snapshots...) {
			snaps = append(snaps, awssdk.ToString(s.SnapshotId))
		}
		all, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range all.Volumes {
			vols = append(vols, awssdk.ToString(v.VolumeId))
		}
		return snaps, vols
	}
	snaps, vols := listed()
	if len(snaps) != 0 || slices.Contains(vols, volID) {
		t.Fatalf("listings show new resources before the delay: snapshots %v, volumes %v", snaps, vols)
	}
	if h := srv.Stats().Hidden; h < 6 {
		t.Fatalf("stats count %d hidden answers, want at least 6", h)
	}

	srv.Advance(10 * time.Second)
	if got := describeSnapshot(t, ctx, c, snap); awssdk.ToString(got.SnapshotId) != snap {
		t.Fatalf("described %v", got.SnapshotId)
	}
	snaps, vols = listed()
	if len(snaps) != 2 || !slices.Contains(vols, volID) {
		t.Fatalf("after the delay: snapshots %v (want it by filter and by tag), volumes %v", snaps, vols)
	}
	if _, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: awssdk.String(volID)}); err != nil {
		t.Fatalf("delete after the delay: %v", err)
	}
}

// TestDescribeDelayAtRunTime: the faults endpoint sets the delay for resources created from
// then on, and refuses a negative one.
func TestDescribeDelayAtRunTime(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	before, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	put := func(body string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url+"/_lab/faults", bytes.NewBufferString(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if st := put(`{"describeDelay":"-1s"}`); st != http.StatusBadRequest {
		t.Fatalf("negative delay answered %d, want 400", st)
	}
	if st := put(`{"describeDelay":"1m"}`); st != http.StatusOK {
		t.Fatalf("PUT faults answered %d", st)
	}
	after, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{awssdk.ToString(before.VolumeId)}}); err != nil {
		t.Fatalf("a volume created before the fault: %v", err)
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{awssdk.ToString(after.VolumeId)}})
	if code(err) != "InvalidVolume.NotFound" {
		t.Fatalf("a volume created after the fault: %v, want InvalidVolume.NotFound", err)
	}
}

// TestDropResponse: a dropped call ran (its resources exist) but its caller got a transport
// error, only as many times as asked; CreateVolume's client token makes the retry return the
// volume the lost call created.
func TestDropResponse(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	srv.SetFaults(awsdouble.Faults{DropResponses: map[string]int{"CreateVolume": 1, "CreateSnapshots": 1}})
	tags := []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: awssdk.String("restore"), Value: awssdk.String("r1")}}}}
	vin := &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1), ClientToken: awssdk.String("token-1"), TagSpecifications: tags}
	_, err := c.CreateVolume(ctx, vin)
	if err == nil || code(err) != "" {
		t.Fatalf("dropped CreateVolume: %v, want a transport error", err)
	}
	inv := srv.Inventory(map[string]string{"restore": "r1"})
	if len(inv.Volumes) != 1 {
		t.Fatalf("%d volumes after the dropped call, want the 1 it created", len(inv.Volumes))
	}
	again, err := c.CreateVolume(ctx, vin)
	if err != nil {
		t.Fatalf("retry with the same token: %v", err)
	}
	if got := awssdk.ToString(again.VolumeId); got != inv.Volumes[0].ID {
		t.Fatalf("retry created %s, want the lost call's %s", got, inv.Volumes[0].ID)
	}
	if n := len(srv.Inventory(map[string]string{"restore": "r1"}).Volumes); n != 1 {
		t.Fatalf("%d volumes after the retry, want 1", n)
	}

	_, err = c.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(in.ID), ExcludeBootVolume: awssdk.Bool(true)},
		CopyTagsFromSource:    types.CopyTagsFromSourceVolume,
	})
	if err == nil || code(err) != "" {
		t.Fatalf("dropped CreateSnapshots: %v, want a transport error", err)
	}
	if n := len(srv.Inventory(map[string]string{"app": "tikv"}).Snapshots); n != 1 {
		t.Fatalf("%d snapshots after the dropped call, want the 1 it created", n)
	}
	if st := srv.Stats(); st.DroppedResponses != 2 {
		t.Fatalf("%d dropped responses counted, want 2", st.DroppedResponses)
	}
	if f := srv.Faults(); f.DropResponses["CreateVolume"] != 0 || f.DropResponses["CreateSnapshots"] != 0 {
		t.Fatalf("drops left: %v", f.DropResponses)
	}
	if _, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1)}); err != nil {
		t.Fatalf("CreateVolume once the drops are used up: %v", err)
	}
}

// TestSnapshotFailsAfterPending: a snapshot chosen to fail is pending after its create and
// turns error only SnapshotErrorAfter later, by volume (a fault) or by snapshot id (admin).
func TestSnapshotFailsAfterPending(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped, SnapshotBaseDuration: time.Hour})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	other := oneVolumeInstance(t, srv)
	srv.SetFaults(awsdouble.Faults{SnapshotErrorVolumes: []string{in.Volumes[0].ID}, SnapshotErrorAfter: awsdouble.Duration(time.Minute)})
	failing := createSnapshots(t, ctx, c, in.ID)[0]
	healthy := createSnapshots(t, ctx, c, other.ID)[0]
	if st := describeSnapshot(t, ctx, c, failing).State; st != types.SnapshotStatePending {
		t.Fatalf("failing snapshot right after its create: %s, want pending", st)
	}
	srv.Advance(time.Minute)
	got := describeSnapshot(t, ctx, c, failing)
	if got.State != types.SnapshotStateError || awssdk.ToString(got.StateMessage) == "" {
		t.Fatalf("failing snapshot a minute later: %s %q, want error with a message", got.State, awssdk.ToString(got.StateMessage))
	}
	if st := describeSnapshot(t, ctx, c, healthy).State; st != types.SnapshotStatePending {
		t.Fatalf("the other instance's snapshot: %s, want pending", st)
	}

	// By id, through the admin API.
	fail := func(id, after string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/_lab/snapshots/"+id+"/fail?after="+after, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if st := fail("snap-missing", "1s"); st != http.StatusBadRequest {
		t.Fatalf("failing an unknown snapshot answered %d, want 400", st)
	}
	if st := fail(failing, "1s"); st != http.StatusBadRequest {
		t.Fatalf("failing a snapshot in error answered %d, want 400", st)
	}
	if st := fail(healthy, "30s"); st != http.StatusOK {
		t.Fatalf("failing a pending snapshot answered %d", st)
	}
	if st := describeSnapshot(t, ctx, c, healthy).State; st != types.SnapshotStatePending {
		t.Fatalf("snapshot failed by id, before its time: %s, want pending", st)
	}
	srv.Advance(30 * time.Second)
	if st := describeSnapshot(t, ctx, c, healthy).State; st != types.SnapshotStateError {
		t.Fatalf("snapshot failed by id, after its time: %s, want error", st)
	}
}

// TestSnapshotPerVolumeRate: a volume snapshotted again within 15 s is refused with
// SnapshotCreationPerVolumeRateExceeded (and nothing is created); 15 s later it is accepted.
func TestSnapshotPerVolumeRate(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped, SnapshotMBps: 1e6})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	createSnapshots(t, ctx, c, in.ID)
	srv.Advance(14 * time.Second)
	_, err := c.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(in.ID), ExcludeBootVolume: awssdk.Bool(true)},
	})
	if code(err) != "SnapshotCreationPerVolumeRateExceeded" {
		t.Fatalf("second snapshot 14s later: %v, want SnapshotCreationPerVolumeRateExceeded", err)
	}
	if n := len(srv.Inventory(map[string]string{"app": "tikv"}).Snapshots); n != 1 {
		t.Fatalf("%d snapshots after the refused call, want 1", n)
	}
	srv.Advance(time.Second)
	createSnapshots(t, ctx, c, in.ID)

	// Unlimited lifts the rule, as it lifts every other limit.
	un, uurl := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped, Unlimited: true})
	uc, _ := clients(uurl)
	uin := oneVolumeInstance(t, un)
	createSnapshots(t, ctx, uc, uin.ID)
	createSnapshots(t, ctx, uc, uin.ID)
}

// TestPerActionBuckets: every EC2 action has its own bucket, as AWS evaluates each API
// individually: exhausting DescribeInstances leaves DescribeVolumes its tokens.
func TestPerActionBuckets(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	limits := awsdouble.DefaultLimits()
	throttled := false
	for range int(limits.EC2Describe.Burst) + 1 {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
		if code(err) == "RequestLimitExceeded" {
			throttled = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !throttled {
		t.Fatalf("%d DescribeInstances at once were not throttled", int(limits.EC2Describe.Burst)+1)
	}
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{in.Volumes[0].ID}}); err != nil {
		t.Fatalf("DescribeVolumes after DescribeInstances' bucket ran dry: %v", err)
	}
}

// TestDeleteTags: DeleteTags removes a tag given by key alone whatever its value, one given
// with a value only when the value matches, and nothing more; a tag the resource lacks is no
// error; an unknown snapshot is InvalidSnapshot.NotFound and fails the whole call.
func TestDeleteTags(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	snap := createSnapshots(t, ctx, c, in.ID)[0]
	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{snap, in.Volumes[0].ID},
		Tags: []types.Tag{{Key: awssdk.String("a"), Value: awssdk.String("1")}, {Key: awssdk.String("b"), Value: awssdk.String("2")}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{snap, in.Volumes[0].ID},
		Tags: []types.Tag{{Key: awssdk.String("a")}, {Key: awssdk.String("b"), Value: awssdk.String("other")}, {Key: awssdk.String("absent")}}})
	if err != nil {
		t.Fatal(err)
	}
	tags := func(ts []types.Tag) map[string]string {
		m := map[string]string{}
		for _, tg := range ts {
			m[awssdk.ToString(tg.Key)] = awssdk.ToString(tg.Value)
		}
		return m
	}
	want := map[string]string{"app": "tikv", "b": "2"}
	if got := tags(describeSnapshot(t, ctx, c, snap).Tags); !maps.Equal(got, want) {
		t.Errorf("snapshot tags %v, want %v", got, want)
	}
	vols, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{in.Volumes[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tags(vols.Volumes[0].Tags); !maps.Equal(got, want) {
		t.Errorf("volume tags %v, want %v", got, want)
	}
	_, err = c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{snap, "snap-0000000000000000"}, Tags: []types.Tag{{Key: awssdk.String("b")}}})
	if code(err) != "InvalidSnapshot.NotFound" {
		t.Fatalf("untag an unknown snapshot: %v, want InvalidSnapshot.NotFound", err)
	}
	if got := tags(describeSnapshot(t, ctx, c, snap).Tags); !maps.Equal(got, want) {
		t.Errorf("a failed call changed the tags: %v", got)
	}
}

// enableFSR enables FSR of ids in az and returns the codes of the refused snapshot-AZ pairs
// by snapshot id.
func enableFSR(t *testing.T, ctx context.Context, c *ec2.Client, az string, ids ...string) map[string]string {
	t.Helper()
	out, err := c.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{AvailabilityZones: []string{az}, SourceSnapshotIds: ids})
	if err != nil {
		t.Fatalf("enable FSR of %v in %s: %v", ids, az, err)
	}
	refused := map[string]string{}
	for _, u := range out.Unsuccessful {
		for _, e := range u.FastSnapshotRestoreStateErrors {
			refused[awssdk.ToString(u.SnapshotId)] = awssdk.ToString(e.Error.Code)
		}
	}
	if len(out.Successful)+len(refused) != len(ids) {
		t.Fatalf("enable FSR of %d snapshots: %d successful, %d refused", len(ids), len(out.Successful), len(refused))
	}
	return refused
}

// TestFSRQuota: at most 5 snapshots have FSR enabled in the account-region, counted in
// snapshots (one enabled in a second AZ takes no second place), for every client of the
// double alike; a refused one is an Unsuccessful item of a call that succeeds. Disabling one
// frees its place. A snapshot over 16 TiB is refused whatever the quota.
func TestFSRQuota(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	other, _ := clients(url) // another plane of the same account
	var vols []awsdouble.VolumeSpec
	for i := range 6 {
		vols = append(vols, awsdouble.VolumeSpec{Device: "/dev/xvd" + string(rune('b'+i)), SizeGiB: 1})
	}
	vols = append(vols, awsdouble.VolumeSpec{Device: "/dev/xvdx", SizeGiB: 16*1024 + 1}, awsdouble.VolumeSpec{Device: "/dev/xvdy", SizeGiB: 16 * 1024})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	snaps := createSnapshots(t, ctx, c, in.ID) // in device order: six of 1 GiB, 16 TiB + 1 GiB, 16 TiB
	small, over, limit := snaps[:6], snaps[6], snaps[7]

	if r := enableFSR(t, ctx, c, "us-west-2a", small[:5]...); len(r) != 0 {
		t.Fatalf("5 snapshots refused %v, want none", r)
	}
	if r := enableFSR(t, ctx, c, "us-west-2b", small[0]); len(r) != 0 {
		t.Fatalf("an enabled snapshot in a second AZ: refused %v", r)
	}
	for _, cl := range []*ec2.Client{c, other} {
		if r := enableFSR(t, ctx, cl, "us-west-2a", small[5]); r[small[5]] != awsdouble.FSRQuotaExceeded {
			t.Fatalf("a sixth snapshot: refused %v, want %s", r, awsdouble.FSRQuotaExceeded)
		}
	}
	if _, err := c.DisableFastSnapshotRestores(ctx, &ec2.DisableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-west-2a"}, SourceSnapshotIds: []string{small[4]}}); err != nil {
		t.Fatal(err)
	}
	if r := enableFSR(t, ctx, other, "us-west-2a", small[5]); len(r) != 0 {
		t.Fatalf("a sixth snapshot once one was disabled: refused %v", r)
	}
	if _, err := c.DisableFastSnapshotRestores(ctx, &ec2.DisableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-west-2a"}, SourceSnapshotIds: []string{small[5]}}); err != nil {
		t.Fatal(err)
	}
	if r := enableFSR(t, ctx, c, "us-west-2a", over, limit); r[over] != awsdouble.FSRSnapshotTooLarge || len(r) != 1 {
		t.Fatalf("16 TiB + 1 GiB and 16 TiB: refused %v, want only the first, %s", r, awsdouble.FSRSnapshotTooLarge)
	}
}

// TestTagRestrictions: EC2 refuses a tag key with AWS's prefix (in any case), a key over 128
// characters and a value over 256, on CreateTags and on create (TagSpecifications), with
// InvalidParameterValue and nothing changed; keys of 128 and values of 256 characters are
// taken.
func TestTagRestrictions(t *testing.T) {
	ctx := testCtx(t)
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	c, _ := clients(url)
	in := oneVolumeInstance(t, srv)
	vol := in.Volumes[0].ID
	long := func(n int) string { return strings.Repeat("é", n) } // counted in characters, not bytes
	for _, tt := range []struct {
		name, key, value, code string
	}{
		{"aws: key", "aws:backup", "x", "InvalidParameterValue"},
		{"AWS: key", "AWS:Backup", "x", "InvalidParameterValue"},
		{"129-character key", long(129), "x", "InvalidParameterValue"},
		{"257-character value", "k", long(257), "InvalidParameterValue"},
		{"128-character key, 256-character value", long(128), long(256), ""},
		{"aws: in a value", "k", "aws:x", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Inventory(nil).Volumes)
			tags := []types.Tag{{Key: awssdk.String(tt.key), Value: awssdk.String(tt.value)}}
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: tags})
			if code(err) != tt.code {
				t.Fatalf("CreateTags: %v, want %q", err, tt.code)
			}
			_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(1),
				TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: tags}}})
			if code(err) != tt.code {
				t.Fatalf("CreateVolume: %v, want %q", err, tt.code)
			}
			if after := len(srv.Inventory(nil).Volumes); tt.code != "" && after != before {
				t.Fatalf("a refused CreateVolume left %d volumes, was %d", after, before)
			}
			if tt.code != "" {
				return
			}
			got := describeVolumeTags(t, ctx, c, vol)
			if got[tt.key] != tt.value {
				t.Fatalf("volume tags %v lack %s", got, tt.key)
			}
		})
	}
}

func describeVolumeTags(t *testing.T, ctx context.Context, c *ec2.Client, id string) map[string]string {
	t.Helper()
	out, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, tg := range out.Volumes[0].Tags {
		tags[awssdk.ToString(tg.Key)] = awssdk.ToString(tg.Value)
	}
	return tags
}
