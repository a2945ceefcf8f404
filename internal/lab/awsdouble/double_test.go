package awsdouble_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	ebstypes "github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

// clients are bare SDK clients (no retries) against a double.
func clients(url string) (*ec2.Client, *ebs.Client) {
	cfg := awssdk.Config{
		Region:      "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		Retryer:     func() awssdk.Retryer { return awssdk.NopRetryer{} },
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(url) }),
		ebs.NewFromConfig(cfg, func(o *ebs.Options) { o.BaseEndpoint = awssdk.String(url) })
}

func serve(t *testing.T, dir string, o awsdouble.Options) (*awsdouble.Server, string) {
	t.Helper()
	srv, err := awsdouble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return srv, hs.URL
}

func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func snapshot(t *testing.T, ctx context.Context, c *ec2.Client, instanceID string) []types.SnapshotInfo {
	t.Helper()
	out, err := c.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(instanceID), ExcludeBootVolume: awssdk.Bool(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range out.Snapshots {
		waitCompleted(t, ctx, c, *sn.SnapshotId)
	}
	return out.Snapshots
}

// waitCompleted polls until the snapshot completed.
func waitCompleted(t *testing.T, ctx context.Context, c *ec2.Client, id string) types.Snapshot {
	t.Helper()
	for {
		out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Snapshots[0].State == types.SnapshotStateCompleted {
			return out.Snapshots[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("snapshot %s never completed", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStateSurvivesRestart: instances, volumes and snapshots (with their captured data) are
// still there after the server is closed and reopened on the same directory.
func TestStateSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv, url := serve(t, dir, awsdouble.Options{})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("f", []byte("before")); err != nil {
		t.Fatal(err)
	}
	c, _ := clients(url)
	snaps := snapshot(t, ctx, c, in.ID)
	if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("f", []byte("-after")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	_, url2 := serve(t, dir, awsdouble.Options{})
	c2, _ := clients(url2)
	if got := waitCompleted(t, ctx, c2, *snaps[0].SnapshotId); awssdk.ToInt64(got.FullSnapshotSizeInBytes) != awsdouble.BlockSize {
		t.Fatalf("after restart: %+v", got)
	}
	v, err := c2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2b"), SnapshotId: snaps[0].SnapshotId})
	if err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(dir, "volumes", *v.VolumeId)
	if b, _ := os.ReadFile(filepath.Join(vdir, "f")); string(b) != "before" {
		t.Fatalf("restored %q, want the captured prefix %q", b, "before")
	}
	ins, err := c2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
	if err != nil || len(ins.Reservations) != 1 || len(ins.Reservations[0].Instances[0].BlockDeviceMappings) != 2 {
		t.Fatalf("instance after restart: %+v, %v", ins, err)
	}
}

// TestBlockListingPaginates: ListSnapshotBlocks and ListChangedBlocks page through blocks and
// skip zero blocks.
func TestBlockListingPaginates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{SnapshotMBps: 1e6})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: one non-zero byte in each of 110 blocks, every other block zero.
	const blocks = 220
	f, err := os.Create(filepath.Join(in.Volumes[0].Dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < blocks; i += 2 {
		if _, err := f.WriteAt([]byte{1}, int64(i)*awsdouble.BlockSize); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(blocks * awsdouble.BlockSize); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	c, e := clients(url)
	first := snapshot(t, ctx, c, in.ID)[0].SnapshotId
	w := volumelock.NewWriter(in.Volumes[0].Dir)
	if err := w.Append("data", bytes.Repeat([]byte{2}, 3*awsdouble.BlockSize)); err != nil {
		t.Fatal(err)
	}
	srv.Advance(15 * time.Second) // AWS's per-volume snapshot interval
	second := snapshot(t, ctx, c, in.ID)[0].SnapshotId

	var n, pages int
	var token *string
	for {
		out, err := e.ListSnapshotBlocks(ctx, &ebs.ListSnapshotBlocksInput{SnapshotId: first, MaxResults: awssdk.Int32(100), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.Blocks)
		pages++
		if *out.BlockSize != awsdouble.BlockSize {
			t.Fatalf("block size %d", *out.BlockSize)
		}
		if token = out.NextToken; token == nil {
			break
		}
	}
	if n != blocks/2 || pages != 2 {
		t.Fatalf("listed %d blocks in %d pages, want %d in 2", n, pages, blocks/2)
	}
	out, err := e.ListChangedBlocks(ctx, &ebs.ListChangedBlocksInput{FirstSnapshotId: first, SecondSnapshotId: second})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.ChangedBlocks) != 3 || *out.ChangedBlocks[0].BlockIndex != blocks {
		t.Fatalf("changed blocks = %d starting at %d, want 3 at %d", len(out.ChangedBlocks), *out.ChangedBlocks[0].BlockIndex, blocks)
	}
	snaps, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{*second}})
	if err != nil {
		t.Fatal(err)
	}
	if got := awssdk.ToInt64(snaps.Snapshots[0].FullSnapshotSizeInBytes); got != (blocks/2+3)*awsdouble.BlockSize {
		t.Fatalf("fullSnapshotSizeInBytes = %d", got)
	}
}

// TestRealLimits: the double answers AWS's error codes when its default limits are exceeded.
func TestRealLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A nearly stopped clock: the buckets do not refill while the test runs, however slow.
	srv, url := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: 1e-6})
	c, e := clients(url)
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// The describe bucket holds 100 tokens.
	var throttled bool
	for range 130 {
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
		t.Fatal("130 describes at once were not throttled")
	}
	// FSR takes at most 10 snapshot ids.
	ids := make([]string, 11)
	for i := range ids {
		ids[i] = "snap-0"
	}
	_, err = c.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-west-2a"}, SourceSnapshotIds: ids})
	if code(err) != "InvalidParameterValue" {
		t.Fatalf("11 FSR ids: %v", err)
	}
	// 51 tags.
	var tags []types.Tag
	for i := range 51 {
		tags = append(tags, types.Tag{Key: awssdk.String(strings.Repeat("k", i+1)), Value: awssdk.String("v")})
	}
	_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), Size: awssdk.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: tags}}})
	if code(err) != "TagLimitExceeded" && code(err) != "RequestLimitExceeded" {
		t.Fatalf("51 tags: %v", err)
	}
	// EBS direct: 50 per second.
	srv.SetFaults(awsdouble.Faults{})
	throttled = false
	for range 80 {
		_, err := e.ListSnapshotBlocks(ctx, &ebs.ListSnapshotBlocksInput{SnapshotId: awssdk.String("snap-missing")})
		if code(err) == "RequestThrottledException" {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Fatal("80 EBS direct calls at once were not throttled")
	}
}

