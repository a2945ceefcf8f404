package bank_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/bank"
)

// judgeCfg is a small bank for the pure checker tests.
var judgeCfg = bank.Config{Accounts: 6, Initial: 100}

// judgeTS is the ts the pure tests judge.
const judgeTS = 10_000

// history is a log: the load at ts 1, then before transfers committed at or
// below judgeTS (the last at judgeTS itself) and after transfers above it,
// each moving 1 from account k%6 to (k+1)%6.
func history(before, after int) []bank.Txn {
	var txns []bank.Txn
	for i := range judgeCfg.Accounts {
		txns = append(txns, bank.Txn{StartTS: 1, CommitTS: 1, From: -1, To: i, Amount: judgeCfg.Initial})
	}
	for k := range before + after {
		ts := uint64(judgeTS - before + 1 + k)
		txns = append(txns, bank.Txn{StartTS: ts - 1, CommitTS: ts, From: k % judgeCfg.Accounts, To: (k + 1) % judgeCfg.Accounts, Amount: 1})
	}
	return txns
}

// state is what a cluster holds after the known transactions of txns at or
// below ts, as the checker reads it.
func state(txns []bank.Txn, ts uint64) map[int]string {
	out := map[int]string{}
	for i, v := range bank.Expected(txns, ts) {
		out[i] = strconv.FormatInt(v, 10)
	}
	return out
}

// with returns txns plus extra.
func with(txns []bank.Txn, extra ...bank.Txn) []bank.Txn {
	return append(append([]bank.Txn(nil), txns...), extra...)
}

// known returns t as a transfer of known outcome.
func known(t bank.Txn) bank.Txn { t.Unknown = false; return t }

