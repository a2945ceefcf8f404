package report

import "time"

// ProgressClock stamps when a step's progress last moved, for the progressAt of its status
// document: the agent fails a long step whose progress has not moved for stallTimeout. The
// step keeps one per phase that reports progress and passes every progress it reports
// through Observe; the clock is an input, so the rule is a table test.
type ProgressClock struct {
	at time.Time
	// done and percent are the highest seen: progress that goes back and returns has not moved.
	done    int64
	percent float64
}

// Observe returns when the progress (done, percent) last moved, seen at now: now on the first
// call (the phase that reports progress began) and whenever done or percent is higher than
// ever before; the earlier time otherwise.
func (c *ProgressClock) Observe(done int64, percent float64, now time.Time) time.Time {
	if c.at.IsZero() || done > c.done || percent > c.percent {
		c.at = now
	}
	c.done, c.percent = max(c.done, done), max(c.percent, percent)
	return c.at
}
