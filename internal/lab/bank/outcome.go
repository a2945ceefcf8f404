package bank

import (
	"errors"
	"fmt"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
)

// ErrUnknownOutcome is wrapped by Commit's error when the transaction may or
// may not have committed: a commit request for its primary may have reached
// TiKV, and no answer said which. The error is an *UnknownOutcomeError, which
// carries the commit ts the transaction has if it committed.
var ErrUnknownOutcome = errors.New("commit outcome unknown")

// UnknownOutcomeError is Commit's error when the primary's commit outcome is
// unknown.
type UnknownOutcomeError struct {
	// StartTS is the transaction's start ts; CommitTS the ts it committed at
	// if it did.
	StartTS, CommitTS uint64
	// Err is why the answer is missing (a transport error, a timeout, the
	// context's end).
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("transaction %d: %v (committed at %d or not at all): %v", e.StartTS, ErrUnknownOutcome, e.CommitTS, e.Err)
}

// Unwrap returns both ErrUnknownOutcome and the cause.
func (e *UnknownOutcomeError) Unwrap() []error { return []error{ErrUnknownOutcome, e.Err} }

// primaryOutcome classifies the commit of a transaction's primary key, the
// point at which the transaction commits or not:
//
//   - an answer without a KeyError: committed (nil);
//   - a KeyError from TiKV (the lock is gone: rolled back or never there):
//     not committed, whatever happened to earlier attempts, since a commit
//     that took effect makes every later attempt succeed; ErrConflict;
//   - no answer (err, after the retries of the primary's region ended) when
//     some attempt failed in transport (an error, a timeout, the context's
//     end while it was under way), since that attempt may have reached TiKV
//     and committed: unknown, an *UnknownOutcomeError with commitTS;
//   - no answer when no attempt could have reached TiKV (locating the
//     region failed, TiKV refused it with a region error): not committed,
//     the plain error; a later reader rolls the locks back.
//
// sent reports whether some attempt failed in transport.
func primaryOutcome(primary []byte, startTS, commitTS uint64, err error, kerr *kvrpcpb.KeyError, sent bool) error {
	switch {
	case kerr != nil:
		return fmt.Errorf("commit primary %q: %w: %v", primary, ErrConflict, kerr)
	case err == nil:
		return nil
	case sent:
		return &UnknownOutcomeError{StartTS: startTS, CommitTS: commitTS, Err: fmt.Errorf("commit primary %q: %w", primary, err)}
	default:
		return fmt.Errorf("commit primary %q: %w", primary, err)
	}
}
