// Package backoff is the one waiting rule fedbr's retries and polls share: start short,
// double, stop at a ceiling. A short first wait catches what settles in a moment (a region's
// new leader reaching PD, a volume becoming available); the ceiling bounds what a long wait
// costs in calls.
package backoff

import "time"

// Doubling is the n-th wait (n from 1): first, doubled n-1 times, at most ceiling.
func Doubling(first, ceiling time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}
