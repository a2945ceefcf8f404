package budget

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Refresh reports which of the given pending snapshot ids are no longer pending (completed,
// failed or gone). The pending queue calls it while a caller waits for room.
type Refresh func(ctx context.Context, ids []string) ([]string, error)

// Pending keeps the number of pending snapshots of an account at or below a maximum: a caller
// reserves room for the snapshots it is about to create, and waits (refreshing the states of
// the tracked snapshots) while there is none. AWS would answer PendingSnapshotLimitExceeded.
type Pending struct {
	mu          sync.Mutex
	max         int
	clock       Clock
	poll        time.Duration
	ids         map[string]struct{}
	reserved    int
	changed     chan struct{}
	refreshing  bool
	lastRefresh time.Time
}

// NewPending returns a queue that admits at most max pending snapshots (0 means no limit).
func NewPending(max int, c Clock) *Pending {
	if c == nil {
		c = RealClock
	}
	return &Pending{max: max, clock: c, poll: time.Second, ids: map[string]struct{}{}, changed: make(chan struct{})}
}

// SetPollInterval sets how often waiters refresh snapshot states.
func (p *Pending) SetPollInterval(d time.Duration) {
	p.mu.Lock()
	p.poll = d
	p.mu.Unlock()
}

// Len is the number of tracked pending snapshots plus reserved room.
func (p *Pending) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids) + p.reserved
}

// Reserve waits until there is room for n more pending snapshots and reserves it. Follow with
// Commit (the snapshots were created) or Cancel (they were not).
func (p *Pending) Reserve(ctx context.Context, n int, refresh Refresh) error {
	if p.max > 0 && n > p.max {
		return fmt.Errorf("reserve %d pending snapshots: more than the account limit of %d", n, p.max)
	}
	for {
		p.mu.Lock()
		if p.max <= 0 || len(p.ids)+p.reserved+n <= p.max {
			p.reserved += n
			p.mu.Unlock()
			return nil
		}
		changed := p.changed
		now := p.clock.Now()
		doRefresh := refresh != nil && !p.refreshing && now.Sub(p.lastRefresh) >= p.poll
		var ids []string
		if doRefresh {
			p.refreshing = true
			for id := range p.ids {
				ids = append(ids, id)
			}
		}
		poll := p.poll
		p.mu.Unlock()

		if doRefresh {
			done, err := refresh(ctx, ids)
			p.mu.Lock()
			p.refreshing = false
			p.lastRefresh = p.clock.Now()
			p.mu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// A failed refresh is retried at the next poll; the queue never fails a
				// caller for a transient describe error.
			}
			p.Done(done...)
			continue
		}
		select {
		case <-changed:
		case <-p.clock.After(poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Commit turns n reserved slots into the tracked snapshot ids.
func (p *Pending) Commit(n int, ids ...string) {
	p.mu.Lock()
	p.reserved -= n
	for _, id := range ids {
		p.ids[id] = struct{}{}
	}
	p.signal()
	p.mu.Unlock()
}

// Cancel releases n reserved slots.
func (p *Pending) Cancel(n int) {
	p.mu.Lock()
	p.reserved -= n
	p.signal()
	p.mu.Unlock()
}

// Done stops tracking snapshots that are no longer pending.
func (p *Pending) Done(ids ...string) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	for _, id := range ids {
		delete(p.ids, id)
	}
	p.signal()
	p.mu.Unlock()
}

// signal wakes every waiter; p.mu must be held.
func (p *Pending) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}
