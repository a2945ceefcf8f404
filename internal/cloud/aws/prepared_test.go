package aws_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// TestPreparedSnapshotsStartWhatIsAttachedThen: the describes happen at preparation; a
// start after a volume was detached snapshots the volumes still attached and leaves the
// detached one without a snapshot, for the caller's check to catch (never a silent success
// that claims it).
func TestPreparedSnapshotsStartWhatIsAttachedThen(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
	a, b := in.Volumes[0].ID, in.Volumes[1].ID
	req := cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{a, b}, Tags: identity}

	before := l.srv.Stats()
	prep, err := l.p.PrepareSnapshotInstances(ctx, []cloud.SnapshotRequest{req})
	if err != nil {
		t.Fatal(err)
	}
	if len(prep.Instances) != 1 || len(prep.VolumeTags) != 2 {
		t.Fatalf("prepared %+v", prep)
	}
	described := l.srv.Stats()

	c := ec2.NewFromConfig(awssdk.Config{Region: l.srv.Options().Region, Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(l.url) })
	if _, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: awssdk.String(b)}); err != nil {
		t.Fatal(err)
	}
	sets, err := l.p.StartSnapshotInstances(ctx, prep)
	if err != nil {
		t.Fatal(err)
	}
	var vols []string
	for _, s := range sets[0] {
		vols = append(vols, s.VolumeID)
	}
	if !slices.Equal(vols, []string{a}) {
		t.Errorf("snapshotted %v after %s was detached, want only %s", vols, b, a)
	}
	after := l.srv.Stats()
	if d := after.Calls["DescribeInstances"] - described.Calls["DescribeInstances"]; d != 0 {
		t.Errorf("the start described the instances again (%d calls)", d)
	}
	if before.Calls["DescribeInstances"] == described.Calls["DescribeInstances"] {
		t.Error("the preparation did not describe the instances")
	}
}

// TestPreparationRefusesTooManySnapshotTags: a snapshot copies every tag of its volume, so a
// volume whose tags and the request's pass AWS's 50 fails the preparation (before a caller
// holds a pause for the start), and no CreateSnapshots is sent. A request tag of a key the
// volume already has replaces it and counts once.
func TestPreparationRefusesTooManySnapshotTags(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, defaultLabOptions())
	own := map[string]string{}
	for i := range cloud.MaxTags - len(identity) {
		own[fmt.Sprintf("k%02d", i)] = "v"
	}
	in := l.instance(t, awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10, Tags: own}}})
	vol := in.Volumes[0].ID
	full := cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{vol}, Tags: identity}
	if _, err := l.p.PrepareSnapshotInstances(ctx, []cloud.SnapshotRequest{full}); err != nil {
		t.Fatalf("%d tags exactly: %v", cloud.MaxTags, err)
	}
	over := full
	over.Tags = maps.Clone(identity)
	over.Tags["k00"] = "replaced" // counts once
	over.Tags["one-more"] = "x"
	_, err := l.p.PrepareSnapshotInstances(ctx, []cloud.SnapshotRequest{over})
	if !errors.Is(err, cloud.ErrTooManyTags) || !strings.Contains(err.Error(), fmt.Sprintf("snapshot volume %s of instance %s: its %d tags and the request's make %d, more than %d",
		vol, in.ID, len(own), cloud.MaxTags+1, cloud.MaxTags)) {
		t.Fatalf("err = %v, want ErrTooManyTags naming the volume and both counts", err)
	}
	if n := l.srv.Stats().Calls["CreateSnapshots"]; n != 0 {
		t.Errorf("%d CreateSnapshots calls", n)
	}
}
