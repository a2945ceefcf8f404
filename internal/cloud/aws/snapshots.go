package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fedbr/fedbr/internal/cloud"
)

// describeBatch bounds the ids per Describe call.
const describeBatch = 200

// SnapshotInstance starts one CreateSnapshots for the instance: the requested volumes are
// captured at one instant; the root volume and every other attached volume are excluded.
// Snapshots carry the source volume's tags plus req.Tags. It waits for room in the account's
// pending-snapshot queue first.
func (p *Provider) SnapshotInstance(ctx context.Context, req cloud.SnapshotRequest) ([]cloud.Snapshot, error) {
	sets, err := p.SnapshotInstances(ctx, []cloud.SnapshotRequest{req})
	if err != nil {
		return nil, err
	}
	return sets[0], nil
}

// SnapshotInstances is SnapshotInstance for many instances: one DescribeInstances and one
// DescribeVolumes per 200 instances/volumes, then every CreateSnapshots in parallel, paced by
// the budget and the pending-snapshot queue.
func (p *Provider) SnapshotInstances(ctx context.Context, reqs []cloud.SnapshotRequest) ([][]cloud.Snapshot, error) {
	prep, err := p.PrepareSnapshotInstances(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return p.StartSnapshotInstances(ctx, prep)
}

// PrepareSnapshotInstances describes the instances and volumes of reqs in batches.
func (p *Provider) PrepareSnapshotInstances(ctx context.Context, reqs []cloud.SnapshotRequest) (*cloud.PreparedSnapshots, error) {
	var instanceIDs, volumeIDs []string
	for _, r := range reqs {
		if len(r.VolumeIDs) == 0 {
			return nil, fmt.Errorf("snapshot instance %s: no volumes requested", r.InstanceID)
		}
		instanceIDs = append(instanceIDs, r.InstanceID)
		volumeIDs = append(volumeIDs, r.VolumeIDs...)
	}
	insts, err := p.describeInstances(ctx, instanceIDs)
	if err != nil {
		return nil, fmt.Errorf("snapshot instances: %w", err)
	}
	vols, err := p.DescribeVolumes(ctx, volumeIDs)
	if err != nil {
		return nil, fmt.Errorf("snapshot instances: %w", err)
	}
	volTags := map[string]map[string]string{}
	for _, v := range vols {
		volTags[v.ID] = v.Tags
	}
	// CreateSnapshots copies every tag of each volume (CopyTagsFromSource): a volume whose tags
	// and the request's exceed AWS's limit cannot be snapshotted, so it fails here, before a
	// caller holds a pause for the start.
	for _, r := range reqs {
		for _, id := range r.VolumeIDs {
			if n := cloud.SnapshotTagCount(volTags[id], r.Tags); n > cloud.MaxTags {
				return nil, fmt.Errorf("snapshot volume %s of instance %s: its %d tags and the request's make %d, more than %d: %w",
					id, r.InstanceID, len(volTags[id]), n, cloud.MaxTags, cloud.ErrTooManyTags)
			}
		}
	}
	return &cloud.PreparedSnapshots{Requests: reqs, Instances: insts, VolumeTags: volTags}, nil
}

// StartSnapshotInstances runs one CreateSnapshots per prepared instance, all at once.
func (p *Provider) StartSnapshotInstances(ctx context.Context, prep *cloud.PreparedSnapshots) ([][]cloud.Snapshot, error) {
	reqs, insts, volTags := prep.Requests, prep.Instances, prep.VolumeTags
	sets := make([][]cloud.Snapshot, len(reqs))
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	err := forEach(ctx, min(max(len(reqs), 1), 1000), idx, func(ctx context.Context, i int) error {
		inst, ok := insts[reqs[i].InstanceID]
		if !ok {
			return fmt.Errorf("snapshot instance %s: it does not exist", reqs[i].InstanceID)
		}
		set, err := p.createSnapshots(ctx, reqs[i], inst, volTags)
		sets[i] = set
		return err
	})
	return sets, err
}

// createSnapshots runs one CreateSnapshots for an instance already described.
func (p *Provider) createSnapshots(ctx context.Context, req cloud.SnapshotRequest, inst cloud.Instance, volTags map[string]map[string]string) ([]cloud.Snapshot, error) {
	var exclude []string
	attached := map[string]bool{}
	for _, d := range inst.Devices {
		attached[d.VolumeID] = true
		if d.Device != inst.RootDevice && !slices.Contains(req.VolumeIDs, d.VolumeID) {
			exclude = append(exclude, d.VolumeID)
		}
	}
	for _, id := range req.VolumeIDs {
		if !attached[id] {
			return nil, fmt.Errorf("snapshot instance %s: volume %s is not attached to it", req.InstanceID, id)
		}
		if n := cloud.SnapshotTagCount(volTags[id], req.Tags); n > cloud.MaxTags {
			return nil, fmt.Errorf("snapshot volume %s of instance %s: %d tags: %w", id, req.InstanceID, n, cloud.ErrTooManyTags)
		}
	}

	pending := p.budget.Pending()
	n := len(req.VolumeIDs)
	if err := pending.Reserve(ctx, n, p.notPending); err != nil {
		return nil, fmt.Errorf("snapshot instance %s: wait for pending-snapshot room: %w", req.InstanceID, err)
	}
	in := &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{
			InstanceId:           awssdk.String(req.InstanceID),
			ExcludeBootVolume:    awssdk.Bool(true),
			ExcludeDataVolumeIds: exclude,
		},
		CopyTagsFromSource: types.CopyTagsFromSourceVolume,
	}
	if req.Description != "" {
		in.Description = awssdk.String(req.Description)
	}
	if len(req.Tags) > 0 {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: ec2Tags(req.Tags)}}
	}
	var out *ec2.CreateSnapshotsOutput
	called := time.Now()
	// CreateSnapshots takes no client token: a call whose answer was lost may have started the
	// set, and sending it again would start a second one. So the SDK does not resend it, and
	// after a lost answer every new attempt first looks for the set the lost one started.
	lost := false
	err := p.retry(ctx, func() error {
		if lost {
			if found := p.findSnapshotSet(ctx, req, called); found != nil {
				out = found
				return nil
			}
		}
		var err error
		out, err = p.ec2.CreateSnapshots(ctx, in, noSDKRetries)
		lost = lost || answerLost(err)
		if err != nil && answerLost(err) {
			return fmt.Errorf("%w (answer lost: %w)", err, errAnswerLost)
		}
		return err
	})
	took := time.Since(called)
	if err != nil {
		pending.Cancel(n)
		return nil, fmt.Errorf("create snapshots of instance %s: %w", req.InstanceID, err)
	}
	snaps := make([]cloud.Snapshot, 0, len(out.Snapshots))
	ids := make([]string, 0, len(out.Snapshots))
	for _, s := range out.Snapshots {
		snaps = append(snaps, cloud.Snapshot{
			ID: awssdk.ToString(s.SnapshotId), VolumeID: awssdk.ToString(s.VolumeId),
			State: cloud.SnapshotState(s.State), SizeGiB: awssdk.ToInt32(s.VolumeSize),
			Started: awssdk.ToTime(s.StartTime), Tags: tagMap(s.Tags, ec2TagKV), StartCall: took, Owned: true,
			AfterLostAnswer: lost,
		})
		ids = append(ids, awssdk.ToString(s.SnapshotId))
	}
	p.fresh.add(ids...)
	pending.Commit(n, ids...)
	return snaps, nil
}

