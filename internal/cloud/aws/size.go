package aws

import (
	"context"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ebs"

	"github.com/fedbr/fedbr/internal/cloud"
)

// blockPage is the largest page the EBS direct List APIs return.
const blockPage = 10000

// SnapshotSizes sizes completed snapshots: the full size from DescribeSnapshots'
// fullSnapshotSizeInBytes when AWS reports it (one describe per 200 snapshots), else by
// listing the snapshot's blocks; the incremental size by listing the blocks changed since the
// previous snapshot. Listings run in parallel, paced by the EBS direct budget.
func (p *Provider) SnapshotSizes(ctx context.Context, reqs []cloud.SizeRequest) ([]cloud.Size, error) {
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.SnapshotID
	}
	snaps, err := p.describeSnapshots(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("size snapshots: %w", err)
	}
	byID := map[string]cloud.Snapshot{}
	for _, s := range snaps {
		byID[s.ID] = s
	}
	sizes := make([]cloud.Size, len(reqs))
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	err = forEach(ctx, p.cfg.Concurrency, idx, func(ctx context.Context, i int) error {
		r := reqs[i]
		began := time.Now()
		defer func() { sizes[i].Elapsed = time.Since(began) }()
		s, ok := byID[r.SnapshotID]
		if !ok {
			return fmt.Errorf("size snapshot %s: it does not exist", r.SnapshotID)
		}
		f := s.FullSizeBytes
		if !s.FullSizeKnown {
			var err error
			if f, err = p.listedBytes(ctx, r.SnapshotID, ""); err != nil {
				return fmt.Errorf("size snapshot %s: %w", r.SnapshotID, err)
			}
		}
		sizes[i] = cloud.Size{FullBytes: f, IncrementalBytes: f}
		if r.PreviousID != "" {
			inc, err := p.listedBytes(ctx, r.SnapshotID, r.PreviousID)
			if err != nil {
				return fmt.Errorf("size snapshot %s since %s: %w", r.SnapshotID, r.PreviousID, err)
			}
			sizes[i].IncrementalBytes = inc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sizes, nil
}

// listedBytes counts the blocks of a snapshot (or those changed since first, counting only
// blocks present in the snapshot) page by page.
func (p *Provider) listedBytes(ctx context.Context, snapshotID, first string) (int64, error) {
	var total int64
	var token *string
	for {
		var n, blockSize int64
		var next *string
		err := p.retry(ctx, func() error {
			if first == "" {
				out, err := p.ebs.ListSnapshotBlocks(ctx, &ebs.ListSnapshotBlocksInput{
					SnapshotId: awssdk.String(snapshotID), MaxResults: awssdk.Int32(blockPage), NextToken: token,
				})
				if err != nil {
					return err
				}
				n, blockSize, next = int64(len(out.Blocks)), int64(awssdk.ToInt32(out.BlockSize)), out.NextToken
				return nil
			}
			out, err := p.ebs.ListChangedBlocks(ctx, &ebs.ListChangedBlocksInput{
				FirstSnapshotId: awssdk.String(first), SecondSnapshotId: awssdk.String(snapshotID),
				MaxResults: awssdk.Int32(blockPage), NextToken: token,
			})
			if err != nil {
				return err
			}
			n = 0
			for _, b := range out.ChangedBlocks {
				if b.SecondBlockToken != nil {
					n++
				}
			}
			blockSize, next = int64(awssdk.ToInt32(out.BlockSize)), out.NextToken
			return nil
		})
		if err != nil {
			return 0, err
		}
		total += n * blockSize
		if next == nil || *next == "" {
			return total, nil
		}
		token = next
	}
}
