package aws

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// Region is the region the provider calls: Config.Region, else the environment's; "" when
// neither names one.
func (p *Provider) Region() string { return p.aws.Region }

// Identity retrieves the provider's credentials as its calls would (for IRSA: the web
// identity exchange with STS) and says where they came from: the SDK's provider name and the
// access key id's first four characters (ASIA: temporary, AKIA: a user's long-term key).
func (p *Provider) Identity(ctx context.Context) (string, error) {
	if p.aws.Credentials == nil {
		return "", fmt.Errorf("no AWS credentials: neither the environment, a web identity (IRSA), container credentials (EKS Pod Identity) nor the instance metadata service gave any")
	}
	c, err := p.aws.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("retrieve AWS credentials: %w", err)
	}
	id := c.AccessKeyID
	if len(id) > 4 {
		id = id[:4] + "…"
	}
	return fmt.Sprintf("%s (key %s)", c.Source, id), nil
}

// CheckReadAccess asks EC2 for one page of the account's volumes and of the snapshots it owns:
// the reads every step makes, so a role without ec2:DescribeVolumes or ec2:DescribeSnapshots,
// or a wrong region or endpoint, fails here with AWS's own error.
func (p *Provider) CheckReadAccess(ctx context.Context) error {
	if err := p.retry(ctx, func() error {
		_, err := p.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{MaxResults: awssdk.Int32(5)})
		return err
	}); err != nil {
		return fmt.Errorf("ec2:DescribeVolumes: %w", err)
	}
	if err := p.retry(ctx, func() error {
		_, err := p.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, MaxResults: awssdk.Int32(5)})
		return err
	}); err != nil {
		return fmt.Errorf("ec2:DescribeSnapshots: %w", err)
	}
	return nil
}
