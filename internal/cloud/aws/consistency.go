package aws

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/fedbr/fedbr/internal/cloud"
)

// The EC2 API is eventually consistent: a snapshot or volume that a call has just created may
// be unknown to the calls that follow for a while (asked for by id it is InvalidSnapshot.NotFound
// or InvalidVolume.NotFound, a listing leaves it out), and a call whose answer was lost may
// have created what it was asked to. The provider therefore
//   - remembers what it created, and for Config.ConsistencyWindow after that treats "not found"
//     as "not visible yet": deletes are repeated, waits go on waiting;
//   - lets a wait go on while a resource is missing for ConsistencyWindow from the wait's start
//     (a wait may resume what another process created), never longer;
//   - resolves a create whose answer was lost by looking for what it would have created (the
//     request's tags and source, created after the call started) before it creates again.
//
// AWS documents no bound for the delay; ConsistencyWindow is fedbr's.

// defaultConsistencyWindow is how long a missing resource may be one that is not visible yet.
const defaultConsistencyWindow = 2 * time.Minute

// startSkew allows for the difference between this host's clock and AWS's when a lost create
// is looked for by its creation time.
const startSkew = time.Minute

// freshness remembers when this provider created each snapshot and volume, for the
// consistency window.
type freshness struct {
	window time.Duration
	mu     sync.Mutex
	at     map[string]time.Time
}

func newFreshness(window time.Duration) *freshness {
	return &freshness{window: window, at: map[string]time.Time{}}
}

// add records ids as created now.
func (f *freshness) add(ids ...string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, at := range f.at {
		if now.Sub(at) >= f.window {
			delete(f.at, id)
		}
	}
	for _, id := range ids {
		f.at[id] = now
	}
}

// settling reports whether id was created by this provider less than the window ago, so
// that AWS may not show it yet.
func (f *freshness) settling(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[id]
	return ok && time.Since(at) < f.window
}

// mayBeInvisible reports whether a resource missing from an answer may just not be visible
// yet: this provider created it less than the window ago, or the wait that misses it began
// less than the window ago.
func (p *Provider) mayBeInvisible(id string, waitStart time.Time) bool {
	return p.fresh.settling(id) || time.Since(waitStart) < p.cfg.ConsistencyWindow
}

// answerLost reports whether a failed call may have run although its caller never heard: the
// request was sent and no answer came (the connection closed, the transport timed out). An
// API error, whatever its status, is an answer: AWS says the call did not do its work, and a
// resend is a new attempt.
func answerLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var conn interface{ ConnectionError() bool }
	if errors.As(err, &conn) && conn.ConnectionError() {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return false
	}
	var st interface{ HTTPStatusCode() int }
	return !errors.As(err, &st) || st.HTTPStatusCode() == 0
}

// settle repeats find, paced by the provider's poller, until it returns true or the
// consistency window from since has passed; it reports whether find succeeded.
func (p *Provider) settle(ctx context.Context, since time.Time, find func(context.Context) (bool, error)) bool {
	poll := p.poller()
	for {
		if ok, err := find(ctx); err == nil && ok {
			return true
		}
		if time.Since(since) >= p.cfg.ConsistencyWindow || poll.wait(ctx) != nil {
			return false
		}
	}
}

// errAnswerLost marks a create whose answer was lost: it may have run.
var errAnswerLost = errors.New("the call may have run")

// noSDKRetries keeps the SDK from resending a call that is not idempotent; the provider's own
// loop retries it after looking for what a lost attempt did.
func noSDKRetries(o *ec2.Options) {
	o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1)
}

// deleteSettled runs del through the retry loop; while it answers "not found" for a resource
// this provider created less than the window ago, it tries again, paced by the poller.
func (p *Provider) deleteSettled(ctx context.Context, id string, del func() error) error {
	poll := p.poller()
	for {
		err := p.retry(ctx, del)
		if !cloud.IsNotFound(err) || !p.fresh.settling(id) {
			return err
		}
		if werr := poll.wait(ctx); werr != nil {
			return fmt.Errorf("%w (still not visible: %w)", err, werr)
		}
	}
}