// findSnapshotSet looks for the snapshot set a CreateSnapshots of req whose answer was lost
// started: one snapshot of every requested volume, carrying req's tags, started after the call
// (less the clock skew). Nil when there is none (or req has no tags to recognize it by).
func (p *Provider) findSnapshotSet(ctx context.Context, req cloud.SnapshotRequest, called time.Time) *ec2.CreateSnapshotsOutput {
	if len(req.Tags) == 0 {
		return nil
	}
	fs := append(tagFilters(req.Tags), types.Filter{Name: awssdk.String("volume-id"), Values: req.VolumeIDs})
	in := &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, Filters: fs}
	latest := map[string]types.Snapshot{}
	pager := ec2.NewDescribeSnapshotsPaginator(p.ec2, in)
	err := eachPage(ctx, p, pager, func(page *ec2.DescribeSnapshotsOutput) {
		for _, s := range page.Snapshots {
			if awssdk.ToTime(s.StartTime).Before(called.Add(-startSkew)) {
				continue
			}
			v := awssdk.ToString(s.VolumeId)
			if cur, ok := latest[v]; !ok || awssdk.ToTime(s.StartTime).After(awssdk.ToTime(cur.StartTime)) {
				latest[v] = s
			}
		}
	})
	if err != nil {
		return nil
	}
	out := &ec2.CreateSnapshotsOutput{}
	for _, v := range req.VolumeIDs {
		s, ok := latest[v]
		if !ok {
			return nil
		}
		out.Snapshots = append(out.Snapshots, types.SnapshotInfo{
			SnapshotId: s.SnapshotId, VolumeId: s.VolumeId, State: s.State, VolumeSize: s.VolumeSize,
			StartTime: s.StartTime, Tags: s.Tags, Progress: s.Progress,
		})
	}
	return out
}

