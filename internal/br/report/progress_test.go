package report_test

import (
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/report"
)

// TestProgressClock: progressAt is the phase's first report, then moves only when done or
// percent grows; a report that repeats the progress, or goes back (a snapshot's percent read
// from a lagging describe, a warm-up's total found larger), keeps it.
func TestProgressClock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	type obs struct {
		min     int
		done    int64
		percent float64
		want    int // minute progressAt says
	}
	for _, tc := range []struct {
		name string
		seq  []obs
	}{
		{"the first report starts the clock, even at zero", []obs{{0, 0, 0, 0}}},
		{"the same progress does not move it", []obs{{0, 0, 10, 0}, {5, 0, 10, 0}, {90, 0, 10, 0}}},
		{"a percent that grew moves it", []obs{{0, 0, 10, 0}, {5, 0, 10, 0}, {7, 0, 10.5, 7}, {60, 0, 10.5, 7}}},
		{"done that grew moves it", []obs{{0, 1, 50, 0}, {3, 2, 50, 3}}},
		{"progress that went back does not, nor its return", []obs{{0, 2, 50, 0}, {4, 1, 40, 0}, {8, 2, 50, 0}, {9, 2, 51, 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c report.ProgressClock
			for i, o := range tc.seq {
				if got := c.Observe(o.done, o.percent, at(o.min)); !got.Equal(at(o.want)) {
					t.Errorf("report %d (minute %d: done %d, %.1f%%): progressAt at minute %.0f, want %d", i, o.min, o.done, o.percent,
						got.Sub(t0).Minutes(), o.want)
				}
			}
		})
	}
}

// TestStepEntryCarriesProgressAt: a step's progressAt reaches its entry in status.steps with
// the progress it belongs to (one report, one write).
func TestStepEntryCarriesProgressAt(t *testing.T) {
	e, err := report.StepEntry("snapshot", `{"phase":"Waiting","done":1,"total":4,"percent":37.5,"progressAt":"2026-12-06T10:07:00.000001Z"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 6, 10, 7, 0, 1000, time.UTC)
	if e.ProgressAt == nil || !e.ProgressAt.Time.Equal(want) || e.Done != 1 || e.Percent != 37.5 {
		t.Errorf("entry progressAt %v (done %d, %.1f%%), want %s with done 1, 37.5%%", e.ProgressAt, e.Done, e.Percent, want)
	}
}

// TestStepEntryCarriesSettled: a failed snapshot step's word that none of its snapshots can
// appear later reaches its entry (the agent's clean then waits for none).
func TestStepEntryCarriesSettled(t *testing.T) {
	for doc, want := range map[string]bool{`{"phase":"Failed","error":"e","settled":true}`: true, `{"phase":"Failed","error":"e"}`: false} {
		e, err := report.StepEntry("snapshot", doc, "")
		if err != nil || e.Settled != want {
			t.Errorf("%s: settled %v (%v), want %v", doc, e.Settled, err, want)
		}
	}
}
