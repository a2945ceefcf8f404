package pddouble

import (
	"math"
	"time"
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
