package restoredata

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/fedbr/fedbr/internal/recovery"
	"github.com/fedbr/fedbr/internal/tidb"
)

// ErrFlashbackStalled fails a flashback in which no range completed (and no restarted store got
// its plan again) for Config.WaitStoresTimeout: some region stays without a leader that
// answers.
var ErrFlashbackStalled = errors.New("flashback made no progress")

// ErrStoresNotUp fails the data phase when fewer TiKV stores than the backup had (beyond
// Config.MaxMissingStores) registered with PD within Config.WaitStoresTimeout.
var ErrStoresNotUp = errors.New("the backup's TiKV stores did not all come up")

// waitStores waits until PD lists at least Stores − MaxMissingStores TiKV stores, logging the
// count whenever it changes, and returns them. TiKV in recovery mode takes minutes to start
// (it opens its engines and reads every region's state before it registers).
func (r *run) waitStores(ctx context.Context) ([]*metapb.Store, error) {
	need := max(r.cfg.Stores-r.cfg.MaxMissingStores, 1)
	deadline := time.Now().Add(r.cfg.WaitStoresTimeout)
	last := -1
	for {
		stores, err := tidb.TiKVStores(ctx, r.d.PD)
		if err != nil {
			r.d.Log("Listing the TiKV stores failed, trying again: %v", err)
		} else if len(stores) != last {
			last = len(stores)
			r.d.Log("%s TiKV stores up%s", r.ofStores(last), r.tolerated())
		}
		if err == nil && len(stores) >= need {
			return stores, nil
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s up after %s%s", ErrStoresNotUp, r.ofStores(max(last, 0)), r.cfg.WaitStoresTimeout, r.tolerated())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.cfg.Poll):
		}
	}
}

// ofStores is "n of Stores", or n when the backup's count is not known.
func (r *run) ofStores(n int) string {
	if r.cfg.Stores == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d of %d", n, r.cfg.Stores)
}

// tolerated says how many stores may stay down, for the progress lines.
func (r *run) tolerated() string {
	if r.cfg.MaxMissingStores == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d may stay down)", r.cfg.MaxMissingStores)
}

// setStores records the stores as PD lists them now: where each is dialled.
func (r *run) setStores(stores []*metapb.Store) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stores = map[uint64]*metapb.Store{}
	for _, s := range stores {
		r.stores[s.GetId()] = s
	}
}

// store is a store as last listed.
func (r *run) store(id uint64) (*metapb.Store, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.stores[id]
	return s, ok
}

// restarted records a store's new instance: its address as PD lists it now, and no connection
// to its old one.
func (r *run) restarted(s *metapb.Store) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stores[s.GetId()] = s
	if c, ok := r.conns[s.GetId()]; ok {
		_ = c.cc.Close()
		delete(r.conns, s.GetId())
	}
}

// watcher gives a store its plan again when it restarted after its RecoverRegion returned (BR's
// store-reboot watcher): TiKV keeps a planned peer leading only in memory, so a restarted store
// comes back with the regions it was to lead leaderless, and in recovery mode nothing elects
// another leader. A restart shows as a new start timestamp in PD's store list. It runs from the
// moment the plan is sent until the data phase ends, flashback included.
type watcher struct {
	r     *run
	plans map[uint64][]recovery.Command // the stores that lead something

	mu sync.Mutex
	// started is each store's start timestamp when its plan last went through; a store not in
	// it has not finished its first RecoverRegion yet.
	started  map[uint64]int64
	inFlight map[uint64]bool
	// replans counts the plans sent again that went through.
	replans int

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// watch starts a watcher of plan (nil when the negative control turned it off).
func (r *run) watch(ctx context.Context, plan recovery.Result) *watcher {
	if r.cfg.Unsafe.NoReplan {
		return nil
	}
	w := &watcher{r: r, plans: map[uint64][]recovery.Command{}, started: map[uint64]int64{}, inFlight: map[uint64]bool{}}
	for id, cmds := range plan.Commands {
		if plan.Leaders[id] > 0 {
			w.plans[id] = cmds
		}
	}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.run(wctx) }()
	return w
}

// sent records that store s (as listed when the plan was made) leads its planned regions.
func (w *watcher) sent(s *metapb.Store) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started[s.GetId()] = s.GetStartTimestamp()
}

// replanned is how many plans were sent again and went through.
func (w *watcher) replanned() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.replans
}

// close stops the watcher and waits for the plans it is sending.
func (w *watcher) close() {
	if w == nil {
		return
	}
	w.stop()
	w.wg.Wait()
}

func (w *watcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.r.cfg.Poll):
		}
		stores, err := tidb.TiKVStores(ctx, w.r.d.PD)
		if err != nil {
			continue // the next poll tries again
		}
		for _, s := range stores {
			if w.restartedSinceSent(s) {
				w.wg.Add(1)
				go func() { defer w.wg.Done(); w.replan(ctx, s) }()
			}
		}
	}
}

// restartedSinceSent says whether s has a plan that went through on an earlier instance of the
// store, and claims its re-send.
func (w *watcher) restartedSinceSent(s *metapb.Store) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	was, ok := w.started[s.GetId()]
	if !ok || was == s.GetStartTimestamp() || w.inFlight[s.GetId()] || len(w.plans[s.GetId()]) == 0 {
		return false
	}
	w.inFlight[s.GetId()] = true
	return true
}

// replan sends a restarted store its plan again; a failure is tried again on the next poll.
func (w *watcher) replan(ctx context.Context, s *metapb.Store) {
	w.r.d.Log("Store %d restarted (start timestamp %d) after its RecoverRegion: sending its plan again", s.GetId(), s.GetStartTimestamp())
	w.r.restarted(s)
	sctx, cancel := context.WithTimeout(ctx, w.r.cfg.LeaderTimeout)
	defer cancel()
	err := w.r.sendStore(sctx, s, w.plans[s.GetId()])
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inFlight, s.GetId())
	if err != nil {
		if ctx.Err() == nil {
			w.r.d.Log("Sending store %d its plan again failed, trying again: %v", s.GetId(), err)
		}
		return
	}
	w.started[s.GetId()] = s.GetStartTimestamp()
	w.replans++
	w.r.d.Log("Store %d leads its planned regions again", s.GetId())
}

// stall tracks a walk over the key space: it goes on as long as it progresses — some range
// completed, or a restarted store got its plan again — and fails once it went
// Config.WaitStoresTimeout without (a restarted TiKV may take that long to come back).
type stall struct {
	r       *run
	since   time.Time
	replans int
	// rounds counts the rounds since the last progress: the retry backoff's step.
	rounds int
}

func (r *run) newStall() *stall {
	return &stall{r: r, since: time.Now(), replans: r.watcher.replanned()}
}

// round records a round in which done ranges completed.
func (s *stall) round(done int) {
	if n := s.r.watcher.replanned(); done > 0 || n != s.replans {
		s.since, s.replans, s.rounds = time.Now(), n, 1
		return
	}
	s.rounds++
}

// check fails the walk when it went too long without progress.
func (s *stall) check(pending int, lastErr string) error {
	if s.r.watcher.replanned() != s.replans || time.Since(s.since) < s.r.cfg.WaitStoresTimeout {
		return nil
	}
	return fmt.Errorf("%w for %s: %d ranges not done, last: %s", ErrFlashbackStalled, s.r.cfg.WaitStoresTimeout, pending, lastErr)
}
