// Package report publishes a `fedbr br` command's status in its member's status.steps, so that
// the agent which started the command as a Job (and the manager) learns its progress from a
// watch instead of scraping logs or polling, and lets a command wait for a go signal in its
// member's spec (Member).
//
// The contract (docs/br.md, "Reporting to Kubernetes"): each command owns the entry of
// status.steps named after it (`pause`, `snapshot`, …), holding its status document (the one of
// its status or progress file, as far as the entry has fields for it: StepEntry) and, once
// it is about to exit 0, the JSON summary it prints as the entry's result. The entry is written
// by server-side apply with the field manager `fedbr-br-<command>` (MemberStep), so the steps
// and the agent share the member's status without read-modify-write races. A Sink works in
// keys: `<command>` for the status document, `<command>.result` for the summary.
//
// Reporting never gets in the way of the command's real work: Update only queues, a background
// loop writes every phase change at once and progress within one phase at most once per
// MinInterval, and a failing write is logged and retried with backoff. Only Result, at the very
// end, waits for its write (with a bound), which the same loop makes after the write in flight:
// the command's writes reach the API server one at a time, in order. The result is applied under
// a field manager of its own (`fedbr-br-<command>.result`), so that a status write the API
// server stores late (after a timed-out attempt) never takes it away.
// Every phase reaches the watcher, however fast they follow each other.
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/backoff"
)

// ResultSuffix ends the key of a command's final summary: `<command>.result`.
const ResultSuffix = ".result"

// Defaults of Options.
const (
	DefaultMinInterval    = time.Second
	DefaultMaxBackoff     = 15 * time.Second
	DefaultAttemptTimeout = 10 * time.Second
	DefaultResultTimeout  = 30 * time.Second
	DefaultCloseTimeout   = 10 * time.Second
)

// firstBackoff is the wait after the first failed write; it doubles up to MaxBackoff.
const firstBackoff = 250 * time.Millisecond

// FieldManager is the server-side-apply field manager of command's keys.
func FieldManager(command string) string { return "fedbr-br-" + command }

// ResultKey is the key of command's final summary.
func ResultKey(command string) string { return command + ResultSuffix }

// Sink writes a command's keys. Each call carries every key the command owns: with
// server-side apply, a key left out of an apply is removed from the object.
type Sink interface {
	Apply(ctx context.Context, data map[string]string) error
}

// Options configure a Reporter.
type Options struct {
	// Command is the status key, e.g. "pause".
	Command string
	// Sink receives the writes.
	Sink Sink
	// Log receives write failures; nil discards them.
	Log func(format string, args ...any)
	// MinInterval spaces writes that change progress but not the phase (default 1s).
	MinInterval time.Duration
	// MaxBackoff caps the wait between failed writes (default 15s).
	MaxBackoff time.Duration
	// AttemptTimeout bounds one write (default 10s).
	AttemptTimeout time.Duration
	// ResultTimeout bounds Result's retries (default 30s).
	ResultTimeout time.Duration
	// CloseTimeout bounds Fail's wait for the failure to be written (default 10s).
	CloseTimeout time.Duration
}

// Reporter publishes one command's status. The zero of *Reporter (nil) reports nothing, so a
// command without --member calls it unconditionally.
type Reporter struct {
	o Options

	mu      sync.Mutex
	queue   []entry // statuses not yet written, one per phase, oldest first
	latest  string  // the newest status, written or not
	phase   string  // the phase of latest
	closing bool    // Close asked for: write what is queued, then stop
	// flushing counts the Flush calls waiting: while any waits, pacing does not apply.
	flushing int
	// drained is closed (and cleared) once the queue is empty; Flush waits on it.
	drained chan struct{}

	// result is what Result asked to write last (the summary and the latest status);
	// resultErr and resultWritten say how its last attempt went.
	result        map[string]string
	resultErr     error
	resultWritten bool

	kick   chan struct{} // something was queued or Close was called
	ctx    context.Context
	halt   context.CancelFunc // stops the loop and its write at once
	done   chan struct{}      // the loop has returned
	closed sync.Once
}

