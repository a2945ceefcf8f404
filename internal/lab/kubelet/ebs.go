package kubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	fedaws "github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// EBS is what a lab node needs of EC2 to stand in for the EBS CSI driver: create a volume
// for a claim (its controller's CreateVolume) and attach it to the node's instance before a
// pod uses it (ControllerPublishVolume), detach it when the pod is gone. Attachment matters
// beyond bookkeeping: CreateSnapshots on an instance captures exactly its attached volumes.
type EBS interface {
	// CreateVolume creates an empty volume and returns its id once it is available. The
	// token makes retries idempotent.
	CreateVolume(ctx context.Context, req VolumeRequest) (string, error)
	// AttachVolume attaches the volume to the instance; attaching it again to the same
	// instance is a no-op, to another instance an error.
	AttachVolume(ctx context.Context, volumeID, instanceID string) error
	// DetachVolume detaches the volume if it is attached to the instance.
	DetachVolume(ctx context.Context, volumeID, instanceID string) error
}

// VolumeRequest describes a volume to provision.
type VolumeRequest struct {
	Zone    string
	SizeGiB int32
	// Type is the EBS volume type; default gp3.
	Type string
	// Token is the idempotency token (the claim's UID).
	Token string
	Tags  map[string]string
}

// EC2 implements EBS with the real EC2 API (aws-sdk-go-v2) against the AWS double, and its
// admin API to read a volume's attachment.
type EC2 struct {
	client *ec2.Client
	admin  AWSAdmin
	// poll is the interval of the wait for a new volume to become available.
	poll time.Duration
}

// NewEC2 returns an EBS for the AWS double at endpoint, serving region.
func NewEC2(ctx context.Context, endpoint, region string) (*EC2, error) {
	cfg, err := fedaws.LoadConfig(ctx, awsdouble.Config(region), region)
	if err != nil {
		return nil, err
	}
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = awssdk.String(endpoint) })
	return &EC2{client: client, admin: AWSAdmin{Endpoint: endpoint}, poll: 200 * time.Millisecond}, nil
}

// CreateVolume implements EBS.
func (e *EC2) CreateVolume(ctx context.Context, req VolumeRequest) (string, error) {
	typ := req.Type
	if typ == "" {
		typ = "gp3"
	}
	in := &ec2.CreateVolumeInput{
		AvailabilityZone: awssdk.String(req.Zone),
		Size:             awssdk.Int32(req.SizeGiB),
		VolumeType:       ec2types.VolumeType(typ),
		ClientToken:      awssdk.String(req.Token),
	}
	if len(req.Tags) > 0 {
		var tags []ec2types.Tag
		for k, v := range req.Tags {
			tags = append(tags, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
		}
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume, Tags: tags}}
	}
	out, err := e.client.CreateVolume(ctx, in)
	if err != nil {
		return "", fmt.Errorf("create %d GiB %s volume in %s: %w", req.SizeGiB, typ, req.Zone, err)
	}
	id := awssdk.ToString(out.VolumeId)
	for {
		d, err := e.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		if err != nil {
			return "", fmt.Errorf("describe new volume %s: %w", id, err)
		}
		if len(d.Volumes) == 1 && d.Volumes[0].State == ec2types.VolumeStateAvailable {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("volume %s never became available: %w", id, ctx.Err())
		case <-time.After(e.poll):
		}
	}
}

// attachDevices are the device names tried in order, as the EBS CSI driver allocates them.
var attachDevices = func() []string {
	var out []string
	for _, a := range "bc" {
		for c := 'a'; c <= 'z'; c++ {
			out = append(out, "/dev/xvd"+string(a)+string(c))
		}
	}
	return out
}()

// AttachVolume implements EBS.
func (e *EC2) AttachVolume(ctx context.Context, volumeID, instanceID string) error {
	v, err := e.admin.Volume(ctx, volumeID)
	if err != nil {
		return err
	}
	switch v.InstanceID {
	case instanceID:
		return nil
	case "":
	default:
		return fmt.Errorf("volume %s is attached to instance %s, not to %s", volumeID, v.InstanceID, instanceID)
	}
	for _, dev := range attachDevices {
		_, err := e.client.AttachVolume(ctx, &ec2.AttachVolumeInput{
			VolumeId: awssdk.String(volumeID), InstanceId: awssdk.String(instanceID), Device: awssdk.String(dev)})
		if err == nil {
			return nil
		}
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidParameterValue" {
			continue // device in use: try the next name
		}
		return fmt.Errorf("attach volume %s to %s: %w", volumeID, instanceID, err)
	}
	return fmt.Errorf("attach volume %s to %s: no free device name", volumeID, instanceID)
}

// DetachVolume implements EBS.
func (e *EC2) DetachVolume(ctx context.Context, volumeID, instanceID string) error {
	v, err := e.admin.Volume(ctx, volumeID)
	if err != nil {
		return err
	}
	if v.InstanceID != instanceID {
		return nil
	}
	if _, err := e.client.DetachVolume(ctx, &ec2.DetachVolumeInput{
		VolumeId: awssdk.String(volumeID), InstanceId: awssdk.String(instanceID)}); err != nil {
		return fmt.Errorf("detach volume %s from %s: %w", volumeID, instanceID, err)
	}
	return nil
}
