package bank

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestPrimaryOutcome(t *testing.T) {
	const start, commit = 10, 20
	conflict := &kvrpcpb.KeyError{TxnNotFound: &kvrpcpb.TxnNotFound{StartTs: start}}
	timeout := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	for _, tt := range []struct {
		name    string
		err     error
		kerr    *kvrpcpb.KeyError
		sent    bool
		want    error // nil, ErrConflict, ErrUnknownOutcome, or errOther
		unknown bool
	}{
		{name: "an answer without a KeyError: committed"},
		{name: "an answer after a lost attempt: committed", sent: true},
		{name: "a KeyError: not committed", kerr: conflict, want: ErrConflict},
		{name: "a KeyError after a lost attempt: not committed", kerr: conflict, sent: true, want: ErrConflict},
		{name: "a timeout of a sent request: unknown", err: timeout, sent: true, want: ErrUnknownOutcome},
		{name: "a wrapped transport error of a sent request: unknown", err: fmt.Errorf("attempt: %w", status.Error(codes.Unavailable, "connection reset")), sent: true, want: ErrUnknownOutcome},
		{name: "the context ending after a sent request: unknown", err: context.Canceled, sent: true, want: ErrUnknownOutcome},
		{name: "no request reached TiKV: not committed", err: fmt.Errorf("locate: %w", context.DeadlineExceeded), want: errOther},
		{name: "TiKV refused every attempt with a region error: not committed", err: errors.New("region 3: flashback in progress"), want: errOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := primaryOutcome([]byte("acct000001"), start, commit, tt.err, tt.kerr, tt.sent)
			switch {
			case tt.want == nil:
				if err != nil {
					t.Fatalf("primaryOutcome = %v, want committed", err)
				}
				return
			case errors.Is(tt.want, errOther):
				if err == nil || errors.Is(err, ErrUnknownOutcome) || errors.Is(err, ErrConflict) {
					t.Fatalf("primaryOutcome = %v, want a known failure", err)
				}
			default:
				if !errors.Is(err, tt.want) {
					t.Fatalf("primaryOutcome = %v, want %v", err, tt.want)
				}
			}
			var u *UnknownOutcomeError
			if errors.As(fmt.Errorf("transfer: %w", err), &u) != errors.Is(tt.want, ErrUnknownOutcome) {
				t.Fatalf("primaryOutcome = %v: an *UnknownOutcomeError only for an unknown outcome", err)
			}
			if u != nil && (u.CommitTS != commit || u.StartTS != start || !errors.Is(err, tt.err)) {
				t.Fatalf("unknown outcome %+v: want commit ts %d, start ts %d and the cause %v", u, commit, start, tt.err)
			}
		})
	}
}

var errOther = errors.New("a known failure that is no conflict")

// fakeTxns is a txnClient whose Commit answers err (with commit ts 99 when nil).
type fakeTxns struct{ err error }

func (f fakeTxns) TS(context.Context) (uint64, error)                  { return 7, nil }
func (f fakeTxns) Get(context.Context, []byte, uint64) ([]byte, error) { return []byte("100"), nil }
func (f fakeTxns) Commit(context.Context, uint64, map[string][]byte) (uint64, error) {
	if f.err != nil {
		return 0, f.err
	}
	return 99, nil
}

func TestTransferLogsCommittedAndUnknown(t *testing.T) {
	unknown := &UnknownOutcomeError{StartTS: 7, CommitTS: 42, Err: context.DeadlineExceeded}
	for _, tt := range []struct {
		name string
		err  error
		want []Txn // without From, To, Amount
	}{
		{name: "committed", want: []Txn{{StartTS: 7, CommitTS: 99}}},
		{name: "unknown outcome", err: fmt.Errorf("commit: %w", unknown), want: []Txn{{StartTS: 7, CommitTS: 42, Unknown: true}}},
		{name: "conflict", err: fmt.Errorf("prewrite: %w", ErrConflict)},
		{name: "known failure", err: errors.New("get ts: unavailable")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log Log
			err := transfer(context.Background(), fakeTxns{tt.err}, Config{Accounts: 3, Initial: 100}, &log, rand.New(rand.NewPCG(1, 1)))
			if !errors.Is(err, tt.err) {
				t.Fatalf("transfer = %v, want %v", err, tt.err)
			}
			got := log.Txns()
			if len(got) != len(tt.want) {
				t.Fatalf("logged %+v, want %+v", got, tt.want)
			}
			for i, g := range got {
				w := tt.want[i]
				if g.StartTS != w.StartTS || g.CommitTS != w.CommitTS || g.Unknown != w.Unknown || g.From < 0 || g.From == g.To || g.Amount <= 0 {
					t.Fatalf("logged %+v, want %+v", g, w)
				}
			}
		})
	}
}

func TestWaitAfter(t *testing.T) {
	var log Log
	log.Add(Txn{CommitTS: 1, From: -1, To: 0, Amount: 100}) // the load: not a transfer
	log.Add(Txn{CommitTS: 5, From: 0, To: 1, Amount: 1})
	log.Add(Txn{CommitTS: 30, From: 0, To: 1, Amount: 1, Unknown: true}) // not known to have committed
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := log.WaitAfter(ctx, 0, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitAfter with one known transfer = %v, want it to wait", err)
	}
	done := make(chan uint64, 1)
	go func() {
		last, err := log.WaitAfter(context.Background(), 4, 3)
		if err != nil {
			t.Error(err)
		}
		done <- last
	}()
	log.Add(Txn{CommitTS: 3, From: 1, To: 2, Amount: 1}) // below the ts
	log.Add(Txn{CommitTS: 20, From: 1, To: 2, Amount: 1})
	log.Add(Txn{CommitTS: 10, From: 1, To: 2, Amount: 1})
	if last := <-done; last != 20 {
		t.Fatalf("WaitAfter returned %d, want the highest commit ts 20", last)
	}
}
