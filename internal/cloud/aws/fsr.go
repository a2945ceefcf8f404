package aws

import (
	"context"
	"fmt"
	"slices"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fedbr/fedbr/internal/cloud"
)

// fsrBatch is AWS's limit of snapshot ids per FSR call.
const fsrBatch = 10

// EnableFSR enables fast snapshot restore for the snapshots in az, in batches of 10. The
// pairs AWS answers as Unsuccessful are returned in refused with AWS's code and message: a
// quota another user of the account took, or a snapshot FSR does not take, is the caller's to
// plan around, not a failed call.
func (p *Provider) EnableFSR(ctx context.Context, az string, snapshotIDs []string) ([]cloud.FSRState, []cloud.FSRRefusal, error) {
	var states []cloud.FSRState
	var refused []cloud.FSRRefusal
	for batch := range slices.Chunk(snapshotIDs, fsrBatch) {
		var out *ec2.EnableFastSnapshotRestoresOutput
		err := p.retry(ctx, func() error {
			var err error
			out, err = p.ec2.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{
				AvailabilityZones: []string{az}, SourceSnapshotIds: batch,
			})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("enable FSR in %s: %w", az, err)
		}
		refused = append(refused, fsrRefusals(out.Unsuccessful)...)
		for _, s := range out.Successful {
			states = append(states, cloud.FSRState{SnapshotID: awssdk.ToString(s.SnapshotId), AZ: awssdk.ToString(s.AvailabilityZone), State: string(s.State)})
		}
	}
	return states, refused, nil
}

// fsrRefusals are the Unsuccessful items of an EnableFastSnapshotRestores answer, one per
// snapshot-AZ pair.
func fsrRefusals(items []types.EnableFastSnapshotRestoreErrorItem) []cloud.FSRRefusal {
	var out []cloud.FSRRefusal
	for _, u := range items {
		for _, e := range u.FastSnapshotRestoreStateErrors {
			r := cloud.FSRRefusal{SnapshotID: awssdk.ToString(u.SnapshotId), AZ: awssdk.ToString(e.AvailabilityZone)}
			if e.Error != nil {
				r.Code, r.Message = awssdk.ToString(e.Error.Code), awssdk.ToString(e.Error.Message)
			}
			out = append(out, r)
		}
	}
	return out
}

// DescribeFSR returns the FSR states of the snapshots in every AZ; no snapshot ids is every
// FSR of the account-region.
func (p *Provider) DescribeFSR(ctx context.Context, snapshotIDs []string) ([]cloud.FSRState, error) {
	var states []cloud.FSRState
	batches := slices.Collect(slices.Chunk(snapshotIDs, describeBatch))
	if len(snapshotIDs) == 0 {
		batches = [][]string{nil} // every FSR of the account-region
	}
	for _, batch := range batches {
		in := &ec2.DescribeFastSnapshotRestoresInput{}
		if batch != nil {
			in.Filters = []types.Filter{{Name: awssdk.String("snapshot-id"), Values: batch}}
		}
		pager := ec2.NewDescribeFastSnapshotRestoresPaginator(p.ec2, in)
		err := eachPage(ctx, p, pager, func(page *ec2.DescribeFastSnapshotRestoresOutput) {
			for _, s := range page.FastSnapshotRestores {
				states = append(states, cloud.FSRState{SnapshotID: awssdk.ToString(s.SnapshotId), AZ: awssdk.ToString(s.AvailabilityZone), State: string(s.State)})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("describe FSR: %w", err)
		}
	}
	return states, nil
}

// WaitFSR polls DescribeFastSnapshotRestores and the CloudWatch credit balance until every
// snapshot is enabled in az with at least one credit. Unlike a fixed sleep derived from the
// credit model, it ends as soon as AWS is ready and fails as soon as AWS gives up.
func (p *Provider) WaitFSR(ctx context.Context, az string, snapshotIDs []string, report func(cloud.Progress)) error {
	ready := map[string]bool{}
	poll := p.poller()
	for {
		states, err := p.DescribeFSR(ctx, snapshotIDs)
		if err != nil {
			return fmt.Errorf("wait for FSR in %s: %w", az, err)
		}
		state := map[string]string{}
		for _, s := range states {
			if s.AZ == az {
				state[s.SnapshotID] = s.State
			}
		}
		for _, id := range snapshotIDs {
			if ready[id] {
				continue
			}
			switch state[id] {
			case "", "disabling", "disabled":
				return fmt.Errorf("wait for FSR of %s in %s: state %q", id, az, state[id])
			case "enabled":
				credits, err := p.FSRCredits(ctx, id, az)
				if err != nil {
					return fmt.Errorf("wait for FSR in %s: %w", az, err)
				}
				ready[id] = credits >= 1
			}
		}
		if report != nil {
			report(cloud.Progress{Done: len(ready), Total: len(snapshotIDs), Percent: 100 * float64(countTrue(ready)) / float64(max(1, len(snapshotIDs)))})
		}
		if countTrue(ready) == len(snapshotIDs) {
			return nil
		}
		if err := poll.wait(ctx); err != nil {
			return fmt.Errorf("wait for FSR in %s (%d of %d ready): %w", az, countTrue(ready), len(snapshotIDs), err)
		}
	}
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// DisableFSR disables fast snapshot restore for the snapshots in az, in batches of 10.
func (p *Provider) DisableFSR(ctx context.Context, az string, snapshotIDs []string) error {
	for batch := range slices.Chunk(snapshotIDs, fsrBatch) {
		err := p.retry(ctx, func() error {
			_, err := p.ec2.DisableFastSnapshotRestores(ctx, &ec2.DisableFastSnapshotRestoresInput{
				AvailabilityZones: []string{az}, SourceSnapshotIds: batch,
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("disable FSR in %s: %w", az, err)
		}
	}
	return nil
}

// FSRCredits reads the snapshot's FastSnapshotRestoreCreditsBalance in az from CloudWatch
// (maximum over the last 5 minutes); no datapoint means no credits yet.
func (p *Provider) FSRCredits(ctx context.Context, snapshotID, az string) (float64, error) {
	now := time.Now()
	var out *cloudwatch.GetMetricStatisticsOutput
	err := p.retry(ctx, func() error {
		var err error
		out, err = p.cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
			Namespace:  awssdk.String("AWS/EBS"),
			MetricName: awssdk.String("FastSnapshotRestoreCreditsBalance"),
			Dimensions: []cwtypes.Dimension{
				{Name: awssdk.String("SnapshotId"), Value: awssdk.String(snapshotID)},
				{Name: awssdk.String("AvailabilityZone"), Value: awssdk.String(az)},
			},
			StartTime:  awssdk.Time(now.Add(-5 * time.Minute)),
			EndTime:    awssdk.Time(now),
			Period:     awssdk.Int32(300),
			Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read FSR credits of %s in %s: %w", snapshotID, az, err)
	}
	var best float64
	for _, d := range out.Datapoints {
		best = max(best, awssdk.ToFloat64(d.Maximum))
	}
	return best, nil
}