// New starts a Reporter's write loop; end it with Close or Result.
func New(o Options) (*Reporter, error) {
	if o.Command == "" || o.Sink == nil {
		return nil, errors.New("report: a command name and a sink are required")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.ResultTimeout <= 0 {
		o.ResultTimeout = DefaultResultTimeout
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	ctx, halt := context.WithCancel(context.Background())
	r := &Reporter{o: o, kick: make(chan struct{}, 1), ctx: ctx, halt: halt, done: make(chan struct{})}
	go r.loop()
	return r, nil
}

// Update queues doc, the command's status in phase, for writing. It never blocks on the API
// server. A doc that cannot be encoded is logged and dropped.
func (r *Reporter) Update(phase string, doc any) {
	if r == nil {
		return
	}
	data, err := json.Marshal(doc)
	if err != nil {
		r.o.Log("Encoding the %s status for the member's status.steps failed: %v", r.o.Command, err)
		return
	}
	r.mu.Lock()
	r.queue = enqueue(r.queue, entry{phase: phase, data: string(data)})
	r.latest, r.phase = string(data), phase
	r.mu.Unlock()
	r.signal()
}

// Flush writes what is queued at once (pacing does not hold it back) and
// returns once the queue is empty — the latest status written — or with ctx's error, or when the
// reporter stopped first. It is for the one status a command must not act without: the pause's
// identity before it places anything in PD. The nil Reporter flushes nothing.
func (r *Reporter) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if len(r.queue) == 0 {
		r.mu.Unlock()
		return nil
	}
	r.flushing++
	if r.drained == nil {
		r.drained = make(chan struct{})
	}
	drained := r.drained
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.flushing--
		r.mu.Unlock()
	}()
	r.signal()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("write the %s status to the member's status.steps: %w", r.o.Command, ctx.Err())
	case <-r.done:
		return fmt.Errorf("write the %s status to the member's status.steps: the reporter stopped", r.o.Command)
	}
}

// Fail ends reporting of a command that failed with err: unless its last status already was
// in PhaseFailed (the engine reported its own failure), it publishes failed(err), the
// command's status in PhaseFailed; then it closes the reporter, waiting at most CloseTimeout
// (and ctx) for the failure to be written.
func (r *Reporter) Fail(ctx context.Context, err error, failed func(error) any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	reported := r.phase == PhaseFailed
	r.mu.Unlock()
	if !reported {
		r.Update(PhaseFailed, failed(err))
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.CloseTimeout)
	defer cancel()
	r.Close(ctx)
}

// Close writes what is queued (throttling no longer applies), giving up when ctx ends, and stops
// the write loop. A command calls it before exiting without a result (a failure), so that its
// last phase is published if the API server can be reached in time.
func (r *Reporter) Close(ctx context.Context) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	r.signal()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	r.stop()
}

// Result writes the command's final summary to `<command>.result`, together with its latest
// status, as the write loop's last write: after the write in flight, if any, has ended by
// itself (an API server goes on with a write its client abandoned, and may store it after the
// result), retrying until it succeeds or ResultTimeout (or ctx) ends. The command exits 0 only
// when it returns nil, so the agent may rely on a succeeded Job having its result in its
// member's status.steps.
func (r *Reporter) Result(ctx context.Context, doc any) error {
	if r == nil {
		return nil
	}
	data, err := json.Marshal(doc)
	if err != nil {
		r.stop()
		return fmt.Errorf("encode the %s result: %w", r.o.Command, err)
	}
	r.mu.Lock()
	keys := map[string]string{ResultKey(r.o.Command): string(data)}
	if r.latest != "" {
		keys[r.o.Command] = r.latest
	}
	r.result = keys
	r.mu.Unlock()
	r.signal()
	ctx, cancel := context.WithTimeout(ctx, r.o.ResultTimeout)
	defer cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resultWritten {
		return nil
	}
	err = r.resultErr
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = errors.New("the reporter was closed first")
	}
	return fmt.Errorf("write the %s result to the member's status.steps: %w", r.o.Command, err)
}

// writeResult makes one attempt at Result's write: done once it landed (or the loop was
// halted meanwhile).
func (r *Reporter) writeResult(keys map[string]string) (done bool, err error) {
	err = r.apply(r.ctx, keys)
	halted := r.ctx.Err() != nil
	r.mu.Lock()
	r.resultWritten = err == nil
	if !halted {
		r.resultErr = err // the halt's own cancellation says nothing of why the writes failed
	}
	r.mu.Unlock()
	return err == nil || halted, err
}

func (r *Reporter) stop() {
	r.closed.Do(func() {
		r.halt()
		<-r.done
	})
}