// TestAdminEndpoints: instances, volumes, faults and inventory over HTTP.
func TestAdminEndpoints(t *testing.T) {
	_, url := serve(t, t.TempDir(), awsdouble.Options{})
	post := func(method, path string, body any, out any) int {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url+path, bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var info awsdouble.InstanceInfo
	if st := post(http.MethodPost, "/_lab/instances", awsdouble.InstanceSpec{AZ: "us-west-2b",
		Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 5, Tags: map[string]string{"t": "1"}}}}, &info); st != 200 {
		t.Fatalf("create instance: %d", st)
	}
	var vol awsdouble.VolumeInfo
	if st := post(http.MethodGet, "/_lab/volumes/"+info.Volumes[0].ID, nil, &vol); st != 200 || vol.Dir == "" {
		t.Fatalf("volume: %d %+v", st, vol)
	}
	var inv awsdouble.Inventory
	post(http.MethodGet, "/_lab/inventory?tag=t=1", nil, &inv)
	if len(inv.Volumes) != 1 || inv.Volumes[0].ID != info.Volumes[0].ID {
		t.Fatalf("inventory = %+v", inv)
	}
	var f awsdouble.Faults
	if st := post(http.MethodPut, "/_lab/faults", map[string]any{"throttle": 0.25, "latency": map[string]string{"*": "1ms"}}, &f); st != 200 || f.Throttle != 0.25 {
		t.Fatalf("faults: %d %+v", st, f)
	}
}

// TestDownFault: while down, the server drops connections; then it serves again.
func TestDownFault(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	c, _ := clients(url)
	srv.SetFaults(awsdouble.Faults{DownFor: awsdouble.Duration(200 * time.Millisecond)})
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err == nil {
		t.Fatal("call succeeded while down")
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		t.Fatalf("call failed after the down window: %v", err)
	}
}

