package demo

import (
	"testing"
	"time"
)

func TestOverhead(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	step := func(from, to float64) Step { return Step{Start: at(from), End: at(to)} }
	for _, tt := range []struct {
		name string
		wall time.Duration
		work []Step
		want time.Duration
		ok   bool
	}{
		{name: "disjoint work is subtracted whole", wall: 10 * time.Second, work: []Step{step(1, 3), step(5, 6)}, want: 7 * time.Second, ok: true},
		{name: "overlapping work counts once", wall: 10 * time.Second, work: []Step{step(4, 6), step(1, 5)}, want: 5 * time.Second, ok: true},
		{name: "work inside other work counts once", wall: 10 * time.Second, work: []Step{step(1, 8), step(2, 3)}, want: 3 * time.Second, ok: true},
		{name: "a missing end is no measurement", wall: 10 * time.Second, work: []Step{step(1, 3), {Start: at(4)}}},
		{name: "a missing start is no measurement", wall: 10 * time.Second, work: []Step{{End: at(4)}}},
		{name: "no wall time", work: []Step{step(1, 3)}},
		{name: "no work", wall: time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := overhead(tt.wall, tt.work)
			if ok != tt.ok || got != tt.want {
				t.Errorf("overhead = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
