package pause

import (
	"math"
	"reflect"
	"testing"

	"github.com/fedbr/fedbr/internal/tidb"
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

// TestScheduleIdentityRoundTrip: the identity a pause records (settings, JSON-encoded) gives
// back the schedulePause it undoes, value for value.
func TestScheduleIdentityRoundTrip(t *testing.T) {
	plan := planSchedulePause(map[string]any{"leader-schedule-limit": float64(4), "enable-tikv-split-region": true,
		"enable-location-replacement": "true", "max-pending-peer-count": float64(64), "max-snapshot-count": float64(3)},
		[]string{"balance-leader-scheduler"}, 3)
	settings := plan.settings()
	if len(settings) != 5 || settings[0].Key != "schedule.enable-location-replacement" || settings[0].Paused != `"false"` || settings[0].Original != `"true"` {
		t.Fatalf("settings = %+v: want every planned key, in order, JSON-encoded", settings)
	}
	back, err := scheduleOf(tidb.Hold{Schedulers: plan.Schedulers, Config: settings})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Schedulers, plan.Schedulers) || len(back.Original) != len(plan.Original) || len(back.Paused) != len(plan.Paused) {
		t.Fatalf("scheduleOf = %+v, want %+v", back, plan)
	}
	for k, v := range plan.Original {
		if tidb.ConfigText(back.Original[k]) != tidb.ConfigText(v) || tidb.ConfigText(back.Paused[k]) != tidb.ConfigText(plan.Paused[k]) {
			t.Errorf("%s: original %v paused %v, want %v and %v", k, back.Original[k], back.Paused[k], v, plan.Paused[k])
		}
	}
	for _, bad := range []tidb.Setting{{Key: "leader-schedule-limit", Original: "4", Paused: "0"}, {Key: "schedule.x", Original: "4", Paused: "zero"}} {
		if _, err := scheduleOf(tidb.Hold{Config: []tidb.Setting{bad}}); err == nil {
			t.Errorf("scheduleOf(%+v) succeeded", bad)
		}
	}
}