// TestCreateVolumeIdempotent: a CreateVolume retried with the same client token returns the
// same volume; DryRun answers DryRunOperation and creates nothing.
func TestCreateVolumeIdempotent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	c, _ := clients(url)
	in := &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), Size: awssdk.Int32(1), ClientToken: awssdk.String("tok-1")}
	a, err := c.CreateVolume(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateVolume(ctx, in)
	if err != nil || *a.VolumeId != *b.VolumeId {
		t.Fatalf("retry created %v (%v), want %s", b.VolumeId, err, *a.VolumeId)
	}
	_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), Size: awssdk.Int32(1), DryRun: awssdk.Bool(true)})
	if code(err) != "DryRunOperation" {
		t.Fatalf("dry run: %v", err)
	}
	if n := len(srv.Inventory(nil).Volumes); n != 1 {
		t.Fatalf("%d volumes, want 1", n)
	}
}

// TestCaptureSeesWholeRewrites: a writer that rewrites a file by write-and-rename (compaction)
// while snapshots are taken leaves each snapshot with one whole version, never a mix.
func TestCaptureSeesWholeRewrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{SnapshotMBps: 1e6, VolumeCreateDuration: time.Millisecond})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	w := volumelock.NewWriter(in.Volumes[0].Dir)
	if err := w.Replace("MANIFEST", bytes.Repeat([]byte{'z'}, 64*1024)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := w.Replace("MANIFEST", bytes.Repeat([]byte{byte('a' + i%26)}, 64*1024)); err != nil {
				done <- err
				return
			}
		}
	}()
	c, _ := clients(url)
	var ids []string
	for range 10 {
		ids = append(ids, *snapshot(t, ctx, c, in.ID)[0].SnapshotId)
		srv.Advance(15 * time.Second) // AWS's per-volume snapshot interval
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), SnapshotId: awssdk.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		dir, _ := srv.VolumeDir(*v.VolumeId)
		b, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 64*1024 || bytes.Count(b, b[:1]) != len(b) {
			t.Fatalf("snapshot %s holds a torn rewrite (%d bytes)", id, len(b))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("snapshot %s holds private files: %v", id, entries)
		}
	}
}

// TestFSRCreditModel walks FSR through enabling → optimizing → enabled and checks the credit
// bucket (max(1, min(10, 1024/GiB)), refilled per hour, starting empty) through CloudWatch.
func TestFSRCreditModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{SnapshotMBps: 1e6})
	c, _ := clients(url)
	cw := cloudwatch.NewFromConfig(awssdk.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *cloudwatch.Options) { o.BaseEndpoint = awssdk.String(url) })
	for _, tc := range []struct {
		gib      int32
		capacity float64
		perHour  float64
	}{{100, 10, 10}, {4096, 1, 0.25}} {
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: tc.gib}}})
		if err != nil {
			t.Fatal(err)
		}
		id := *snapshot(t, ctx, c, in.ID)[0].SnapshotId
		if _, err := c.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-west-2b"}, SourceSnapshotIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
		state := func() string {
			out, err := c.DescribeFastSnapshotRestores(ctx, &ec2.DescribeFastSnapshotRestoresInput{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range out.FastSnapshotRestores {
				if *f.SnapshotId == id {
					return string(f.State)
				}
			}
			return ""
		}
		credits := func() float64 {
			out, err := cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
				Namespace: awssdk.String("AWS/EBS"), MetricName: awssdk.String("FastSnapshotRestoreCreditsBalance"),
				Dimensions: []cwtypes.Dimension{{Name: awssdk.String("SnapshotId"), Value: awssdk.String(id)}, {Name: awssdk.String("AvailabilityZone"), Value: awssdk.String("us-west-2b")}},
				StartTime:  awssdk.Time(time.Now().Add(-5 * time.Minute)), EndTime: awssdk.Time(time.Now()),
				Period: awssdk.Int32(300), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Datapoints) != 1 {
				t.Fatalf("%d datapoints", len(out.Datapoints))
			}
			return *out.Datapoints[0].Maximum
		}
		if st := state(); st != "enabling" {
			t.Fatalf("%d GiB: state %s right after enabling", tc.gib, st)
		}
		if got := credits(); got > 0.01 {
			t.Fatalf("%d GiB: %v credits right after enabling, want 0", tc.gib, got)
		}
		srv.Advance(2 * time.Minute)
		if st := state(); st != "optimizing" {
			t.Fatalf("%d GiB: state %s after 2m", tc.gib, st)
		}
		srv.Advance(30 * time.Minute)
		if got, want := credits(), tc.perHour*32/60; got < want-0.01 || got > want+0.01 {
			t.Fatalf("%d GiB: %v credits after 32m, want %v", tc.gib, got, want)
		}
		srv.Advance(5 * time.Hour)
		if st := state(); st != "enabled" {
			t.Fatalf("%d GiB: state %s after 5h", tc.gib, st)
		}
		if got := credits(); got != tc.capacity {
			t.Fatalf("%d GiB: %v credits when full, want %v", tc.gib, got, tc.capacity)
		}
		_, err = c.DisableFastSnapshotRestores(ctx, &ec2.DisableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-west-2b"}, SourceSnapshotIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttachDetach: a volume attaches only in its instance's AZ, shows in the instance's
// block-device mappings, cannot be deleted while attached, and detaches.
func TestAttachDetach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{VolumeCreateDuration: time.Millisecond})
	c, _ := clients(url)
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2b"), Size: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: other.VolumeId, InstanceId: awssdk.String(in.ID), Device: awssdk.String("/dev/xvdf")}); code(err) != "InvalidVolume.ZoneMismatch" {
		t.Fatalf("cross-AZ attach: %v", err)
	}
	v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), Size: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: v.VolumeId, InstanceId: awssdk.String(in.ID), Device: awssdk.String("/dev/xvdf")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
	if err != nil {
		t.Fatal(err)
	}
	bdm := out.Reservations[0].Instances[0].BlockDeviceMappings
	if len(bdm) != 2 || *bdm[1].DeviceName != "/dev/xvdf" || *bdm[1].Ebs.VolumeId != *v.VolumeId {
		t.Fatalf("block devices = %+v", bdm)
	}
	if _, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: v.VolumeId}); code(err) != "VolumeInUse" {
		t.Fatalf("delete attached: %v", err)
	}
	if _, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: v.VolumeId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: v.VolumeId}); err != nil {
		t.Fatal(err)
	}
}

