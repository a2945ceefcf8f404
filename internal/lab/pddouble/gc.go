package pddouble

import (
	"errors"
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

// GCWorkerService is the service safe point TiDB's GC worker keeps (TiDB's
// gcWorkerServiceSafePointID, PD's GCWorkerServiceSafePointID): the worker
// raises it to its new safe point before it moves the GC safe point, its TTL
// is infinite, and it is never deleted.
const GCWorkerService = "gc_worker"

var (
	errRemoveGCWorker    = errors.New("cannot remove service safe point of gc_worker")
	errGCWorkerFiniteTTL = errors.New("TTL of gc_worker's service safe point must be infinity")
)

// minServiceSafePoint is what UpdateServiceGCSafePoint answers: the lowest
// live service safe point, its service and its expiry (zero: never).
type minServiceSafePoint struct {
	ServiceID string
	SafePoint uint64
	Expire    time.Time
}

// updateServiceSafePoint is PD's UpdateServiceGCSafePoint (server
// GrpcServer.UpdateServiceGCSafePoint and gc SafePointManager
// .UpdateServiceGCSafePoint, release-7.5 and release-8.5). ttl <= 0 deletes
// id's safe point (gc_worker's cannot be deleted). Otherwise sp is stored
// only when it is not below the current minimum, which always includes
// gc_worker's; an infinite TTL (one reaching past MaxInt64 seconds) never
// expires, and gc_worker's must be infinite. The answer is the minimum
// after the call: the stored one's when it is the lowest, else the one that
// kept sp from being stored.
func (s *Server) updateServiceSafePoint(id string, ttl int64, sp uint64) (minServiceSafePoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if ttl <= 0 {
		if id == GCWorkerService {
			return minServiceSafePoint{}, errRemoveGCWorker
		}
		delete(s.st.ServiceGC, id)
	}
	min := s.loadMinServiceSafePointLocked(now)
	if ttl > 0 && sp >= min.SafePoint {
		e := expiring{SafePoint: sp}
		if ttl < math.MaxInt64-now.Unix() {
			e.Expire = expiryAfter(now, ttl)
		}
		if id == GCWorkerService && !e.Expire.IsZero() {
			return minServiceSafePoint{}, errGCWorkerFiniteTTL
		}
		s.st.ServiceGC[id] = e
		if id == min.ServiceID {
			min = s.loadMinServiceSafePointLocked(now)
		}
	}
	if err := s.persistLocked(); err != nil {
		return minServiceSafePoint{}, err
	}
	return min, nil
}

// expiryAfter is now plus ttl seconds, whole seconds past what a Duration holds.
func expiryAfter(now time.Time, ttl int64) time.Time {
	if ttl <= math.MaxInt64/int64(time.Second) {
		return now.Add(time.Duration(ttl) * time.Second)
	}
	return time.Unix(now.Unix()+ttl, 0)
}

// loadMinServiceSafePointLocked is PD's LoadMinServiceGCSafePoint
// (storage/endpoint gc_safe_point.go): it prunes expired service safe
// points and answers the lowest live one. gc_worker's is always there: with
// no live safe point it is set to 0, and when it is missing it is set to
// the lowest live one.
func (s *Server) loadMinServiceSafePointLocked(now time.Time) minServiceSafePoint {
	s.pruneServiceSafePointsLocked(now)
	min := minServiceSafePoint{SafePoint: math.MaxUint64}
	for id, e := range s.st.ServiceGC {
		if e.SafePoint < min.SafePoint || e.SafePoint == min.SafePoint && id < min.ServiceID {
			min = minServiceSafePoint{ServiceID: id, SafePoint: e.SafePoint, Expire: e.Expire}
		}
	}
	if min.SafePoint == math.MaxUint64 {
		min.SafePoint = 0
	}
	if _, ok := s.st.ServiceGC[GCWorkerService]; !ok {
		s.st.ServiceGC[GCWorkerService] = expiring{SafePoint: min.SafePoint}
		if min.ServiceID == "" {
			min.ServiceID = GCWorkerService
		}
	}
	return min
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

// minHoldLocked is the lowest live service safe point other than
// gc_worker's (the worker's own claim, not a hold), and whether there is one.
func (s *Server) minHoldLocked() (uint64, bool) {
	min, ok := uint64(math.MaxUint64), false
	for id, e := range s.st.ServiceGC {
		if id != GCWorkerService && e.SafePoint < min {
			min, ok = e.SafePoint, true
		}
	}
	return min, ok
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
	if m, ok := s.minHoldLocked(); ok && sp > m {
		sp = m
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
	// As TiDB's GC worker (gc_worker.go setGCWorkerServiceSafePoint): raise
	// gc_worker's service safe point to the target first, then move the GC
	// safe point no further than the minimum PD answers.
	target := s.gcTarget
	min := s.loadMinServiceSafePointLocked(s.now())
	if target >= min.SafePoint {
		s.st.ServiceGC[GCWorkerService] = expiring{SafePoint: target}
		min = s.loadMinServiceSafePointLocked(s.now())
	}
	if min.SafePoint < target && min.SafePoint != 0 {
		target = min.SafePoint
	}
	sp, err := s.advanceGCSafePointLocked(target)
	if err != nil {
		return s.st.GCSafePoint, false
	}
	return sp, true
}
