package tikvdouble

import (
	"context"
	"fmt"
	"time"
)

// DefaultGCPollInterval is how often a store asks PD for the GC safe point
// when Config.GCPollInterval is 0: TiKV's GC manager polls every 10 s.
const DefaultGCPollInterval = 10 * time.Second

// gcState is how far a store has collected garbage; guarded by Store.mu.
type gcState struct {
	// applied is the highest safe point a pass ran at (in memory; its
	// record may still be queued).
	applied uint64
	// done is the highest safe point whose pass is on disk; it is what the
	// store reports.
	done uint64
	// advanced is closed and replaced whenever done grows.
	advanced chan struct{}
}

// gcLoop is TiKV's GC manager: it polls PD's GC safe point and collects
// every local replica's MVCC data at it. Like TiKV's compaction-filter GC
// it runs on every replica locally, outside raft, in recovery mode too.
// Unlike it, it collects eagerly and completely: each poll runs a pass over
// the whole store (so data that arrived below the safe point since, from a
// raft snapshot or a late commit, is collected too), where TiKV leaves
// garbage until compaction reaches it. Dropping early is the harsher of the
// two for a reader below the safe point, so the double never keeps history
// that TiKV might drop.
func (s *Store) gcLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	t := time.NewTicker(s.cfg.GCPollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		isolated := s.isolatedLocked()
		s.mu.Unlock()
		if isolated {
			continue
		}
		sp, err := s.gcSafePointFromPD(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("Reading the GC safe point failed", "err", err)
			}
			continue
		}
		if err := s.collect(ctx, sp); err != nil && ctx.Err() == nil {
			s.log.Error("Collecting garbage failed", "safePoint", sp, "err", err)
		}
	}
}

// collect runs one GC pass at safePoint (never below a pass already run:
// PD's safe point does not move backwards, and a restarted store may have
// collected further than a fresh PD says) and returns once the pass is on
// disk.
func (s *Store) collect(ctx context.Context, safePoint uint64) error {
	s.mu.Lock()
	if safePoint == 0 || safePoint < s.gc.applied {
		s.mu.Unlock()
		return nil
	}
	dropped := s.kv.gc(safePoint)
	switch {
	case dropped > 0 || safePoint > s.gc.applied:
		s.gc.applied = safePoint
		s.rd.recs = append(s.rd.recs, record{Kind: "gc", TS: safePoint})
	case s.gc.done >= safePoint:
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if dropped > 0 {
		s.log.Debug("Collected garbage", "safePoint", safePoint, "records", dropped)
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcDoneLocked(safePoint)
	return nil
}

// gcDoneLocked records that everything up to safePoint is collected on disk.
func (s *Store) gcDoneLocked(safePoint uint64) {
	if safePoint <= s.gc.done {
		return
	}
	s.gc.done = safePoint
	if s.gc.advanced != nil {
		close(s.gc.advanced)
	}
	s.gc.advanced = make(chan struct{})
}

// replayGCLocked re-runs a persisted GC pass during replay.
func (s *Store) replayGCLocked(safePoint uint64) {
	s.kv.gc(safePoint)
	s.gc.applied = max(s.gc.applied, safePoint)
	s.gcDoneLocked(safePoint)
}

// GCSafePoint is the safe point up to which this store has collected
// garbage, durably: every replica's MVCC data on the volume is collected
// at it (a restart replays the collection). 0 means never.
func (s *Store) GCSafePoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gc.done
}

// WaitGC returns once GCSafePoint reaches ts, or with ctx's error.
func (s *Store) WaitGC(ctx context.Context, ts uint64) error {
	for {
		s.mu.Lock()
		done := s.gc.done
		if s.gc.advanced == nil {
			s.gc.advanced = make(chan struct{})
		}
		ch := s.gc.advanced
		s.mu.Unlock()
		if done >= ts {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("store %d collected garbage up to %d, waiting for %d: %w", s.cfg.StoreID, done, ts, ctx.Err())
		case <-s.stop:
			return fmt.Errorf("store %d stopped at GC safe point %d, waiting for %d", s.cfg.StoreID, done, ts)
		}
	}
}
