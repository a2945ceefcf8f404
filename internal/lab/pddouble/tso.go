package pddouble

import (
	"errors"
	"fmt"

	"github.com/pingcap/kvproto/pkg/pdpb"
)

// A TSO is physical milliseconds << physicalShift | logical.
const (
	physicalShift = 18
	maxLogical    = 1 << physicalShift
)

func composeTS(physical, logical int64) uint64 {
	return uint64(physical)<<physicalShift | uint64(logical)
}

// errTSOSmaller is returned by resetTS when asked to move time backwards.
var errTSOSmaller = errors.New("the specified ts is smaller than the current one")

// allocTSO hands out count timestamps and returns the largest one; the
// batch is (logical-count, logical]. Timestamps are strictly increasing,
// also across restarts, because the persisted window is always ahead.
func (s *Server) allocTSO(count uint32) (*pdpb.Timestamp, error) {
	if count == 0 || count >= maxLogical {
		return nil, fmt.Errorf("tso count %d out of range", count)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now().UnixMilli(); now > s.physical {
		s.physical, s.logical = now, 0
	}
	if s.logical+int64(count) >= maxLogical {
		s.physical, s.logical = s.physical+1, 0
	}
	s.logical += int64(count)
	if err := s.extendTSOWindowLocked(); err != nil {
		return nil, err
	}
	return &pdpb.Timestamp{Physical: s.physical, Logical: s.logical}, nil
}

func (s *Server) extendTSOWindowLocked() error {
	if composeTS(s.physical, s.logical) < s.st.MaxTSO {
		return nil
	}
	s.st.MaxTSO = composeTS(s.physical+tsoWindow.Milliseconds(), 0)
	return s.persistLocked()
}

// currentTS is the last timestamp handed out (or the restart floor).
func (s *Server) currentTS() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return composeTS(s.physical, s.logical)
}

// resetTS moves the TSO to ts. A smaller ts is an error unless forceLarger
// is set, in which case the TSO stays at max(current, ts).
func (s *Server) resetTS(ts uint64, forceLarger bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := composeTS(s.physical, s.logical)
	if ts <= cur {
		if forceLarger {
			return nil
		}
		return fmt.Errorf("reset tso to %d (current %d): %w", ts, cur, errTSOSmaller)
	}
	s.physical, s.logical = int64(ts>>physicalShift), int64(ts&(maxLogical-1))
	return s.extendTSOWindowLocked()
}