// notPending is the pending queue's refresh: the ids that are no longer pending.
func (p *Provider) notPending(ctx context.Context, ids []string) ([]string, error) {
	snaps, err := p.describeSnapshots(ctx, ids)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var done []string
	for _, s := range snaps {
		seen[s.ID] = true
		if s.State != cloud.SnapshotPending {
			done = append(done, s.ID)
		}
	}
	for _, id := range ids {
		if !seen[id] && !p.fresh.settling(id) {
			done = append(done, id)
		}
	}
	return done, nil
}

// DescribeSnapshots returns the snapshots that exist among ids (missing ones are left out):
// the account's own (OwnerIds=self, Owned) and, for the ids not among them, whatever else the
// account can see (shared or public snapshots of other accounts, not Owned). The second call
// is made only when an id is not the account's, so the common case costs one call per batch.
func (p *Provider) DescribeSnapshots(ctx context.Context, ids []string) ([]cloud.Snapshot, error) {
	snaps, err := p.describeSnapshots(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("describe snapshots: %w", err)
	}
	own := map[string]bool{}
	for _, s := range snaps {
		own[s.ID] = true
	}
	var rest []string
	for _, id := range ids {
		if !own[id] {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return snaps, nil
	}
	others, err := p.describeSnapshotsOf(ctx, rest, nil)
	if err != nil {
		return nil, fmt.Errorf("describe snapshots: %w", err)
	}
	for _, s := range others {
		if !own[s.ID] { // one may have become visible as the account's own in between
			snaps = append(snaps, s)
		}
	}
	return snaps, nil
}

// ListSnapshots finds the account's own snapshots carrying all the given tags.
func (p *Provider) ListSnapshots(ctx context.Context, tags map[string]string) ([]cloud.Snapshot, error) {
	in := &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, Filters: tagFilters(tags), MaxResults: awssdk.Int32(1000)}
	var out []cloud.Snapshot
	pager := ec2.NewDescribeSnapshotsPaginator(p.ec2, in)
	err := eachPage(ctx, p, pager, func(page *ec2.DescribeSnapshotsOutput) {
		for _, s := range page.Snapshots {
			out = append(out, owned(fromEC2Snapshot(s)))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list snapshots tagged %v: %w", tags, err)
	}
	return out, nil
}

// tagFilters selects resources carrying all tags (an empty value matches any value).
func tagFilters(tags map[string]string) []types.Filter {
	var fs []types.Filter
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if tags[k] == "" {
			fs = append(fs, types.Filter{Name: awssdk.String("tag-key"), Values: []string{k}})
			continue
		}
		fs = append(fs, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{tags[k]}})
	}
	return fs
}

// describeSnapshots describes the account's own snapshots among ids (OwnerIds=self): what
// fedbr waits for is always its own.
func (p *Provider) describeSnapshots(ctx context.Context, ids []string) ([]cloud.Snapshot, error) {
	return p.describeSnapshotsOf(ctx, ids, []string{"self"})
}

