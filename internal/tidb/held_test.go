package tidb

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestReadHeldOf reads one pause's hold out of PD's answers: only its own safepoint (and only
// while it has not expired) and its own schedulers. Its config items are not read from PD's
// GET /config/schedule, which shows persisted values only (a zero there is no pause's): they
// are HeldSettings' against the values in force.
func TestReadHeldOf(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	pd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pd/api/v1/gc/safepoint":
			_, _ = w.Write([]byte(`{"service_gc_safe_points":[{"service_id":"ticdc","expired_at":9223372036854775807,"safe_point":1},
				{"service_id":"fedbr-live","expired_at":1800000060,"safe_point":2},{"service_id":"fedbr-expired","expired_at":1799999999,"safe_point":3}],
				"gc_safe_point":1}`))
		case "/pd/api/v1/schedulers":
			if r.URL.Query().Get("status") != "paused" {
				http.Error(w, "want status=paused", http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`["balance-leader-scheduler","evict-leader-scheduler-1"]`))
		case "/pd/api/v1/config/schedule":
			_, _ = w.Write([]byte(`{"leader-schedule-limit":0,"region-schedule-limit":2048,"merge-schedule-limit":0,
				"enable-location-replacement":false,"enable-tikv-split-region":true}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer pd.Close()
	settings := []Setting{
		{Key: "schedule.leader-schedule-limit", Original: "4", Paused: "0"},                  // held
		{Key: "schedule.region-schedule-limit", Original: "2048", Paused: "0"},               // restored
		{Key: "schedule.merge-schedule-limit", Original: "0", Paused: "0"},                   // never changed
		{Key: "schedule.enable-location-replacement", Original: `"true"`, Paused: `"false"`}, // held, as a bool
		{Key: "schedule.max-snapshot-count", Original: "3", Paused: "9"},                     // PD lacks it
	}
	tests := []struct {
		name string
		hold Hold
		want Held
	}{
		{"nothing named, nothing read", Hold{}, Held{}},
		{"a live safepoint", Hold{ServiceSafePoint: "fedbr-live"}, Held{GC: true}},
		{"an expired safepoint holds nothing", Hold{ServiceSafePoint: "fedbr-expired"}, Held{}},
		{"another service's safepoint is not ours", Hold{ServiceSafePoint: "fedbr-gone"}, Held{}},
		{"only our schedulers", Hold{Schedulers: []string{"balance-leader-scheduler", "balance-region-scheduler"}},
			Held{Schedulers: []string{"balance-leader-scheduler"}}},
		{"config is not read from PD's persisted config", Hold{Config: settings}, Held{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plaintext.ReadHeldOf(context.Background(), pd.URL+"/", tc.hold, now)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || got.Any() != tc.want.Any() {
				t.Errorf("ReadHeldOf = %+v, want %+v", got, tc.want)
			}
		})
	}
	effective := map[string]any{"leader-schedule-limit": 0.0, "region-schedule-limit": 2048.0, "merge-schedule-limit": 0.0,
		"enable-location-replacement": false, "enable-tikv-split-region": true}
	if got, want := HeldSettings(Hold{Config: settings}, effective), []string{"schedule.leader-schedule-limit", "schedule.enable-location-replacement"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeldSettings = %v, want %v (still at the paused value, whatever type the value is in)", got, want)
	}
	if h := (Held{GC: true, Settings: []string{"schedule.x"}}); h.String() != "the GC service safepoint; schedule config schedule.x" {
		t.Errorf("String = %q", h.String())
	}
	if _, err := Plaintext.ReadHeldOf(context.Background(), pd.URL+"/nope", Hold{ServiceSafePoint: "x"}, now); err == nil {
		t.Error("a PD error was swallowed")
	}
}

// TestCheckPauseHolds: only a live fedbr safepoint at backup ts − 1 (where a pause pins GC)
// counts as the pause holding; anything else is ErrPauseGone, naming what PD lists.
func TestCheckPauseHolds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	pd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pd/api/v1/gc/safepoint" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"service_gc_safe_points":[{"service_id":"gc_worker","expired_at":9223372036854775807,"safe_point":99},
			{"service_id":"br-upstream","expired_at":1800000060,"safe_point":199},
			{"service_id":"fedbr-live","expired_at":1800000060,"safe_point":299},
			{"service_id":"fedbr-expired","expired_at":1799999999,"safe_point":399}],"gc_safe_point":99}`))
	}))
	defer pd.Close()
	for _, tc := range []struct {
		name     string
		backupTS uint64
		gone     bool
		names    string
	}{
		{"a live fedbr pause at ts − 1", 300, false, ""},
		{"another service at ts − 1 is no fedbr pause", 200, true, "fedbr-live at 299"},
		{"an expired fedbr pause", 400, true, "fedbr-expired at 399"},
		{"a fedbr pause at another ts", 500, true, "fedbr-live at 299"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Plaintext.CheckPauseHolds(context.Background(), pd.URL, tc.backupTS, now)
			if !tc.gone {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrPauseGone) || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("err = %v, want ErrPauseGone naming %q", err, tc.names)
			}
		})
	}
	if err := Plaintext.CheckPauseHolds(context.Background(), "http://127.0.0.1:1", 300, now); err == nil || errors.Is(err, ErrPauseGone) {
		t.Errorf("PD unreachable: %v, want a read error, not ErrPauseGone", err)
	}
}
