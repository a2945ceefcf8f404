package aws

import (
	"testing"
	"time"
)

func TestPollInterval(t *testing.T) {
	const ceiling = 5 * time.Second
	tests := []struct {
		name    string
		n       int
		elapsed time.Duration
		percent float64
		want    time.Duration
	}{
		{name: "no progress yet: doubling", n: 3, elapsed: 1500 * time.Millisecond, want: 2 * time.Second},
		{name: "progress unknown: doubling", n: 4, elapsed: 3500 * time.Millisecond, percent: -1, want: 4 * time.Second},
		{name: "ceiling", n: 10, elapsed: time.Minute, percent: 10, want: ceiling},
		{name: "70 % after 3.5 s: 1.5 s left, sooner than the doubled 4 s", n: 4, elapsed: 3500 * time.Millisecond, percent: 70, want: 1500 * time.Millisecond},
		{name: "nearly done early: never below the first interval", n: 4, elapsed: 2 * time.Second, percent: 99.9, want: firstPoll},
		{name: "stuck near 100 % in a long wait: a tenth of the time so far", n: 8, elapsed: 30 * time.Second, percent: 99.9, want: 3 * time.Second},
		{name: "long wait: the ceiling as before", n: 20, elapsed: 10 * time.Minute, percent: 99.9, want: ceiling},
		{name: "the estimate never lengthens the doubling", n: 1, elapsed: 100 * time.Millisecond, percent: 1, want: firstPoll},
		{name: "complete: doubling (the caller stops first)", n: 2, elapsed: time.Second, percent: 100, want: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pollInterval(tc.n, ceiling, tc.elapsed, tc.percent); got != tc.want {
				t.Errorf("pollInterval(%d, %v, %v, %v) = %v, want %v", tc.n, ceiling, tc.elapsed, tc.percent, got, tc.want)
			}
		})
	}
}