// describeSnapshotsOf filters by snapshot-id, so a deleted snapshot is absent rather than an
// error for the whole batch; owners restricts the result to those accounts' snapshots (nil:
// every snapshot the account can see), and the snapshots found with owners "self" are Owned.
func (p *Provider) describeSnapshotsOf(ctx context.Context, ids, owners []string) ([]cloud.Snapshot, error) {
	self := slices.Equal(owners, []string{"self"})
	var out []cloud.Snapshot
	for batch := range slices.Chunk(ids, describeBatch) {
		in := &ec2.DescribeSnapshotsInput{OwnerIds: owners, Filters: []types.Filter{{Name: awssdk.String("snapshot-id"), Values: batch}}}
		pager := ec2.NewDescribeSnapshotsPaginator(p.ec2, in)
		err := eachPage(ctx, p, pager, func(page *ec2.DescribeSnapshotsOutput) {
			for _, s := range page.Snapshots {
				snap := fromEC2Snapshot(s)
				if self {
					snap = owned(snap)
				}
				out = append(out, snap)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func fromEC2Snapshot(s types.Snapshot) cloud.Snapshot {
	progress, _ := strconv.ParseFloat(strings.TrimSuffix(awssdk.ToString(s.Progress), "%"), 64)
	return cloud.Snapshot{
		ID: awssdk.ToString(s.SnapshotId), VolumeID: awssdk.ToString(s.VolumeId),
		State: cloud.SnapshotState(s.State), Message: awssdk.ToString(s.StateMessage),
		Progress: min(progress, 100), SizeGiB: awssdk.ToInt32(s.VolumeSize),
		FullSizeBytes: awssdk.ToInt64(s.FullSnapshotSizeInBytes), FullSizeKnown: s.FullSnapshotSizeInBytes != nil,
		Started: awssdk.ToTime(s.StartTime), Completed: awssdk.ToTime(s.CompletionTime), Tags: tagMap(s.Tags, ec2TagKV), OwnerID: awssdk.ToString(s.OwnerId),
	}
}

// owned marks a snapshot found with OwnerIds=self (or created by this account).
func owned(s cloud.Snapshot) cloud.Snapshot {
	s.Owned = true
	return s
}

// WaitSnapshots polls until every snapshot completed. A snapshot in the error state fails the
// wait at once with cloud.ErrSnapshotFailed, and so does one missing once it may no longer be
// just not visible yet (see ConsistencyWindow).
func (p *Provider) WaitSnapshots(ctx context.Context, ids []string, report func(cloud.Progress)) ([]cloud.Snapshot, error) {
	start := time.Now()
	done := map[string]cloud.Snapshot{}
	poll := p.poller()
	for {
		var todo []string
		for _, id := range ids {
			if _, ok := done[id]; !ok {
				todo = append(todo, id)
			}
		}
		snaps, err := p.describeSnapshots(ctx, todo)
		if err != nil {
			return nil, fmt.Errorf("wait for snapshots: %w", err)
		}
		seen := map[string]cloud.Snapshot{}
		for _, s := range snaps {
			seen[s.ID] = s
		}
		var sum float64
		for _, id := range todo {
			s, ok := seen[id]
			switch {
			case !ok && p.mayBeInvisible(id, start):
				// not visible yet: nothing to add to the progress
			case !ok:
				p.budget.Pending().Done(id)
				return nil, fmt.Errorf("wait for snapshot %s: it does not exist (missing for %s): %w", id, time.Since(start).Round(time.Second), cloud.ErrSnapshotFailed)
			case s.State == cloud.SnapshotError:
				p.budget.Pending().Done(id)
				return nil, fmt.Errorf("wait for snapshot %s of volume %s: %q: %w", id, s.VolumeID, s.Message, cloud.ErrSnapshotFailed)
			case s.State == cloud.SnapshotCompleted:
				p.budget.Pending().Done(id)
				done[id] = s
			default:
				sum += s.Progress
			}
		}
		sum += 100 * float64(len(done))
		percent := sum / float64(max(len(ids), 1))
		if report != nil && len(ids) > 0 {
			report(cloud.Progress{Done: len(done), Total: len(ids), Percent: percent})
		}
		if len(done) == len(ids) {
			out := make([]cloud.Snapshot, len(ids))
			for i, id := range ids {
				out[i] = done[id]
			}
			return out, nil
		}
		if err := poll.waitProgress(ctx, percent); err != nil {
			return nil, fmt.Errorf("wait for snapshots (%d of %d done): %w", len(done), len(ids), err)
		}
	}
}

// DeleteSnapshots deletes snapshots in parallel within the budget; already gone counts as
// deleted, except for a snapshot this provider created less than ConsistencyWindow ago: AWS's
// "not found" may mean "not visible yet", so its delete is repeated until it succeeds or the
// window has passed.
func (p *Provider) DeleteSnapshots(ctx context.Context, ids []string) error {
	return forEach(ctx, p.cfg.Concurrency, ids, func(ctx context.Context, id string) error {
		del := func() error {
			_, err := p.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: awssdk.String(id)})
			return err
		}
		err := p.deleteSettled(ctx, id, del)
		if err != nil && !cloud.IsNotFound(err) {
			return fmt.Errorf("delete snapshot %s: %w", id, err)
		}
		p.budget.Pending().Done(id)
		return nil
	})
}

// UntagSnapshots removes tags by key from snapshots, 200 snapshots per DeleteTags call.
func (p *Provider) UntagSnapshots(ctx context.Context, ids, keys []string) error {
	if err := p.deleteTags(ctx, ids, keys); err != nil {
		return fmt.Errorf("untag snapshots: %w", err)
	}
	return nil
}

// deleteTags runs DeleteTags for ids in batches. A tag given by key alone is removed whatever
// its value, and removing a tag a resource does not carry is no error, so the call is
// idempotent and the SDK may resend it.
func (p *Provider) deleteTags(ctx context.Context, ids, keys []string) error {
	if len(ids) == 0 || len(keys) == 0 {
		return nil
	}
	tags := make([]types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = types.Tag{Key: awssdk.String(k)}
	}
	for batch := range slices.Chunk(ids, describeBatch) {
		err := p.retry(ctx, func() error {
			_, err := p.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: batch, Tags: tags})
			return err
		})
		if err != nil {
			return fmt.Errorf("delete tags %v of %d resources: %w", keys, len(batch), err)
		}
	}
	return nil
}

func ec2Tags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	tags := make([]types.Tag, 0, len(m))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return tags
}

func ec2TagKV(t types.Tag) (string, string) { return awssdk.ToString(t.Key), awssdk.ToString(t.Value) }
