// Package bank is the lab's consistency workload: accounts spread over many
// regions, random transfers in multi-region transactions, a log of every
// committed transfer with its commit ts, and a checker that decides whether
// a (restored) cluster holds exactly the state as of a timestamp.
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

// Txn is one committed transaction of the log; the load is Txn{From: -1}.
type Txn struct {
	StartTS  uint64 `json:"start_ts"`
	CommitTS uint64 `json:"commit_ts"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	Amount   int64  `json:"amount"`
}

// Log is the committed-transaction log, safe for concurrent writers.
type Log struct {
	mu   sync.Mutex
	txns []Txn
}

// Add records a committed transaction.
func (l *Log) Add(t Txn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txns = append(l.txns, t)
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

// Stats summarises a run.
type Stats struct {
	Committed, Conflicts, Failed int
	Elapsed                      time.Duration
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

func transfer(ctx context.Context, c *Client, cfg Config, log *Log, rng *rand.Rand) error {
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
	if err != nil {
		return err
	}
	log.Add(Txn{StartTS: start, CommitTS: commit, From: from, To: to, Amount: amount})
	return nil
}

func readBalance(ctx context.Context, c *Client, i int, ts uint64) (int64, error) {
	v, err := c.Get(ctx, Key(i), ts)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, fmt.Errorf("account %d missing", i)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// Expected returns every account's balance after all transactions of txns
// committed at or below ts; accounts never loaded are absent.
func Expected(txns []Txn, ts uint64) map[int]int64 {
	out := map[int]int64{}
	for _, t := range txns {
		if t.CommitTS > ts {
			continue
		}
		if t.From < 0 {
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
}

func (m *Mismatch) Error() string {
	if m.Account < 0 {
		return fmt.Sprintf("bank total is %d, want %d", m.Total, m.WantTotal)
	}
	return fmt.Sprintf("account %d (key %s) is %s, want %s (bank total %d, want %d)", m.Account, Key(m.Account), m.Got, m.Want, m.Total, m.WantTotal)
}

// ErrMismatch is wrapped by every failed check.
var ErrMismatch = errors.New("bank state does not match the log")

// Check reads every account at readTS and verifies that (a) the total is
// unchanged and (b) each account equals Expected(txns, ts). It reports the
// first differing account in key order.
func Check(ctx context.Context, c *Client, cfg Config, txns []Txn, ts, readTS uint64) error {
	kvs, err := c.Scan(ctx, Key(0), Key(cfg.Accounts), readTS)
	if err != nil {
		return fmt.Errorf("read accounts: %w", err)
	}
	got := map[int]string{}
	var total int64
	for _, kv := range kvs {
		if !bytes.HasPrefix(kv.Key, []byte("acct")) {
			continue
		}
		i, err := strconv.Atoi(string(kv.Key[4:]))
		if err != nil {
			return fmt.Errorf("bad account key %q", kv.Key)
		}
		got[i] = string(kv.Value)
		v, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		total += v
	}
	want := Expected(txns, ts)
	var wantTotal int64
	for _, v := range want {
		wantTotal += v
	}
	for i := range cfg.Accounts {
		w, ok := want[i]
		ws := "absent"
		if ok {
			ws = strconv.FormatInt(w, 10)
		}
		g, gok := got[i]
		if !gok {
			g = "absent"
		}
		if g != ws {
			return fmt.Errorf("check at ts %d: %w: %w", ts, ErrMismatch, &Mismatch{Account: i, Got: g, Want: ws, Total: total, WantTotal: wantTotal})
		}
	}
	if total != wantTotal {
		return fmt.Errorf("check at ts %d: %w: %w", ts, ErrMismatch, &Mismatch{Account: -1, Total: total, WantTotal: wantTotal})
	}
	return nil
}
