package aws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/fedbr/fedbr/internal/cloud"
)

// DescribeInstance returns an instance with its block devices.
func (p *Provider) DescribeInstance(ctx context.Context, id string) (cloud.Instance, error) {
	insts, err := p.describeInstances(ctx, []string{id})
	if err != nil {
		return cloud.Instance{}, err
	}
	inst, ok := insts[id]
	if !ok {
		return cloud.Instance{}, fmt.Errorf("describe instance %s: it does not exist", id)
	}
	return inst, nil
}

// describeInstances describes instances by id, 200 per call; missing ones are left out.
func (p *Provider) describeInstances(ctx context.Context, ids []string) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for batch := range slices.Chunk(ids, describeBatch) {
		pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{
			Filters: []types.Filter{{Name: awssdk.String("instance-id"), Values: batch}},
		})
		err := eachPage(ctx, p, pager, func(page *ec2.DescribeInstancesOutput) {
			for _, r := range page.Reservations {
				for _, in := range r.Instances {
					inst := cloud.Instance{ID: awssdk.ToString(in.InstanceId), RootDevice: awssdk.ToString(in.RootDeviceName)}
					if in.Placement != nil {
						inst.AZ = awssdk.ToString(in.Placement.AvailabilityZone)
					}
					for _, bd := range in.BlockDeviceMappings {
						if bd.Ebs != nil {
							inst.Devices = append(inst.Devices, cloud.Attachment{InstanceID: inst.ID, VolumeID: awssdk.ToString(bd.Ebs.VolumeId), Device: awssdk.ToString(bd.DeviceName)})
						}
					}
					out[inst.ID] = inst
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("describe instances: %w", err)
		}
	}
	return out, nil
}

// CreateVolume creates a volume from a snapshot in spec.AZ (any AZ of the region), with the
// requested type, performance, encryption and tags.
func (p *Provider) CreateVolume(ctx context.Context, spec cloud.VolumeSpec) (cloud.Volume, error) {
	if len(spec.Tags) > cloud.MaxTags {
		return cloud.Volume{}, fmt.Errorf("create volume from %s: %d tags: %w", spec.SnapshotID, len(spec.Tags), cloud.ErrTooManyTags)
	}
	if spec.KMSKeyID != "" && !spec.Encrypted {
		return cloud.Volume{}, fmt.Errorf("create volume from %s: a KMS key needs encryption enabled", spec.SnapshotID)
	}
	in := &ec2.CreateVolumeInput{
		AvailabilityZone: awssdk.String(spec.AZ),
		SnapshotId:       awssdk.String(spec.SnapshotID),
		ClientToken:      awssdk.String(clientToken()),
	}
	if spec.Type != "" {
		in.VolumeType = types.VolumeType(spec.Type)
	}
	if spec.IOPS > 0 {
		in.Iops = awssdk.Int32(spec.IOPS)
	}
	if spec.Throughput > 0 {
		in.Throughput = awssdk.Int32(spec.Throughput)
	}
	if spec.Encrypted {
		in.Encrypted = awssdk.Bool(true)
		if spec.KMSKeyID != "" {
			in.KmsKeyId = awssdk.String(spec.KMSKeyID)
		}
	}
	if len(spec.Tags) > 0 {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: ec2Tags(spec.Tags)}}
	}
	var out *ec2.CreateVolumeOutput
	called := time.Now()
	lost := false
	err := p.retry(ctx, func() error {
		var err error
		out, err = p.ec2.CreateVolume(ctx, in)
		lost = lost || answerLost(err)
		return err
	})
	if err != nil && lost && ctx.Err() == nil {
		// Every resend carried the same client token, so at most one volume exists; if the
		// last answer was lost too, it may exist all the same: find it rather than leave it.
		if v, ok := p.findVolume(ctx, spec, called); ok {
			p.fresh.add(v.ID)
			return v, nil
		}
	}
	if err != nil {
		return cloud.Volume{}, fmt.Errorf("create volume from %s in %s: %w", spec.SnapshotID, spec.AZ, err)
	}
	v := cloud.Volume{
		ID: awssdk.ToString(out.VolumeId), AZ: awssdk.ToString(out.AvailabilityZone), State: string(out.State),
		SnapshotID: awssdk.ToString(out.SnapshotId), Type: string(out.VolumeType), SizeGiB: awssdk.ToInt32(out.Size),
		IOPS: awssdk.ToInt32(out.Iops), Throughput: awssdk.ToInt32(out.Throughput), Encrypted: awssdk.ToBool(out.Encrypted),
		KMSKeyID: awssdk.ToString(out.KmsKeyId), FastRestored: awssdk.ToBool(out.FastRestored), Tags: tagMap(out.Tags, ec2TagKV),
	}
	p.fresh.add(v.ID)
	return v, nil
}