// TestHeldCallRunsAfterItsCallerGaveUp: a CreateSnapshots held by Faults.Latency is in flight
// (Stats.InFlight) until the double has run it, and runs although its caller gave up: the
// snapshot exists afterwards, as on AWS, which finishes a call whose answer nobody reads.
func TestHeldCallRunsAfterItsCallerGaveUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	srv.SetFaults(awsdouble.Faults{Latency: map[string]awsdouble.Duration{"CreateSnapshots": awsdouble.Duration(time.Second)}})
	callCtx, giveUp := context.WithCancel(ctx)
	done := snapshotsInFlight(ctx, callCtx, t, srv, url)
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the caller that gave up got an answer")
	}
	waitInFlight(ctx, t, srv, 0, "the held call never ran")
	if n := len(srv.Inventory(nil).Snapshots); n != 1 {
		t.Errorf("%d snapshots after the held call ran, want the 1 its caller never saw", n)
	}
}

// snapshotsInFlight starts CreateSnapshots of a new instance's volume with callCtx and returns
// once the double shows the call in flight; the call's error arrives on the channel.
func snapshotsInFlight(ctx, callCtx context.Context, t *testing.T, srv *awsdouble.Server, url string) <-chan error {
	t.Helper()
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := clients(url)
	done := make(chan error, 1)
	go func() {
		_, err := c.CreateSnapshots(callCtx, &ec2.CreateSnapshotsInput{
			InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(in.ID), ExcludeBootVolume: awssdk.Bool(true)}})
		done <- err
	}()
	waitInFlight(ctx, t, srv, 1, "the call never showed as in flight")
	return done
}