func TestJudge(t *testing.T) {
	full := history(bank.MinTransfers, bank.MinTransfers)
	// Transfers the tests add: 0 → 1 of 7 and 2 → 1 of 5 below the ts, 3 → 4 of 9 above it
	// (above every transfer of the history).
	u1 := bank.Txn{StartTS: 50, CommitTS: 60, From: 0, To: 1, Amount: 7, Unknown: true}
	u2 := bank.Txn{StartTS: 70, CommitTS: 80, From: 2, To: 1, Amount: 5, Unknown: true}
	late := bank.Txn{StartTS: judgeTS, CommitTS: judgeTS + 1000, From: 3, To: 4, Amount: 9, Unknown: true}
	unknowns := func(n int) []bank.Txn {
		var out []bank.Txn
		for k := range n {
			out = append(out, bank.Txn{StartTS: 20, CommitTS: uint64(21 + k), From: k % 6, To: (k + 3) % 6, Amount: int64(k + 1), Unknown: true})
		}
		return out
	}
	for _, tt := range []struct {
		name string
		txns []bank.Txn
		ts   uint64
		got  map[int]string
		want error // nil, ErrMismatch, ErrTooLittleData or ErrTooManyUnknown
	}{
		{name: "exact state at the ts", txns: full, ts: judgeTS, got: state(full, judgeTS)},
		{name: "empty cluster at a ts before the load is refused, not passed",
			txns: full, ts: 0, got: map[int]string{}, want: bank.ErrTooLittleData},
		{name: "the load alone at a ts before the first transfer is refused",
			txns: full, ts: 2, got: state(full, 2), want: bank.ErrTooLittleData},
		{name: "a log with nothing after the ts is refused", txns: history(150, 0), ts: judgeTS, got: state(history(150, 0), judgeTS), want: bank.ErrTooLittleData},
		{name: "99 transfers before the ts is refused", txns: history(bank.MinTransfers-1, bank.MinTransfers), ts: judgeTS,
			got: state(history(bank.MinTransfers-1, bank.MinTransfers), judgeTS), want: bank.ErrTooLittleData},
		{name: "99 transfers after the ts is refused", txns: history(bank.MinTransfers, bank.MinTransfers-1), ts: judgeTS,
			got: state(history(bank.MinTransfers, bank.MinTransfers-1), judgeTS), want: bank.ErrTooLittleData},
		{name: "100 on each side is judged: a wrong state fails", txns: full, ts: judgeTS, got: state(full, judgeTS+1), want: bank.ErrMismatch},
		{name: "a transfer committed after the ts must be absent", txns: full, ts: judgeTS, got: state(full, judgeTS+bank.MinTransfers), want: bank.ErrMismatch},
		{name: "a transfer at or below the ts must be there", txns: full, ts: judgeTS, got: state(full, judgeTS-1), want: bank.ErrMismatch},
		{name: "an account missing fails", txns: full, ts: judgeTS, got: func() map[int]string {
			g := state(full, judgeTS)
			delete(g, 5)
			return g
		}(), want: bank.ErrMismatch},
		{name: "transfers of unknown outcome do not count toward the minimum",
			txns: with(history(bank.MinTransfers-1, bank.MinTransfers), u1), ts: judgeTS,
			got: state(history(bank.MinTransfers-1, bank.MinTransfers), judgeTS), want: bank.ErrTooLittleData},
		{name: "an unknown transfer that did not commit", txns: with(full, u1), ts: judgeTS, got: state(full, judgeTS)},
		{name: "an unknown transfer that committed", txns: with(full, u1), ts: judgeTS, got: state(with(full, known(u1)), judgeTS)},
		{name: "the same transfer known as not committed but applied fails", txns: full, ts: judgeTS,
			got: state(with(full, known(u1)), judgeTS), want: bank.ErrMismatch},
		{name: "the same transfer known as committed but not applied fails", txns: with(full, known(u1)), ts: judgeTS,
			got: state(full, judgeTS), want: bank.ErrMismatch},
		{name: "two unknown transfers, neither", txns: with(full, u1, u2), ts: judgeTS, got: state(full, judgeTS)},
		{name: "two unknown transfers, the first", txns: with(full, u1, u2), ts: judgeTS, got: state(with(full, known(u1)), judgeTS)},
		{name: "two unknown transfers, the second", txns: with(full, u1, u2), ts: judgeTS, got: state(with(full, known(u2)), judgeTS)},
		{name: "two unknown transfers, both", txns: with(full, u1, u2), ts: judgeTS, got: state(with(full, known(u1), known(u2)), judgeTS)},
		{name: "half of an unknown transfer fails", txns: with(full, u1), ts: judgeTS, got: func() map[int]string {
			g := state(full, judgeTS)
			g[0] = strconv.FormatInt(bank.Expected(full, judgeTS)[0]-7, 10) // debited, never credited
			return g
		}(), want: bank.ErrMismatch},
		{name: "an unknown transfer above the ts is invisible: absent passes", txns: with(full, late), ts: judgeTS, got: state(full, judgeTS)},
		{name: "an unknown transfer above the ts is invisible: present fails", txns: with(full, late), ts: judgeTS,
			got: func() map[int]string {
				seen := known(late)
				seen.CommitTS = judgeTS // the late transfer as if it were visible at the ts
				return state(with(full, seen), judgeTS)
			}(), want: bank.ErrMismatch},
		{name: "unknown transfers above the ts are not counted toward the limit", txns: with(full, func() []bank.Txn {
			var out []bank.Txn
			for k := range bank.MaxUnknown + 5 {
				l := late
				l.CommitTS += uint64(k)
				out = append(out, l)
			}
			return out
		}()...), ts: judgeTS, got: state(full, judgeTS)},
		{name: "12 unknown transfers are tried every way", txns: with(full, unknowns(bank.MaxUnknown)...), ts: judgeTS,
			got: state(with(full, known(unknowns(12)[3]), known(unknowns(12)[10]), known(unknowns(12)[11])), judgeTS)},
		{name: "12 unknown transfers still fail a wrong state", txns: with(full, unknowns(bank.MaxUnknown)...), ts: judgeTS,
			got: state(full, judgeTS-1), want: bank.ErrMismatch},
		{name: "13 unknown transfers at or below the ts are refused", txns: with(full, unknowns(bank.MaxUnknown+1)...), ts: judgeTS,
			got: state(full, judgeTS), want: bank.ErrTooManyUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := bank.Judge(judgeCfg, tt.txns, tt.ts, tt.got)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Judge: %v, want a pass", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Judge: %v, want %v", err, tt.want)
			}
			// A refusal is never a detection, and a detection never a refusal.
			if errors.Is(err, bank.ErrTooLittleData) == errors.Is(err, bank.ErrMismatch) {
				t.Fatalf("Judge: %v is both or neither of a refusal and a mismatch", err)
			}
			t.Logf("%v", err)
		})
	}
}

