package pddouble

import (
	"math"
	"sort"
	"time"
)

// Defaults of the GC worker the double folds into PD (TiDB's own defaults
// are a 10 min life time and a 10 min run interval). The lab's are short so
// that a backup that forgets its GC pin really loses history within a lab
// run, and long enough that no lab workload reads further back than that:
// every transaction and every read in the lab's workloads spans seconds.
const (
	DefaultGCLifeTime    = time.Minute
	DefaultGCRunInterval = 10 * time.Second
)

// updateServiceSafePoint sets (ttl > 0) or deletes (ttl <= 0) a service GC
// safe point and returns the minimum over live service safe points. A safe
// point below the current GC safe point is not stored, as in PD.
func (s *Server) updateServiceSafePoint(id string, ttl int64, sp uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.pruneServiceSafePointsLocked(now)
	if ttl <= 0 {
		delete(s.st.ServiceGC, id)
	} else if sp >= s.st.GCSafePoint {
		e := expiring{SafePoint: sp}
		if ttl < math.MaxInt64/int64(time.Second) {
			e.Expire = now.Add(time.Duration(ttl) * time.Second)
		}
		s.st.ServiceGC[id] = e
	}
	if err := s.persistLocked(); err != nil {
		return 0, err
	}
	return s.minServiceSafePointLocked(), nil
}

func (s *Server) pruneServiceSafePointsLocked(now time.Time) {
	for id, e := range s.st.ServiceGC {
		if !e.live(now) {
			delete(s.st.ServiceGC, id)
		}
	}
}

// minServiceSafePointLocked is the lowest live service safe point, or the GC
// safe point when no service holds one.
func (s *Server) minServiceSafePointLocked() uint64 {
	min := uint64(math.MaxUint64)
	for _, e := range s.st.ServiceGC {
		if e.SafePoint < min {
			min = e.SafePoint
		}
	}
	if min == math.MaxUint64 {
		return s.st.GCSafePoint
	}
	return min
}

// updateGCSafePoint advances the GC safe point towards sp and returns the
// resulting value. It never moves backwards and never passes a live service
// safe point: the double folds TiDB's GC worker into PD, so a service safe
// point really holds GC back (0 only reads).
func (s *Server) updateGCSafePoint(sp uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.advanceGCSafePointLocked(sp)
}

func (s *Server) advanceGCSafePointLocked(sp uint64) (uint64, error) {
	s.pruneServiceSafePointsLocked(s.now())
	if len(s.st.ServiceGC) > 0 {
		if m := s.minServiceSafePointLocked(); sp > m {
			sp = m
		}
	}
	if sp > s.st.GCSafePoint {
		s.st.GCSafePoint = sp
		if err := s.persistLocked(); err != nil {
			return 0, err
		}
	}
	return s.st.GCSafePoint, nil
}

func (s *Server) gcSafePoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.GCSafePoint
}

// serviceSafePoint and serviceSafePoints are PD's /gc/safepoint answer.
type serviceSafePoint struct {
	ServiceID string `json:"service_id"`
	ExpiredAt int64  `json:"expired_at"`
	SafePoint uint64 `json:"safe_point"`
}

type serviceSafePoints struct {
	Services    []serviceSafePoint `json:"service_gc_safe_points"`
	MinService  uint64             `json:"min_service_gc_safe_point,omitempty"`
	GCSafePoint uint64             `json:"gc_safe_point"`
}

// gcSafePoints lists the live service safe points (expiry in Unix seconds,
// MaxInt64 for none) with the GC safe point, as PD's GET /gc/safepoint.
func (s *Server) gcSafePoints() serviceSafePoints {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneServiceSafePointsLocked(s.now())
	out := serviceSafePoints{Services: []serviceSafePoint{}, GCSafePoint: s.st.GCSafePoint}
	for id, e := range s.st.ServiceGC {
		exp := int64(math.MaxInt64)
		if !e.Expire.IsZero() {
			exp = e.Expire.Unix()
		}
		out.Services = append(out.Services, serviceSafePoint{ServiceID: id, ExpiredAt: exp, SafePoint: e.SafePoint})
	}
	sort.Slice(out.Services, func(i, j int) bool { return out.Services[i].ServiceID < out.Services[j].ServiceID })
	if len(out.Services) > 0 {
		out.MinService = s.minServiceSafePointLocked()
	}
	return out
}

// GCStatus is what the GC worker did last.
type GCStatus struct {
	// SafePoint is the GC safe point (what GetGCSafePoint answers).
	SafePoint uint64
	// Target is the last run's "now − life time" (TSO), before service safe
	// points held it back; 0 before the first run.
	Target uint64
	// Runs counts the worker's runs.
	Runs int
}

// GCStatus reports the GC safe point and the GC worker's last run, so a
// test can wait for a run that would have passed a timestamp.
func (s *Server) GCStatus() GCStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return GCStatus{SafePoint: s.st.GCSafePoint, Target: s.gcTarget, Runs: s.gcRuns}
}

// gcLoop is TiDB's GC worker folded into PD: every run interval the GC safe
// point moves to the TSO's physical time minus the life time, held back by
// the lowest live service safe point, never backwards. Like TiDB's worker
// it runs only on a bootstrapped cluster and not while the cluster is
// snapshot-recovering (a restore's TiDB starts only after the restore).
// Locks below the safe point are left alone: TiDB resolves them first, and
// the lab's transactions are far shorter than the life time.
func (s *Server) gcLoop() {
	t := time.NewTicker(s.cfg.GCRunInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			_, _ = s.runGCLocked()
			s.mu.Unlock()
		}
	}
}

// runGCLocked is one run of the GC worker; it returns the GC safe point and
// whether it ran.
func (s *Server) runGCLocked() (uint64, bool) {
	if !s.st.Bootstrapped || s.st.Recovering {
		return s.st.GCSafePoint, false
	}
	physical := max(s.now().UnixMilli(), s.physical) - s.cfg.GCLifeTime.Milliseconds()
	if physical <= 0 {
		return s.st.GCSafePoint, false
	}
	s.gcTarget = composeTS(physical, 0)
	s.gcRuns++
	sp, err := s.advanceGCSafePointLocked(s.gcTarget)
	if err != nil {
		return s.st.GCSafePoint, false
	}
	return sp, true
}
