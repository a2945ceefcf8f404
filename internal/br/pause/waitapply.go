package pause

import (
	"bytes"
	"fmt"
	"slices"
)

// keyRange is [Start, End); an empty End is +inf.
type keyRange struct {
	Start, End []byte
}

// regionRef is what the wait-apply needs of a region: identity, epoch, range and leader.
type regionRef struct {
	ID          uint64
	ConfVer     uint64
	Version     uint64
	Start, End  []byte
	LeaderStore uint64
}

type epoch struct{ confVer, version uint64 }

// waitApply is the wait-apply bookkeeping of PrepareSnapshotBackup, with no I/O: the driver
// loads regions for the ranges it is told to, sends them to their leaders, and feeds back each
// WaitApplyDone. The whole key space is prepared when every region that covers it has reported
// success with the epoch it was sent with.
//
// A region that moved meanwhile (epoch changed, leader moved, split, merged) reports an error or
// answers with another epoch; its range is loaded again from PD and re-sent, at most maxRounds
// times in all.
type waitApply struct {
	maxRounds int
	rounds    int
	inflight  map[uint64]epoch
	failed    []keyRange
	done      []keyRange
}

func newWaitApply(maxRounds int) *waitApply {
	return &waitApply{maxRounds: maxRounds, inflight: map[uint64]epoch{}}
}

// Start returns the ranges to load first: the whole key space.
func (w *waitApply) Start() ([]keyRange, error) {
	return w.nextRound([]keyRange{{}})
}

// nextRound counts one more round of loading ranges.
func (w *waitApply) nextRound(ranges []keyRange) ([]keyRange, error) {
	w.rounds++
	if w.rounds > w.maxRounds {
		return nil, fmt.Errorf("wait-apply did not cover %s after %d rounds", describeRanges(ranges), w.maxRounds)
	}
	return ranges, nil
}

// Send records regions as in flight and groups them by leader store, one request per store.
func (w *waitApply) Send(regions []regionRef) map[uint64][]regionRef {
	byStore := map[uint64][]regionRef{}
	for _, r := range regions {
		w.inflight[r.ID] = epoch{r.ConfVer, r.Version}
		byStore[r.LeaderStore] = append(byStore[r.LeaderStore], r)
	}
	return byStore
}

// Done records one WaitApplyDone. It returns false for a stale event: a region not in flight,
// or one that answers with another epoch than it was sent with.
func (w *waitApply) Done(r regionRef, failed bool) bool {
	e, ok := w.inflight[r.ID]
	if !ok || e != (epoch{r.ConfVer, r.Version}) {
		return false
	}
	delete(w.inflight, r.ID)
	rg := keyRange{Start: r.Start, End: r.End}
	if failed {
		w.failed = append(w.failed, rg)
	} else {
		w.done = append(w.done, rg)
	}
	return true
}

// Later records a range that could not be sent now (its region has no leader yet); it is
// retried after the backoff.
func (w *waitApply) Later(r keyRange) { w.failed = append(w.failed, r) }

// Idle says nothing is in flight: time to call Next.
func (w *waitApply) Idle() bool { return len(w.inflight) == 0 }

// HasFailures says the last round had failed regions; the driver waits a backoff before Next
// so that a moving region settles.
func (w *waitApply) HasFailures() bool { return len(w.failed) > 0 }

// Next returns the ranges to load again: failed regions and any hole in what is done. Empty
// means the whole key space is prepared.
func (w *waitApply) Next() ([]keyRange, error) {
	retry := append(w.failed, w.holes()...)
	w.failed = nil
	if len(retry) == 0 {
		return nil, nil
	}
	return w.nextRound(mergeRanges(retry))
}

// holes lists the parts of ["", +inf) no done range covers.
func (w *waitApply) holes() []keyRange {
	done := slices.Clone(w.done)
	slices.SortFunc(done, func(a, b keyRange) int { return bytes.Compare(a.Start, b.Start) })
	var holes []keyRange
	covered := []byte{} // everything below covered is done
	for _, r := range done {
		if bytes.Compare(r.Start, covered) > 0 {
			holes = append(holes, keyRange{Start: covered, End: r.Start})
		}
		if len(r.End) == 0 {
			return holes
		}
		if bytes.Compare(r.End, covered) > 0 {
			covered = r.End
		}
	}
	return append(holes, keyRange{Start: covered})
}

// mergeRanges sorts ranges and joins overlapping or touching ones.
func mergeRanges(rs []keyRange) []keyRange {
	slices.SortFunc(rs, func(a, b keyRange) int { return bytes.Compare(a.Start, b.Start) })
	var out []keyRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if len(last.End) == 0 {
				continue
			}
			if bytes.Compare(r.Start, last.End) <= 0 {
				if len(r.End) == 0 || bytes.Compare(r.End, last.End) > 0 {
					last.End = r.End
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func describeRanges(rs []keyRange) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		end := "+inf"
		if len(r.End) != 0 {
			end = fmt.Sprintf("%x", r.End)
		}
		fmt.Fprintf(&b, "[%x, %s)", r.Start, end)
	}
	return b.String()
}