func TestJudgeReportsFirstDifferingAccount(t *testing.T) {
	full := history(bank.MinTransfers, bank.MinTransfers)
	got := state(full, judgeTS)
	got[2], got[4] = "1", "2"
	err := bank.Judge(judgeCfg, full, judgeTS, got)
	var m *bank.Mismatch
	if !errors.As(err, &m) {
		t.Fatalf("Judge: %v, want a *Mismatch", err)
	}
	want := bank.Expected(full, judgeTS)
	var wantTotal int64
	for _, v := range want {
		wantTotal += v
	}
	if m.Account != 2 || m.Got != "1" || m.Want != strconv.FormatInt(want[2], 10) || m.WantTotal != wantTotal || m.Total != wantTotal-want[2]-want[4]+3 {
		t.Fatalf("mismatch %+v, want account 2 got 1 want %d, totals %d of %d", m, want[2], wantTotal-want[2]-want[4]+3, wantTotal)
	}
}

func TestJudgeRefusesAnUnknownLoad(t *testing.T) {
	full := history(bank.MinTransfers, bank.MinTransfers)
	full[0].Unknown = true
	err := bank.Judge(judgeCfg, full, judgeTS, state(full, judgeTS))
	if err == nil || errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("Judge: %v, want an error that is no mismatch", err)
	}
}

// TestJudgeAgainstNaive compares Judge with a naive checker: the state is
// one of those built by applying every known transaction at or below the ts
// and any subset of the unknown ones there, each subset replayed in full.
func TestJudgeAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 400 {
		txns := history(bank.MinTransfers+rng.IntN(5), bank.MinTransfers+rng.IntN(5))
		var unknown []bank.Txn
		for range rng.IntN(7) {
			from := rng.IntN(judgeCfg.Accounts)
			to := (from + 1 + rng.IntN(judgeCfg.Accounts-1)) % judgeCfg.Accounts
			ts := uint64(judgeTS - 50 + rng.IntN(100)) // some above the ts
			unknown = append(unknown, bank.Txn{StartTS: ts - 1, CommitTS: ts, From: from, To: to, Amount: int64(1 + rng.IntN(3)), Unknown: true})
		}
		txns = with(txns, unknown...)
		// A state some outcome allows, perhaps disturbed.
		var applied []bank.Txn
		for _, u := range unknown {
			if rng.IntN(2) == 0 {
				applied = append(applied, known(u))
			}
		}
		got := state(with(txns, applied...), judgeTS)
		if rng.IntN(2) == 0 {
			i := rng.IntN(judgeCfg.Accounts)
			v, _ := strconv.ParseInt(got[i], 10, 64)
			got[i] = strconv.FormatInt(v+int64(rng.IntN(7)-3), 10)
		}
		naive := false
		for choice := range 1 << len(unknown) {
			var chosen []bank.Txn
			for k, u := range unknown {
				if choice&(1<<k) != 0 {
					chosen = append(chosen, known(u))
				}
			}
			if fmt.Sprint(state(with(txns, chosen...), judgeTS)) == fmt.Sprint(got) {
				naive = true
				break
			}
		}
		err := bank.Judge(judgeCfg, txns, judgeTS, got)
		if naive != (err == nil) || err != nil && !errors.Is(err, bank.ErrMismatch) {
			t.Fatalf("run %d: Judge = %v, naive pass = %v\nunknown %+v\ngot %v", run, err, naive, unknown, got)
		}
	}
}
