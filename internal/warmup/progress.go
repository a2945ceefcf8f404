package warmup

import (
	"fmt"
	"sync"
	"time"
)

// startProgress logs a line per unfinished target every d, and gives onProgress (if set) the
// totals, until stop is called.
func startProgress(targets []*target, d time.Duration, log *logger, onProgress func(done, total int64)) (stop func()) {
	return tick(d, func(now time.Time) {
		var done, total int64
		for _, tg := range targets {
			if line := tg.progress(now); line != "" {
				log.logf("%s", line)
			}
			done, total = done+tg.bytes.Load(), total+tg.total.Load()
		}
		if onProgress != nil {
			onProgress(done, total)
		}
	})
}

// tick calls f every d until the returned stop is called; stop returns once f is not running.
func tick(d time.Duration, f func(now time.Time)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				f(now)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// progress is the target's progress line at now, or "" when it has none.
func (t *target) progress(now time.Time) string {
	switch t.phase.Load() {
	case phaseListing:
		return fmt.Sprintf("Listing the files of %s: %d found", t.path, t.listed.Load())
	case phaseReading:
		return progressLine(t.mode, t.path, t.bytes.Load(), t.total.Load(), now.Sub(time.Unix(0, t.readStart.Load())))
	}
	return ""
}

// progressLine reads "Warming up fs /var/lib/tikv: 1.2 GiB of 10.0 GiB (12.0%), 150.3 MiB/s,
// ETA 58s", the ETA assuming the rate so far.
func progressLine(mode Mode, path string, done, total int64, elapsed time.Duration) string {
	pct := 100.0
	if total > 0 {
		pct = float64(done) * 100 / float64(total)
	}
	eta := "unknown"
	if done > 0 && elapsed > 0 {
		left := float64(max(total-done, 0)) / float64(done) * float64(elapsed)
		eta = time.Duration(left).Round(time.Second).String()
	}
	return fmt.Sprintf("Warming up %s %s: %s of %s (%.1f%%), %.1f MiB/s, ETA %s",
		mode, path, formatBytes(done), formatBytes(total), pct, mibPerSecond(done, elapsed), eta)
}

// formatBytes writes n in binary units, the units of volume sizes.
func formatBytes(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
