package pause

import (
	"context"
	"errors"
	"time"
)

// keeper keeps what a pause placed in PD from lapsing: from the moment the GC safepoint is
// pinned it refreshes it every TTL/3 and checks every few seconds that GC stayed below the
// backup ts; once the schedulers are paused it refreshes them too. It runs while the rest of
// the pause is still being set up, so a slow store cannot outlast the TTL of what is in place.
type keeper struct {
	// ctx ends when the pause's context does or when the keeper finds the pause broken (GC
	// passed the backup ts, or PD refused a refresh of the pin: ErrPinRefused); everything set
	// up under it stops then.
	ctx    context.Context
	cancel context.CancelCauseFunc
	sched  chan *scheduleKeeper
	done   chan struct{}
}

// brokenError is why the keeper ended the pause, as the cause of its context.
type brokenError struct{ err error }

func (e *brokenError) Error() string { return e.err.Error() }
func (e *brokenError) Unwrap() error { return e.err }

func startKeeper(ctx context.Context, log func(string, ...any), ttl time.Duration, gc *gcKeeper) *keeper {
	kctx, cancel := context.WithCancelCause(ctx)
	k := &keeper{ctx: kctx, cancel: cancel, sched: make(chan *scheduleKeeper, 1), done: make(chan struct{})}
	go k.run(log, ttl, gc)
	return k
}

func (k *keeper) run(log func(string, ...any), ttl time.Duration, gc *gcKeeper) {
	defer close(k.done)
	refresh := time.NewTicker(ttl / 3)
	defer refresh.Stop()
	check := time.NewTicker(min(5*time.Second, ttl/3))
	defer check.Stop()
	var sched *scheduleKeeper
	for {
		select {
		case <-k.ctx.Done():
			return
		case sched = <-k.sched:
		case <-check.C:
			if err := gc.check(k.ctx); err != nil {
				k.cancel(&brokenError{err})
				return
			}
		case <-refresh.C:
			err := gc.refresh(k.ctx)
			if errors.Is(err, ErrPinRefused) {
				k.cancel(&brokenError{err}) // no TTL holds a pin PD refused
				return
			}
			if err != nil {
				log("Refreshing the GC safepoint failed; the TTL still holds it: %v", err)
			}
			if sched == nil {
				continue
			}
			if err := sched.refresh(k.ctx); err != nil {
				log("Refreshing the scheduler pause failed; the TTL still holds it: %v", err)
			}
		}
	}
}

// keepSchedules adds the paused schedulers to what is refreshed.
func (k *keeper) keepSchedules(s *scheduleKeeper) { k.sched <- s }

// stop ends the keeper and waits until it refreshes nothing more: a refresh after the lift
// would place the piece again.
func (k *keeper) stop() {
	k.cancel(nil)
	<-k.done
}

// cause is the keeper's error when it broke the pause (whatever failed for it, err, is only a
// consequence), else err.
func (k *keeper) cause(err error) error {
	var b *brokenError
	if errors.As(context.Cause(k.ctx), &b) {
		return b.err
	}
	return err
}