// findVolume looks, for up to the consistency window, for the volume a CreateVolume of spec
// whose answers were lost created: from spec's snapshot, in spec's AZ, with spec's tags,
// created after the call started (less the clock skew). It needs tags to recognize it by,
// and exactly one match.
func (p *Provider) findVolume(ctx context.Context, spec cloud.VolumeSpec, called time.Time) (cloud.Volume, bool) {
	if len(spec.Tags) == 0 {
		return cloud.Volume{}, false
	}
	fs := append(tagFilters(spec.Tags),
		types.Filter{Name: awssdk.String("snapshot-id"), Values: []string{spec.SnapshotID}},
		types.Filter{Name: awssdk.String("availability-zone"), Values: []string{spec.AZ}})
	var found cloud.Volume
	ok := p.settle(ctx, called, func(ctx context.Context) (bool, error) {
		var vols []cloud.Volume
		pager := ec2.NewDescribeVolumesPaginator(p.ec2, &ec2.DescribeVolumesInput{Filters: fs})
		err := eachPage(ctx, p, pager, func(page *ec2.DescribeVolumesOutput) {
			for _, v := range page.Volumes {
				if !awssdk.ToTime(v.CreateTime).Before(called.Add(-startSkew)) {
					vols = append(vols, fromEC2Volume(v))
				}
			}
		})
		if err != nil || len(vols) != 1 {
			return false, err
		}
		found = vols[0]
		return true, nil
	})
	return found, ok
}

// clientToken makes CreateVolume idempotent across the SDK's retries of one call.
func clientToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DescribeVolumes returns the volumes that exist among ids (missing ones are left out).
func (p *Provider) DescribeVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error) {
	var vols []cloud.Volume
	for batch := range slices.Chunk(ids, describeBatch) {
		in := &ec2.DescribeVolumesInput{Filters: []types.Filter{{Name: awssdk.String("volume-id"), Values: batch}}}
		pager := ec2.NewDescribeVolumesPaginator(p.ec2, in)
		err := eachPage(ctx, p, pager, func(page *ec2.DescribeVolumesOutput) {
			for _, v := range page.Volumes {
				vols = append(vols, fromEC2Volume(v))
			}
		})
		if err != nil {
			return nil, fmt.Errorf("describe volumes: %w", err)
		}
	}
	return vols, nil
}

