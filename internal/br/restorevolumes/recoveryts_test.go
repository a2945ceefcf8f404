package restorevolumes_test

import (
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
)

// tso is t as a TSO with logical part 0.
func tso(t time.Time) uint64 { return uint64(t.UnixMilli()) << 18 }

// TestRecoveryTS: PD's TSO goes above every commit a snapshot's image can hold (its start
// plus restorevolumes.CaptureSkew), and never below the resolved ts.
func TestRecoveryTS(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	resolved := tso(t0.Add(-time.Minute))
	for _, tc := range []struct {
		name     string
		resolved uint64
		starts   []time.Time
		want     uint64
	}{
		{"no snapshot", resolved, nil, resolved},
		{"one snapshot", resolved, []time.Time{t0}, tso(t0.Add(restorevolumes.CaptureSkew))},
		{"the latest start wins", resolved, []time.Time{t0.Add(time.Second), t0, t0.Add(3 * time.Second)}, tso(t0.Add(3*time.Second + restorevolumes.CaptureSkew))},
		{"a start unknown bounds nothing", resolved, []time.Time{{}, t0}, tso(t0.Add(restorevolumes.CaptureSkew))},
		{"a resolved ts past the snapshots wins", tso(t0.Add(time.Hour)), []time.Time{t0}, tso(t0.Add(time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var snaps []cloud.Snapshot
			for _, s := range tc.starts {
				snaps = append(snaps, cloud.Snapshot{Started: s})
			}
			if got := restorevolumes.RecoveryTS(tc.resolved, snaps); got != tc.want {
				t.Fatalf("RecoveryTS = %d, want %d", got, tc.want)
			}
		})
	}
}
