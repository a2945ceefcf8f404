package budget

import (
	"context"
	"sync"
	"time"
)

// Bucket is a token bucket that hands out reservations: a caller takes a token now and waits
// until the bucket would have had it, so waiters are served in arrival order at the refill
// rate.
type Bucket struct {
	mu     sync.Mutex
	rate   Rate
	clock  Clock
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(r Rate, c Clock) *Bucket {
	if c == nil {
		c = RealClock
	}
	return &Bucket{rate: r, clock: c, tokens: r.Burst, last: c.Now()}
}

// take reserves one token at now and returns how long the caller must wait for it. The
// token count may go negative: that is the queue of reservations.
func (b *Bucket) take(now time.Time) time.Duration {
	if b.rate.PerSecond <= 0 {
		return 0 // an unset rate means no limit
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate.PerSecond * float64(time.Second))
}

// giveBack returns a token whose wait was abandoned.
func (b *Bucket) giveBack() {
	if b.rate.PerSecond <= 0 {
		return
	}
	b.mu.Lock()
	b.tokens++
	if b.tokens > b.rate.Burst {
		b.tokens = b.rate.Burst
	}
	b.mu.Unlock()
}

func (b *Bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens += now.Sub(b.last).Seconds() * b.rate.PerSecond
		if b.tokens > b.rate.Burst {
			b.tokens = b.rate.Burst
		}
		b.last = now
	}
}

// Wait blocks until one token is available or ctx ends.
func (b *Bucket) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := b.take(b.clock.Now())
	if d <= 0 {
		return nil
	}
	select {
	case <-b.clock.After(d):
		return nil
	case <-ctx.Done():
		b.giveBack()
		return ctx.Err()
	}
}