func (r *Reporter) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Reporter) apply(ctx context.Context, keys map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.AttemptTimeout)
	defer cancel()
	return r.o.Sink.Apply(ctx, keys)
}

// loop writes queued statuses in order, one at a time, until halted, until Close and nothing is
// queued, or until Result's write landed.
func (r *Reporter) loop() {
	defer close(r.done)
	var (
		w        written
		failures int
		retryAt  time.Time // after a failed write, no attempt before this
	)
	for attempt := 1; ; {
		r.mu.Lock()
		if final := r.result; final != nil {
			r.mu.Unlock()
			if wait := time.Until(retryAt); wait > 0 {
				if !r.sleep(wait) {
					return
				}
				continue
			}
			done, err := r.writeResult(final)
			if done {
				return
			}
			r.o.Log("Writing the %s result to the member's status.steps failed (attempt %d): %v", r.o.Command, attempt, err)
			retryAt = time.Now().Add(backoff.Doubling(firstBackoff, r.o.MaxBackoff, attempt))
			attempt++
			continue
		}
		interval := r.o.MinInterval
		if r.closing || r.flushing > 0 {
			interval = 0
		}
		var (
			e    entry
			wait time.Duration
			ok   bool
		)
		r.queue, e, wait, ok = next(r.queue, w, time.Now(), interval)
		closing := r.closing
		if !ok && r.drained != nil {
			close(r.drained)
			r.drained = nil
		}
		r.mu.Unlock()
		if !ok {
			if closing || !r.sleep(-1) {
				return
			}
			continue
		}
		if wait = max(wait, time.Until(retryAt)); wait > 0 {
			if !r.sleep(wait) {
				return
			}
			continue // re-read the queue: it may have changed while waiting
		}
		err := r.apply(r.ctx, map[string]string{r.o.Command: e.data})
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			retryAt = time.Now().Add(backoff.Doubling(firstBackoff, r.o.MaxBackoff, failures))
			r.o.Log("Writing the %s status (phase %s) to the member's status.steps failed, retrying: %v", r.o.Command, e.phase, err)
			continue
		}
		failures, retryAt = 0, time.Time{}
		w = written{phase: e.phase, data: e.data, at: time.Now()}
		r.mu.Lock()
		r.queue = drop(r.queue, e)
		r.mu.Unlock()
	}
}

// sleep waits d (d < 0: until kicked), returning early when kicked; false when halted.
func (r *Reporter) sleep(d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-r.ctx.Done():
		return false
	case <-r.kick:
	case <-timer:
	}
	return true
}

// entry is one status document waiting to be written.
type entry struct {
	phase string
	data  string
}

// written is the last status the API server accepted.
type written struct {
	phase string
	data  string
	at    time.Time
}

// enqueue adds e to the queue. A status in the same phase as the newest queued one replaces it
// (only the latest progress of a phase matters); a new phase is appended, so that a watcher
// sees every phase even when they follow each other faster than the writes.
func enqueue(q []entry, e entry) []entry {
	if n := len(q); n > 0 && q[n-1].phase == e.phase {
		q[n-1] = e
		return q
	}
	return append(q, e)
}

// next picks the status to write after w: it drops queued progress of the phase already
// written when a newer phase is queued behind it (the watcher already has that phase) and
// statuses equal to what is written. It returns the trimmed queue, the entry, and how long to
// wait before writing it: nothing for a new phase, up to interval after the last write for
// progress within the written phase. ok is false when there is nothing to write.
func next(q []entry, w written, now time.Time, interval time.Duration) (rest []entry, e entry, wait time.Duration, ok bool) {
	for len(q) > 0 {
		superseded := len(q) > 1 && q[0].phase == w.phase
		if superseded || q[0].data == w.data {
			q = q[1:]
			continue
		}
		break
	}
	if len(q) == 0 {
		return q, entry{}, 0, false
	}
	e = q[0]
	if w.at.IsZero() || e.phase != w.phase {
		return q, e, 0, true
	}
	return q, e, max(0, w.at.Add(interval).Sub(now)), true
}

// drop removes e from the head of q after it was written, unless a newer status of its phase
// replaced it meanwhile (that one still has to be written).
func drop(q []entry, e entry) []entry {
	if len(q) > 0 && q[0] == e {
		return q[1:]
	}
	return q
}