// ListVolumes finds the volumes carrying all the given tags.
func (p *Provider) ListVolumes(ctx context.Context, tags map[string]string) ([]cloud.Volume, error) {
	var vols []cloud.Volume
	pager := ec2.NewDescribeVolumesPaginator(p.ec2, &ec2.DescribeVolumesInput{Filters: tagFilters(tags), MaxResults: awssdk.Int32(500)})
	err := eachPage(ctx, p, pager, func(page *ec2.DescribeVolumesOutput) {
		for _, v := range page.Volumes {
			vols = append(vols, fromEC2Volume(v))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list volumes tagged %v: %w", tags, err)
	}
	return vols, nil
}

func fromEC2Volume(v types.Volume) cloud.Volume {
	out := cloud.Volume{
		ID: awssdk.ToString(v.VolumeId), AZ: awssdk.ToString(v.AvailabilityZone), State: string(v.State),
		SnapshotID: awssdk.ToString(v.SnapshotId), Type: string(v.VolumeType), SizeGiB: awssdk.ToInt32(v.Size),
		IOPS: awssdk.ToInt32(v.Iops), Throughput: awssdk.ToInt32(v.Throughput), Encrypted: awssdk.ToBool(v.Encrypted),
		KMSKeyID: awssdk.ToString(v.KmsKeyId), FastRestored: awssdk.ToBool(v.FastRestored), Tags: tagMap(v.Tags, ec2TagKV),
		Created: awssdk.ToTime(v.CreateTime),
	}
	for _, a := range v.Attachments {
		out.Attachments = append(out.Attachments, cloud.Attachment{InstanceID: awssdk.ToString(a.InstanceId), VolumeID: out.ID, Device: awssdk.ToString(a.Device)})
	}
	return out
}

// WaitVolumes polls until every volume is available (or in use); a volume in the error state
// fails the wait with cloud.ErrVolumeFailed, and so does one missing once it may no longer be
// just not visible yet (see ConsistencyWindow).
func (p *Provider) WaitVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error) {
	start := time.Now()
	poll := p.poller()
	for {
		vols, err := p.DescribeVolumes(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("wait for volumes: %w", err)
		}
		byID := map[string]cloud.Volume{}
		for _, v := range vols {
			byID[v.ID] = v
		}
		ready := 0
		for _, id := range ids {
			v, ok := byID[id]
			switch {
			case !ok && p.mayBeInvisible(id, start):
				// not visible yet
			case !ok:
				return nil, fmt.Errorf("wait for volume %s: it does not exist (missing for %s): %w", id, time.Since(start).Round(time.Second), cloud.ErrVolumeFailed)
			case v.State == cloud.VolumeError:
				return nil, fmt.Errorf("wait for volume %s: %w", id, cloud.ErrVolumeFailed)
			case v.State == cloud.VolumeAvailable || v.State == cloud.VolumeInUse:
				ready++
			}
		}
		if ready == len(ids) {
			out := make([]cloud.Volume, len(ids))
			for i, id := range ids {
				out[i] = byID[id]
			}
			return out, nil
		}
		if err := poll.wait(ctx); err != nil {
			return nil, fmt.Errorf("wait for volumes (%d of %d ready): %w", ready, len(ids), err)
		}
	}
}

// DeleteVolumes deletes volumes in parallel within the budget; already gone counts as
// deleted, except for a volume this provider created less than ConsistencyWindow ago (see
// DeleteSnapshots).
func (p *Provider) DeleteVolumes(ctx context.Context, ids []string) error {
	return forEach(ctx, p.cfg.Concurrency, ids, func(ctx context.Context, id string) error {
		err := p.deleteSettled(ctx, id, func() error {
			_, err := p.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: awssdk.String(id)})
			return err
		})
		if err != nil && !cloud.IsNotFound(err) {
			return fmt.Errorf("delete volume %s: %w", id, err)
		}
		return nil
	})
}

// UntagVolumes removes tags by key from volumes, 200 volumes per DeleteTags call.
func (p *Provider) UntagVolumes(ctx context.Context, ids, keys []string) error {
	if err := p.deleteTags(ctx, ids, keys); err != nil {
		return fmt.Errorf("untag volumes: %w", err)
	}
	return nil
}

// TagVolume adds tags to one volume, overwriting the values of keys it already carries, so a
// retry is harmless. A volume the tags would take past AWS's 50-tag limit is refused by AWS
// (TagLimitExceeded), reported as cloud.ErrTooManyTags: the caller removes tags first.
func (p *Provider) TagVolume(ctx context.Context, id string, tags map[string]string) error {
	if len(tags) == 0 {
		return nil
	}
	if len(tags) > cloud.MaxTags {
		return fmt.Errorf("tag volume %s: %d tags: %w", id, len(tags), cloud.ErrTooManyTags)
	}
	err := p.retry(ctx, func() error {
		_, err := p.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(tags)})
		return err
	})
	var api smithy.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &api) && api.ErrorCode() == "TagLimitExceeded":
		return fmt.Errorf("tag volume %s: %w: %w", id, cloud.ErrTooManyTags, err)
	}
	return fmt.Errorf("tag volume %s: %w", id, err)
}
