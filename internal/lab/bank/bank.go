// Package bank is the lab's consistency workload: accounts spread over many
// regions, random transfers in multi-region transactions, a log of every
// committed transfer with its commit ts (and of every transfer whose commit
// outcome is unknown, with its candidate commit ts), and a checker that
// decides whether a (restored) cluster holds exactly the state as of a
// timestamp. The checker refuses to judge a timestamp with too few
// transfers on either side of it: there, a wrong restore and a right one
// can hold the same state.
package bank

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Config shapes the bank.
type Config struct {
	// Accounts is the number of accounts.
	Accounts int
	// Initial is every account's opening balance.
	Initial int64
}

// Key is account i's key; keys sort in account order.
func Key(i int) []byte { return []byte(fmt.Sprintf("acct%06d", i)) }

// SplitKeys returns keys that cut the accounts into n ranges, for
// pre-splitting a cluster.
func SplitKeys(accounts, n int) [][]byte {
	var out [][]byte
	for i := 1; i < n; i++ {
		out = append(out, Key(accounts*i/n))
	}
	return out
}

// Txn is one transaction of the log; the load is Txn{From: -1}.
type Txn struct {
	StartTS  uint64 `json:"start_ts"`
	CommitTS uint64 `json:"commit_ts"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	Amount   int64  `json:"amount"`
	// Unknown marks a transfer whose commit outcome is unknown (its primary's
	// commit may or may not have taken effect, see ErrUnknownOutcome):
	// CommitTS is the ts it committed at if it did. The checker accepts
	// either outcome for it, and only one for every other transaction.
	Unknown bool `json:"unknown,omitempty"`
}

// transfer reports whether t is a transfer (not the opening load).
func (t Txn) transfer() bool { return t.From >= 0 }

// Log is the transaction log, safe for concurrent writers.
type Log struct {
	mu   sync.Mutex
	txns []Txn
	// added is closed (and cleared) by the next Add; WaitAfter waits on it.
	added chan struct{}
}

// Add records a transaction.
func (l *Log) Add(t Txn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txns = append(l.txns, t)
	if l.added != nil {
		close(l.added)
		l.added = nil
	}
}

// WaitAfter waits until the log holds at least n transfers of known outcome
// committed after ts, and returns the highest commit ts among them.
// Harnesses call it with ts 0 before they take a backup (every transfer
// logged by then committed below the backup's ts) and with the backup's ts
// before they stop the workload, so the checker has MinTransfers on each
// side.
func (l *Log) WaitAfter(ctx context.Context, ts uint64, n int) (uint64, error) {
	seen, count := 0, 0
	var last uint64
	for {
		l.mu.Lock()
		for _, t := range l.txns[seen:] {
			if t.transfer() && !t.Unknown && t.CommitTS > ts {
				count++
				last = max(last, t.CommitTS)
			}
		}
		seen = len(l.txns)
		if count >= n {
			l.mu.Unlock()
			return last, nil
		}
		if l.added == nil {
			l.added = make(chan struct{})
		}
		added := l.added
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d transfers committed after ts %d: %w", count, n, ts, ctx.Err())
		case <-added:
		}
	}
}

// Txns returns the log sorted by commit ts.
func (l *Log) Txns() []Txn {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Txn(nil), l.txns...)
	sort.Slice(out, func(i, j int) bool { return out[i].CommitTS < out[j].CommitTS })
	return out
}

// Load writes every account's opening balance, in batches of one
// transaction each, and logs them.
func Load(ctx context.Context, c *Client, cfg Config, log *Log) error {
	const batch = 64
	for lo := 0; lo < cfg.Accounts; lo += batch {
		start, err := c.TS(ctx)
		if err != nil {
			return err
		}
		puts := map[string][]byte{}
		for i := lo; i < min(lo+batch, cfg.Accounts); i++ {
			puts[string(Key(i))] = []byte(strconv.FormatInt(cfg.Initial, 10))
		}
		ts, err := c.Commit(ctx, start, puts)
		if err != nil {
			return fmt.Errorf("load accounts %d..: %w", lo, err)
		}
		for i := lo; i < min(lo+batch, cfg.Accounts); i++ {
			log.Add(Txn{StartTS: start, CommitTS: ts, From: -1, To: i, Amount: cfg.Initial})
		}
	}
	return nil
}

// Stats summarises a run: Unknown counts the transfers whose commit outcome
// is unknown (logged with Txn.Unknown), Failed the other failures but
// conflicts.
type Stats struct {
	Committed, Conflicts, Unknown, Failed int
	Elapsed                               time.Duration
}

// Run makes random transfers with workers concurrent clients until ctx ends
// (rate 0 = as fast as possible, else transfers/s over all workers).
func Run(ctx context.Context, c *Client, cfg Config, log *Log, workers int, rate float64, seed uint64) Stats {
	var mu sync.Mutex
	var st Stats
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var tick *time.Ticker
			if rate > 0 {
				tick = time.NewTicker(time.Duration(float64(workers) / rate * float64(time.Second)))
				defer tick.Stop()
			}
			for ctx.Err() == nil {
				if tick != nil {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
				err := transfer(ctx, c, cfg, log, rng)
				mu.Lock()
				switch {
				case err == nil:
					st.Committed++
				case errors.Is(err, ErrConflict):
					st.Conflicts++
				case errors.Is(err, ErrUnknownOutcome):
					st.Unknown++
				case ctx.Err() == nil:
					st.Failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st.Elapsed = time.Since(begin)
	return st
}

// txnClient is what a transfer needs of the Client.
type txnClient interface {
	TS(ctx context.Context) (uint64, error)
	Get(ctx context.Context, key []byte, ts uint64) ([]byte, error)
	Commit(ctx context.Context, startTS uint64, puts map[string][]byte) (uint64, error)
}

// transfer moves a random amount between two random accounts. It logs the
// transfer when it committed, and when its outcome is unknown (Unknown set,
// with the candidate commit ts); a transfer that surely failed is not logged.
func transfer(ctx context.Context, c txnClient, cfg Config, log *Log, rng *rand.Rand) error {
	from := rng.IntN(cfg.Accounts)
	to := rng.IntN(cfg.Accounts - 1)
	if to >= from {
		to++
	}
	start, err := c.TS(ctx)
	if err != nil {
		return err
	}
	fb, err := readBalance(ctx, c, from, start)
	if err != nil {
		return err
	}
	tb, err := readBalance(ctx, c, to, start)
	if err != nil {
		return err
	}
	amount := rng.Int64N(10) + 1
	commit, err := c.Commit(ctx, start, map[string][]byte{
		string(Key(from)): []byte(strconv.FormatInt(fb-amount, 10)),
		string(Key(to)):   []byte(strconv.FormatInt(tb+amount, 10)),
	})
	var unknown *UnknownOutcomeError
	if errors.As(err, &unknown) {
		log.Add(Txn{StartTS: start, CommitTS: unknown.CommitTS, From: from, To: to, Amount: amount, Unknown: true})
		return err
	}
	if err != nil {
		return err
	}
	log.Add(Txn{StartTS: start, CommitTS: commit, From: from, To: to, Amount: amount})
	return nil
}

func readBalance(ctx context.Context, c txnClient, i int, ts uint64) (int64, error) {
	v, err := c.Get(ctx, Key(i), ts)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, fmt.Errorf("account %d missing", i)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// MinTransfers is how many transfers of known outcome (not the load) the
// checker needs committed at or below the ts it judges, and how many after
// it. With fewer on either side a wrong restore can hold what a right one
// holds: a cluster flashed back to before the first transfer is as empty as
// the log says it should be at a ts before the first transfer, and a restore
// that kept later writes holds what the log says when nothing came later.
const MinTransfers = 100

// MaxUnknown is the most transfers of unknown outcome at or below the judged
// ts that the checker enumerates (2^MaxUnknown candidate states).
const MaxUnknown = 12

var (
	// ErrTooLittleData is wrapped by every refusal to judge: the log holds
	// too little around the ts for a verdict to mean anything. A refusal is
	// neither a pass nor a detection; it is never ErrMismatch.
	ErrTooLittleData = errors.New("too little data to judge")
	// ErrTooManyUnknown is the refusal for more than MaxUnknown transfers of
	// unknown outcome at or below the ts; it wraps ErrTooLittleData.
	ErrTooManyUnknown = fmt.Errorf("%w: too many transfers of unknown outcome", ErrTooLittleData)
)

// Tally counts a log's transfers (not the load) around a ts.
type Tally struct {
	// Before and After count the transfers of known outcome committed at or
	// below the ts and after it.
	Before, After int
	// Unknown counts the transfers of unknown outcome whose candidate commit
	// ts is at or below the ts (those above it are invisible at the ts
	// whether they committed or not).
	Unknown int
}

// Count tallies txns around ts.
func Count(txns []Txn, ts uint64) Tally {
	var n Tally
	for _, t := range txns {
		switch {
		case !t.transfer():
		case t.Unknown:
			if t.CommitTS <= ts {
				n.Unknown++
			}
		case t.CommitTS <= ts:
			n.Before++
		default:
			n.After++
		}
	}
	return n
}

// refuse says why the checker will not judge txns at ts (wrapping
// ErrTooLittleData), or nil when it will.
func refuse(txns []Txn, ts uint64) error {
	n := Count(txns, ts)
	if n.Before < MinTransfers || n.After < MinTransfers {
		return fmt.Errorf("check at ts %d: %w: %d transfers committed at or before it and %d after it, want at least %d on each side",
			ts, ErrTooLittleData, n.Before, n.After, MinTransfers)
	}
	if n.Unknown > MaxUnknown {
		return fmt.Errorf("check at ts %d: %w: %d at or before it, at most %d can be tried both ways", ts, ErrTooManyUnknown, n.Unknown, MaxUnknown)
	}
	return nil
}

// Expected returns every account's balance after all transactions of txns
// of known outcome committed at or below ts; accounts never loaded are
// absent. Transfers of unknown outcome are left out (Judge tries both
// outcomes of each).
func Expected(txns []Txn, ts uint64) map[int]int64 {
	out := map[int]int64{}
	for _, t := range txns {
		if t.CommitTS > ts || t.Unknown {
			continue
		}
		if !t.transfer() {
			out[t.To] = t.Amount
			continue
		}
		out[t.From] -= t.Amount
		out[t.To] += t.Amount
	}
	return out
}

// Mismatch is the checker's verdict on a failed check.
type Mismatch struct {
	Account   int
	Got, Want string
	Total     int64
	WantTotal int64
	// Unknown is how many transfers of unknown outcome at or below the ts
	// were tried both ways; Want is then from the closest of the 2^Unknown
	// candidate states (the fewest differing accounts).
	Unknown int
}

func (m *Mismatch) Error() string {
	var s string
	if m.Account < 0 {
		s = fmt.Sprintf("bank total is %d, want %d", m.Total, m.WantTotal)
	} else {
		s = fmt.Sprintf("account %d (key %s) is %s, want %s (bank total %d, want %d)", m.Account, Key(m.Account), m.Got, m.Want, m.Total, m.WantTotal)
	}
	if m.Unknown > 0 {
		s += fmt.Sprintf("; closest of the %d states that %d transfers of unknown outcome allow", 1<<m.Unknown, m.Unknown)
	}
	return s
}

// ErrMismatch is wrapped by every failed check.
var ErrMismatch = errors.New("bank state does not match the log")

// Check reads every account at readTS and judges the state (see Judge)
// against txns at ts. It refuses to judge, before reading anything, when
// txns hold too little around ts.
func Check(ctx context.Context, c *Client, cfg Config, txns []Txn, ts, readTS uint64) error {
	if err := refuse(txns, ts); err != nil {
		return err
	}
	kvs, err := c.Scan(ctx, Key(0), Key(cfg.Accounts), readTS)
	if err != nil {
		return fmt.Errorf("read accounts: %w", err)
	}
	got := map[int]string{}
	for _, kv := range kvs {
		if !bytes.HasPrefix(kv.Key, []byte("acct")) {
			continue
		}
		i, err := strconv.Atoi(string(kv.Key[4:]))
		if err != nil {
			return fmt.Errorf("bad account key %q", kv.Key)
		}
		got[i] = string(kv.Value)
	}
	return Judge(cfg, txns, ts, got)
}

// absent is how a missing account shows in a Mismatch.
const absent = "absent"

// Judge is the checker's verdict without the I/O: got holds what a cluster
// holds for each account (its raw value; an account it does not hold is
// missing). It refuses to judge (ErrTooLittleData) unless txns hold at least
// MinTransfers transfers of known outcome committed at or below ts and
// MinTransfers after it, and at most MaxUnknown transfers of unknown outcome
// at or below it. It passes exactly when got is one of the states the log
// allows at ts: every transaction of known outcome at or below ts applied,
// none above it, and each transfer of unknown outcome at or below ts either
// applied or not. Otherwise it returns a *Mismatch wrapping ErrMismatch: the
// first differing account in key order, against the closest allowed state,
// and the bank's totals.
func Judge(cfg Config, txns []Txn, ts uint64, got map[int]string) error {
	if err := refuse(txns, ts); err != nil {
		return err
	}
	var unknown []Txn
	touched := map[int]bool{}
	for _, t := range txns {
		if !t.Unknown || t.CommitTS > ts {
			continue
		}
		if !t.transfer() {
			return fmt.Errorf("check at ts %d: the log holds a load of unknown outcome (account %d)", ts, t.To)
		}
		unknown = append(unknown, t)
		touched[t.From], touched[t.To] = true, true
	}
	base := Expected(txns, ts)
	var total, wantTotal int64
	for _, v := range got {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
	}
	for _, v := range base {
		wantTotal += v
	}
	show := func(i int) string {
		if v, ok := got[i]; ok {
			return v
		}
		return absent
	}
	// The accounts no unknown transfer touches have one allowed value; the
	// others get the outcomes that leave the fewest of them differing.
	var moved []int
	for i := range cfg.Accounts {
		if touched[i] {
			moved = append(moved, i)
		}
	}
	var want map[int]string
	bestDiff := -1
	for choice := range 1 << len(unknown) {
		w := allowed(base, unknown, choice, moved)
		diff := 0
		for _, i := range moved {
			if show(i) != w[i] {
				diff++
			}
		}
		if bestDiff < 0 || diff < bestDiff {
			want, bestDiff = w, diff
		}
		if diff == 0 {
			break
		}
	}
	for i := range cfg.Accounts {
		w, ok := want[i]
		if !ok {
			w = formatBalance(base, i)
		}
		if g := show(i); g != w {
			return fmt.Errorf("check at ts %d: %w: %w", ts, ErrMismatch,
				&Mismatch{Account: i, Got: g, Want: w, Total: total, WantTotal: wantTotal, Unknown: len(unknown)})
		}
	}
	if total != wantTotal {
		return fmt.Errorf("check at ts %d: %w: %w", ts, ErrMismatch, &Mismatch{Account: -1, Total: total, WantTotal: wantTotal, Unknown: len(unknown)})
	}
	return nil
}

// allowed is the state of the accounts in moved once the transfers of
// unknown outcome whose bit is set in choice are applied to base.
func allowed(base map[int]int64, unknown []Txn, choice int, moved []int) map[int]string {
	bal := map[int]int64{}
	present := map[int]bool{}
	for _, i := range moved {
		bal[i], present[i] = base[i]
	}
	for k, t := range unknown {
		if choice&(1<<k) == 0 {
			continue
		}
		bal[t.From] -= t.Amount
		bal[t.To] += t.Amount
		present[t.From], present[t.To] = true, true
	}
	out := make(map[int]string, len(moved))
	for _, i := range moved {
		out[i] = absent
		if present[i] {
			out[i] = strconv.FormatInt(bal[i], 10)
		}
	}
	return out
}

func formatBalance(m map[int]int64, i int) string {
	if v, ok := m[i]; ok {
		return strconv.FormatInt(v, 10)
	}
	return absent
}
