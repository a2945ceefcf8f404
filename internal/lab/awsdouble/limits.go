package awsdouble

import (
	"strings"
	"time"
)

// Rate is one of AWS's token buckets: Burst tokens at most, refilled at PerSecond.
type Rate struct {
	Burst     float64
	PerSecond float64
}

// Limits are the API limits and quotas the double enforces, per account-region as AWS does.
// They are the double's own table, taken from AWS's documentation (see DefaultLimits), never
// from fedbr's client-side budget: a double sharing the code under test's assumptions could
// not catch them. Every EC2 action has a bucket of its own, as AWS evaluates each API
// individually; its size and refill come from its category.
type Limits struct {
	// EC2Actions overrides the rate of single EC2 actions.
	EC2Actions map[string]Rate
	// EC2Mutating is the rate of each mutating EC2 action not listed in EC2Actions.
	EC2Mutating Rate
	// EC2Describe is the rate of each non-mutating EC2 action (Describe*, Get*, List*).
	EC2Describe Rate
	// EBSDirect is the rate of each EBS direct List* action, per account.
	EBSDirect Rate
	// PendingSnapshots is how many snapshots may be pending at once in the account; 0 is
	// unlimited.
	PendingSnapshots int
	// SnapshotVolumeInterval is the shortest time between two snapshots of one volume; a
	// CreateSnapshots that includes a volume snapshotted less than this ago is answered
	// SnapshotCreationPerVolumeRateExceeded. 0 disables the rule.
	SnapshotVolumeInterval time.Duration
	// FSRSnapshots is how many snapshots may have fast snapshot restore enabled at once in the
	// account-region, whatever the number of AZs each is enabled in; 0 is unlimited. It is one
	// quota for every client of the double, as AWS's is for every user of the account.
	FSRSnapshots int
	// FSRMaxSnapshotGiB is the largest snapshot fast snapshot restore can be enabled for; 0 is
	// no limit.
	FSRMaxSnapshotGiB int32
}

// DefaultLimits are AWS's documented defaults for a new account.
//
//   - EC2 request-rate buckets: "Request throttling for the Amazon EC2 API", section
//     "Request token bucket sizes and refill rates" (Amazon EC2 Developer Guide,
//     docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html): non-mutating actions
//     100 tokens refilled at 20/s; mutating actions 200 tokens refilled at 5/s; each API is
//     evaluated individually (its own bucket).
//   - EBS direct APIs: "Amazon Elastic Block Store endpoints and quotas" (AWS General
//     Reference, docs.aws.amazon.com/general/latest/gr/ebs-service.html): ListChangedBlocks
//     and ListSnapshotBlocks 50 requests per second per account.
//   - Pending snapshots: the same page's "Concurrent snapshots" quota, and EC2's error code
//     PendingSnapshotLimitExceeded ("Amazon EC2 API Reference", "Error codes",
//     docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html); 100 per account.
//   - Per-volume snapshot rate: "Error codes" (same page), SnapshotCreationPerVolumeRateExceeded:
//     "Wait at least 15 seconds between concurrent volume snapshots." The double applies it to
//     any two snapshots of a volume started less than 15 s apart, as AWS's knowledge-center
//     article on stuck snapshots advises ("wait 15 seconds between create-snapshot API requests
//     for the same volume").
//   - Fast snapshot restore: "Amazon EBS fast snapshot restore", section "Considerations"
//     (Amazon EBS User Guide, docs.aws.amazon.com/ebs/latest/userguide/ebs-fast-snapshot-restore.html):
//     "You can enable up to 5 snapshots for fast snapshot restore per Region", counting the
//     snapshots shared with the account too; and FSR "can be enabled on snapshots with a
//     size of 16 TiB or less". The quota is stated in snapshots, while the same page calls
//     each snapshot-AZ pair one fast snapshot restore: the double counts snapshots, so one
//     snapshot enabled in three AZs uses one place. (Older editions of the page said 50.)
//
// The page text itself states the per-API model and the non-mutating 100 at 20/s; the other
// numbers are the pages' tables, which AWS revises: re-read them when a number matters.
func DefaultLimits() Limits {
	return Limits{
		EC2Mutating:            Rate{Burst: 200, PerSecond: 5},
		EC2Describe:            Rate{Burst: 100, PerSecond: 20},
		EBSDirect:              Rate{Burst: 50, PerSecond: 50},
		PendingSnapshots:       100,
		SnapshotVolumeInterval: 15 * time.Second,
		FSRSnapshots:           5,
		FSRMaxSnapshotGiB:      16 * 1024,
	}
}

// ec2Rate is the rate of an EC2 action's bucket.
func (l Limits) ec2Rate(action string) Rate {
	if r, ok := l.EC2Actions[action]; ok {
		return r
	}
	if nonMutating(action) {
		return l.EC2Describe
	}
	return l.EC2Mutating
}

// nonMutating reports whether AWS counts an EC2 action as non-mutating.
func nonMutating(action string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}