// waitInFlight waits until the double counts n CreateSnapshots in flight, failing with why when
// ctx ends first.
func waitInFlight(ctx context.Context, t *testing.T, srv *awsdouble.Server, n int, why string) {
	t.Helper()
	for srv.Stats().InFlight["CreateSnapshots"] != n {
		select {
		case <-ctx.Done():
			t.Fatal(why)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestHoldRunsTheCallOnRelease: a CreateSnapshots held by Server.Hold stays in flight, its
// snapshot not made, after its caller gave up; released, it runs and makes the snapshot the
// caller never saw.
func TestHoldRunsTheCallOnRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	release := srv.Hold("CreateSnapshots")
	t.Cleanup(release)
	callCtx, giveUp := context.WithCancel(ctx)
	done := snapshotsInFlight(ctx, callCtx, t, srv, url)
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the caller that gave up got an answer")
	}
	if n, inFlight := len(srv.Inventory(nil).Snapshots), srv.Stats().InFlight["CreateSnapshots"]; n != 0 || inFlight != 1 {
		t.Fatalf("held after its caller gave up: %d snapshots, %d in flight; want 0 and 1", n, inFlight)
	}
	release()
	release() // idempotent
	waitInFlight(ctx, t, srv, 0, "the released call never ran")
	if n := len(srv.Inventory(nil).Snapshots); n != 1 {
		t.Errorf("%d snapshots after the released call ran, want the 1 its caller never saw", n)
	}
}

// TestAdminHold: PUT /_lab/holds/CreateSnapshots holds the calls as Hold does, DELETE releases
// them; an action the double does not serve is refused by name.
func TestAdminHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	admin := func(method, action string) (int, string) {
		req, _ := http.NewRequest(method, url+"/_lab/holds/"+action, nil) //nolint:noctx // also called from Cleanup, after ctx ends
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body["error"]
	}
	if st, msg := admin(http.MethodPut, "StealEverything"); st != 400 || !strings.Contains(msg, `"StealEverything"`) {
		t.Fatalf("hold of an unknown action: %d %q, want 400 naming it", st, msg)
	}
	if st, msg := admin(http.MethodPut, "CreateSnapshots"); st != 200 {
		t.Fatalf("hold: %d %s", st, msg)
	}
	t.Cleanup(func() { admin(http.MethodDelete, "CreateSnapshots") })
	done := snapshotsInFlight(ctx, ctx, t, srv, url)
	if n := len(srv.Inventory(nil).Snapshots); n != 0 {
		t.Fatalf("%d snapshots while held, want 0", n)
	}
	if st, msg := admin(http.MethodDelete, "CreateSnapshots"); st != 200 {
		t.Fatalf("release: %d %s", st, msg)
	}
	if err := <-done; err != nil {
		t.Fatalf("the released call: %v", err)
	}
	if n := len(srv.Inventory(nil).Snapshots); n != 1 {
		t.Errorf("%d snapshots after release, want 1", n)
	}
}

// TestVolumesFromSnapshotsCounted: only a volume made from a snapshot counts.
func TestVolumesFromSnapshotsCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := clients(url)
	snaps := snapshot(t, ctx, c, in.ID)
	for _, from := range []*string{nil, snaps[0].SnapshotId} {
		if _, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(in.AZ), Size: awssdk.Int32(4), SnapshotId: from}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Stats().VolumesFromSnapshots; n != 1 {
		t.Errorf("VolumesFromSnapshots = %d, want 1 (an empty volume does not count)", n)
	}
}

// TestListChangedBlocksLineage: ListChangedBlocks compares two snapshots of one volume/snapshot
// lineage only: a snapshot of another volume is a ValidationException with reason
// UNRELATED_SNAPSHOTS; a snapshot of a volume restored from the first snapshot is of its
// lineage.
func TestListChangedBlocksLineage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, url := serve(t, t.TempDir(), awsdouble.Options{SnapshotMBps: 1e6})
	c, e := clients(url)
	spec := awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}}
	a, err := srv.CreateInstance(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.CreateInstance(spec)
	if err != nil {
		t.Fatal(err)
	}
	snapA := snapshot(t, ctx, c, a.ID)[0].SnapshotId
	snapB := snapshot(t, ctx, c, b.ID)[0].SnapshotId
	_, err = e.ListChangedBlocks(ctx, &ebs.ListChangedBlocksInput{FirstSnapshotId: snapA, SecondSnapshotId: snapB})
	var ve *ebstypes.ValidationException
	if !errors.As(err, &ve) || ve.Reason != ebstypes.ValidationExceptionReasonUnrelatedSnapshots {
		t.Fatalf("snapshots of two volumes: %v, want ValidationException %s", err, ebstypes.ValidationExceptionReasonUnrelatedSnapshots)
	}

	// A volume restored from snapA, attached to b and snapshotted, descends from a's volume.
	v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String(b.AZ), SnapshotId: snapA})
	if err != nil {
		t.Fatal(err)
	}
	srv.Advance(time.Minute)
	if _, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: v.VolumeId, InstanceId: awssdk.String(b.ID), Device: awssdk.String("/dev/xvdc")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(b.ID), ExcludeBootVolume: awssdk.Bool(true),
			ExcludeDataVolumeIds: []string{b.Volumes[0].ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	restored := out.Snapshots[0].SnapshotId
	waitCompleted(t, ctx, c, *restored)
	if _, err := e.ListChangedBlocks(ctx, &ebs.ListChangedBlocksInput{FirstSnapshotId: snapA, SecondSnapshotId: restored}); err != nil {
		t.Fatalf("a snapshot of a volume restored from the first: %v", err)
	}
}
