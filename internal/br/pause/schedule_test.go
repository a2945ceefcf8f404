package pause

import (
	"math"
	"reflect"
	"testing"
)

func TestPlanSchedulePause(t *testing.T) {
	tests := []struct {
		name          string
		current       map[string]any
		running       []string
		stores        int
		wantSched     []string
		wantPaused    map[string]any
		wantOriginals map[string]any
	}{
		{
			name: "typical PD: every limit zeroed, balance schedulers paused, others left alone",
			current: map[string]any{
				"merge-schedule-limit": float64(8), "leader-schedule-limit": float64(4), "region-schedule-limit": float64(2048),
				"hot-region-schedule-limit": float64(4), "replica-schedule-limit": float64(64), "enable-tikv-split-region": true,
				"enable-location-replacement": "true", "max-pending-peer-count": float64(64), "max-snapshot-count": float64(64),
				"patrol-region-interval": "10ms",
			},
			running:   []string{"balance-region-scheduler", "balance-leader-scheduler", "evict-leader-scheduler-1", "balance-hot-region-scheduler"},
			stores:    3,
			wantSched: []string{"balance-hot-region-scheduler", "balance-leader-scheduler", "balance-region-scheduler"},
			wantPaused: map[string]any{
				"schedule.merge-schedule-limit": 0, "schedule.leader-schedule-limit": 0, "schedule.region-schedule-limit": 0,
				"schedule.hot-region-schedule-limit": 0, "schedule.replica-schedule-limit": 0, "schedule.enable-tikv-split-region": false,
				"schedule.enable-location-replacement": "false", "schedule.max-pending-peer-count": math.MaxInt32,
				"schedule.max-snapshot-count": float64(40),
			},
			wantOriginals: map[string]any{
				"schedule.merge-schedule-limit": float64(8), "schedule.leader-schedule-limit": float64(4), "schedule.region-schedule-limit": float64(2048),
				"schedule.hot-region-schedule-limit": float64(4), "schedule.replica-schedule-limit": float64(64), "schedule.enable-tikv-split-region": true,
				"schedule.enable-location-replacement": "true", "schedule.max-pending-peer-count": float64(64), "schedule.max-snapshot-count": float64(64),
			},
		},
		{
			name:          "keys PD does not report are not sent",
			current:       map[string]any{"leader-schedule-limit": float64(4)},
			running:       nil,
			stores:        3,
			wantPaused:    map[string]any{"schedule.leader-schedule-limit": 0},
			wantOriginals: map[string]any{"schedule.leader-schedule-limit": float64(4)},
		},
		{
			name:          "small snapshot count scales with stores",
			current:       map[string]any{"max-snapshot-count": float64(3)},
			stores:        5,
			wantPaused:    map[string]any{"schedule.max-snapshot-count": float64(15)},
			wantOriginals: map[string]any{"schedule.max-snapshot-count": float64(3)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planSchedulePause(tc.current, tc.running, tc.stores)
			if !reflect.DeepEqual(got.Schedulers, tc.wantSched) {
				t.Errorf("Schedulers = %v, want %v", got.Schedulers, tc.wantSched)
			}
			if !reflect.DeepEqual(got.Paused, tc.wantPaused) {
				t.Errorf("Paused = %v, want %v", got.Paused, tc.wantPaused)
			}
			if !reflect.DeepEqual(got.Original, tc.wantOriginals) {
				t.Errorf("Original = %v, want %v", got.Original, tc.wantOriginals)
			}
		})
	}
}
