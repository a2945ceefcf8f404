// Package budget keeps fedbr inside AWS's per account-region API limits on the client side:
// token buckets per EC2 action class and for the EBS direct APIs, and a queue that holds back
// new snapshots while the account has its maximum of pending ones. Staying inside the limits
// is cheaper than retrying into throttling, which AWS answers by slowing everyone down.
package budget

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Clock is the time source, injectable for tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Rate is one token bucket: Burst tokens at most, refilled at PerSecond.
type Rate struct {
	Burst     float64
	PerSecond float64
}

// Limits are the budgets of one account-region. The defaults are AWS's published defaults.
type Limits struct {
	// EC2Actions gives specific EC2 actions their own bucket, as AWS does.
	EC2Actions map[string]Rate
	// EC2Mutating is the shared bucket of mutating EC2 actions not listed in EC2Actions.
	EC2Mutating Rate
	// EC2Describe is the shared bucket of non-mutating EC2 actions (Describe*, Get*, List*).
	EC2Describe Rate
	// EBSDirect is the bucket of the EBS direct List* APIs (per account).
	EBSDirect Rate
	// PendingSnapshots is how many snapshots may be pending at once in the account.
	PendingSnapshots int
}

// DefaultLimits returns AWS's default limits.
func DefaultLimits() Limits {
	create := Rate{Burst: 100, PerSecond: 5}
	tags := Rate{Burst: 100, PerSecond: 10}
	return Limits{
		EC2Actions: map[string]Rate{
			"CreateSnapshots":         create,
			"CreateSnapshot":          create,
			"CreateVolume":            create,
			"DeleteSnapshot":          create,
			"DeleteVolume":            create,
			"ModifySnapshotAttribute": create,
			"CreateTags":              tags,
			"DeleteTags":              tags,
		},
		EC2Mutating:      Rate{Burst: 50, PerSecond: 5},
		EC2Describe:      Rate{Burst: 100, PerSecond: 20},
		EBSDirect:        Rate{Burst: 50, PerSecond: 50},
		PendingSnapshots: 100,
	}
}

// Scaled returns the limits with every refill rate multiplied by factor; used against a lab
// double whose clock runs factor times faster than the wall clock.
func (l Limits) Scaled(factor float64) Limits {
	s := l
	s.EC2Actions = make(map[string]Rate, len(l.EC2Actions))
	for k, r := range l.EC2Actions {
		s.EC2Actions[k] = Rate{Burst: r.Burst, PerSecond: r.PerSecond * factor}
	}
	s.EC2Mutating.PerSecond *= factor
	s.EC2Describe.PerSecond *= factor
	s.EBSDirect.PerSecond *= factor
	return s
}

// DefaultHeadroom is the number of tokens the client keeps in reserve in every bucket: the
// client and AWS refill at the same rate, but requests reach AWS with some jitter, and
// without a reserve a request arriving a little early finds AWS's bucket empty.
const DefaultHeadroom = 5

// WithHeadroom returns the limits with every burst lowered by tokens (never below 1).
func (l Limits) WithHeadroom(tokens float64) Limits {
	s := l
	s.EC2Actions = make(map[string]Rate, len(l.EC2Actions))
	lower := func(r Rate) Rate {
		r.Burst = max(1, r.Burst-tokens)
		return r
	}
	for k, r := range l.EC2Actions {
		s.EC2Actions[k] = lower(r)
	}
	s.EC2Mutating = lower(l.EC2Mutating)
	s.EC2Describe = lower(l.EC2Describe)
	s.EBSDirect = lower(l.EBSDirect)
	return s
}

// ClientLimits are the limits a client should budget with: AWS's defaults with
// DefaultHeadroom.
func ClientLimits() Limits { return DefaultLimits().WithHeadroom(DefaultHeadroom) }

// Class names the bucket an EC2 action draws from: the action itself when it has its own
// bucket, else "mutating" or "describe".
func (l Limits) Class(action string) string {
	if _, ok := l.EC2Actions[action]; ok {
		return action
	}
	if NonMutating(action) {
		return "describe"
	}
	return "mutating"
}

// NonMutating reports whether AWS counts an EC2 action as non-mutating.
func NonMutating(action string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// Budget is the call budget of one account-region, shared by every client of it.
type Budget struct {
	limits  Limits
	clock   Clock
	mu      sync.Mutex
	buckets map[string]*Bucket
	ebs     *Bucket
	pending *Pending
}

// New returns a budget with the given limits.
func New(l Limits, c Clock) *Budget {
	if c == nil {
		c = RealClock
	}
	return &Budget{
		limits:  l,
		clock:   c,
		buckets: map[string]*Bucket{},
		ebs:     NewBucket(l.EBSDirect, c),
		pending: NewPending(l.PendingSnapshots, c),
	}
}

// Limits are the budget's limits.
func (b *Budget) Limits() Limits { return b.limits }

// EC2 waits until the bucket of action has a token for one call.
func (b *Budget) EC2(ctx context.Context, action string) error {
	if err := b.bucket(action).Wait(ctx); err != nil {
		return fmt.Errorf("wait for EC2 budget of %s: %w", action, err)
	}
	return nil
}

// EBS waits until the EBS direct bucket has a token for one call.
func (b *Budget) EBS(ctx context.Context) error {
	if err := b.ebs.Wait(ctx); err != nil {
		return fmt.Errorf("wait for EBS direct budget: %w", err)
	}
	return nil
}

// Pending is the account's pending-snapshot queue.
func (b *Budget) Pending() *Pending { return b.pending }

func (b *Budget) bucket(action string) *Bucket {
	class := b.limits.Class(action)
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.buckets[class]
	if !ok {
		r, ok := b.limits.EC2Actions[class]
		switch {
		case ok:
		case class == "describe":
			r = b.limits.EC2Describe
		default:
			r = b.limits.EC2Mutating
		}
		bk = NewBucket(r, b.clock)
		b.buckets[class] = bk
	}
	return bk
}

// Registry hands out one Budget per account-region key, so every client of an account-region
// in a process shares it.
type Registry struct {
	mu      sync.Mutex
	budgets map[string]*Budget
}

var shared Registry

// Shared returns the process-wide budget for key (e.g. "account/region"), creating it with l
// on first use; later callers get the first caller's limits.
func Shared(key string, l Limits) *Budget {
	return shared.Get(key, l, RealClock)
}

// Get returns the budget for key, creating it with l and c on first use.
func (r *Registry) Get(key string, l Limits, c Clock) *Budget {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budgets == nil {
		r.budgets = map[string]*Budget{}
	}
	b, ok := r.budgets[key]
	if !ok {
		b = New(l, c)
		r.budgets[key] = b
	}
	return b
}
