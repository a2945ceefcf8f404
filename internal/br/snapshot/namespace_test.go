package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// createRecorder passes every call to the provider and records the tags of every snapshot
// request it starts: what CreateSnapshots sends as TagSpecifications, which is what an IAM
// condition on aws:RequestTag sees.
type createRecorder struct {
	snapshot.Cloud
	mu   sync.Mutex
	tags []map[string]string
}

func (c *createRecorder) record(reqs []cloud.SnapshotRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range reqs {
		c.tags = append(c.tags, maps.Clone(r.Tags))
	}
}

func (c *createRecorder) SnapshotInstance(ctx context.Context, req cloud.SnapshotRequest) ([]cloud.Snapshot, error) {
	c.record([]cloud.SnapshotRequest{req})
	return c.Cloud.SnapshotInstance(ctx, req)
}

func (c *createRecorder) SnapshotInstances(ctx context.Context, reqs []cloud.SnapshotRequest) ([][]cloud.Snapshot, error) {
	c.record(reqs)
	return c.Cloud.SnapshotInstances(ctx, reqs)
}

func (c *createRecorder) StartSnapshotInstances(ctx context.Context, prep *cloud.PreparedSnapshots) ([][]cloud.Snapshot, error) {
	c.record(prep.Requests)
	return c.Cloud.StartSnapshotInstances(ctx, prep)
}

// tagVolume sets tags on a volume of the double, as its owner (or anyone) could.
func (l *lab) tagVolume(t *testing.T, id string, tags map[string]string) {
	t.Helper()
	c := ec2.NewFromConfig(awssdk.Config{Region: l.srv.Options().Region, Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(l.endpoint) })
	var ts []types.Tag
	for k, v := range tags {
		ts = append(ts, types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
	}
	if _, err := c.CreateTags(testContext(t), &ec2.CreateTagsInput{Resources: []string{id}, Tags: ts}); err != nil {
		t.Fatal(err)
	}
}

// TestEverySnapshotCarriesItsNamespace: every CreateSnapshots the step sends asks for
// meta.TagNamespace with the owner's namespace (the tag a per-namespace IAM policy requires
// at create, aws:RequestTag), and every snapshot carries it after the backup completed (it is
// permanent, unlike the pending mark). Neither a --tags value for that key nor the same tag on
// a source volume (a volume restored earlier for another namespace, or one a tenant tagged),
// which CreateSnapshots copies, wins over the owner's namespace.
func TestEverySnapshotCarriesItsNamespace(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 2, awsdouble.Faults{})
	in, err := l.store.ClusterMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.tagVolume(t, in.TiKV.Stores[0].Volumes[0].ID, map[string]string{meta.TagNamespace: "elsewhere"})
	owner := &meta.Owner{Cluster: "3c5d3f0e-kube-system-uid", Namespace: "tenant-a"}
	rec := &createRecorder{Cloud: l.p}
	res, err := snapshot.Run(ctx, snapshot.Deps{Cloud: rec, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
		Owner: owner, Tags: map[string]string{meta.TagNamespace: "forged", "team": "db"},
		WaitBackupTS: func(context.Context) (uint64, error) { return 4242, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.tags) == 0 {
		t.Fatal("no snapshot request was recorded")
	}
	for i, tags := range rec.tags {
		if tags[meta.TagNamespace] != owner.Namespace {
			t.Errorf("snapshot request %d asks for tags %v: want %s=%s", i, tags, meta.TagNamespace, owner.Namespace)
		}
	}
	snaps := l.srv.Inventory(nil).Snapshots
	if len(snaps) != len(res.Snapshots) || len(snaps) != 4 {
		t.Fatalf("%d snapshots in the account, the backup recorded %d; want 4", len(snaps), len(res.Snapshots))
	}
	for _, s := range snaps {
		if s.Tags[meta.TagNamespace] != owner.Namespace {
			t.Errorf("snapshot %s of %s carries %s=%q, want %q (tags %v)", s.ID, s.Volume, meta.TagNamespace, s.Tags[meta.TagNamespace], owner.Namespace, s.Tags)
		}
		if _, pending := s.Tags[meta.TagBackupPending]; pending {
			t.Errorf("snapshot %s of a completed backup is still pending: %v", s.ID, s.Tags)
		}
	}
}

// TestNoOwnerNoNamespaceTag: without an owner (a step run by hand, without --owner) the step
// has no namespace to tag with and adds none; a per-namespace IAM policy then refuses its
// CreateSnapshots, which is the policy's point.
func TestNoOwnerNoNamespaceTag(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, 1, awsdouble.Faults{})
	rec := &createRecorder{Cloud: l.p}
	if _, err := snapshot.Run(ctx, snapshot.Deps{Cloud: rec, Store: l.store}, snapshot.Options{BackupID: backupID, SkipClusterCheck: true,
		WaitBackupTS: func(context.Context) (uint64, error) { return 4242, nil }}); err != nil {
		t.Fatal(err)
	}
	for i, tags := range rec.tags {
		if v, ok := tags[meta.TagNamespace]; ok {
			t.Errorf("snapshot request %d without an owner asks for %s=%q", i, meta.TagNamespace, v)
		}
	}
	if len(rec.tags) == 0 {
		t.Fatal("no snapshot request was recorded")
	}
}

// TestOptionsCountTheNamespaceTag: the options' own check counts fedbr.io/namespace among the
// tags the step adds (fedbr.io/backup, fedbr.io/store, fedbr.io/backup-pending and it): 46
// --tags fill a snapshot's 50, 47 are refused before anything runs.
func TestOptionsCountTheNamespaceTag(t *testing.T) {
	owner := &meta.Owner{Cluster: "3c5d3f0e-kube-system-uid", Namespace: "tenant-a"}
	tags := map[string]string{}
	for i := range 46 {
		tags[fmt.Sprintf("user-%02d", i)] = "v"
	}
	if err := (snapshot.Options{BackupID: backupID, Owner: owner, Tags: tags}).Validate(); err != nil {
		t.Fatalf("46 tags: %v, want them accepted (50 with fedbr's 4)", err)
	}
	tags["user-46"] = "v"
	if err := (snapshot.Options{BackupID: backupID, Owner: owner, Tags: tags}).Validate(); !errors.Is(err, cloud.ErrTooManyTags) {
		t.Fatalf("47 tags: %v, want cloud.ErrTooManyTags (51 with fedbr's 4)", err)
	}
}
