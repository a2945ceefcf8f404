package pddouble

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestServiceSafePointsAsPD: PD's UpdateServiceGCSafePoint. gc_worker's service safe point is
// always there (at 0 on a fresh PD); nothing is stored below the minimum, which includes it; the
// answer is the minimum after the call, with its service and remaining TTL; gc_worker's TTL must
// be infinite and it cannot be deleted; the GC worker raises gc_worker before it moves the GC
// safe point.
func TestServiceSafePointsAsPD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := newFakeClock()
	const life = 10 * time.Second
	s := startPD(t, Config{Now: clock.Now, GCLifeTime: life, GCRunInterval: time.Hour})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())
	h := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	update := func(id string, ttl int64, sp uint64) (*pdpb.UpdateServiceGCSafePointResponse, error) {
		return raw.UpdateServiceGCSafePoint(ctx, &pdpb.UpdateServiceGCSafePointRequest{Header: h, ServiceId: []byte(id), TTL: ttl, SafePoint: sp})
	}
	listed := func(id string) (uint64, bool) {
		for _, e := range s.gcSafePoints().Services {
			if e.ServiceID == id {
				return e.SafePoint, true
			}
		}
		return 0, false
	}

	// A fresh PD: gc_worker is created at 0 and is the minimum.
	r, err := update("br", 60, 500)
	if err != nil || r.GetMinSafePoint() != 0 || string(r.GetServiceId()) != GCWorkerService {
		t.Fatalf("first pin = %v, %v; want the minimum gc_worker at 0", r, err)
	}
	// TiDB's GC worker's first step: the answer is the next minimum, br's.
	r, err = update(GCWorkerService, math.MaxInt64, 1000)
	if err != nil || r.GetMinSafePoint() != 500 || string(r.GetServiceId()) != "br" || r.GetTTL() != 60 {
		t.Fatalf("gc_worker raised = %v, %v; want br's 500 with 60 s left", r, err)
	}
	// Below the minimum: not stored, the minimum answered.
	if r, err = update("late", 60, 400); err != nil || r.GetMinSafePoint() != 500 {
		t.Fatalf("pin below the minimum = %v, %v; want 500", r, err)
	}
	if _, ok := listed("late"); ok {
		t.Fatal("a pin below the minimum was stored")
	}
	// br deleted: gc_worker's 1000 is the minimum; a pin at 999 is not stored.
	if r, err = update("br", 0, 0); err != nil || r.GetMinSafePoint() != 1000 {
		t.Fatalf("delete br = %v, %v; want gc_worker's 1000", r, err)
	}
	if r, err = update("fedbr-x", 60, 999); err != nil || r.GetMinSafePoint() != 1000 || r.GetTTL() != math.MaxInt64-clock.Now().Unix() {
		t.Fatalf("pin below gc_worker = %v, %v; want gc_worker's 1000, TTL infinite", r, err)
	}
	if _, ok := listed("fedbr-x"); ok {
		t.Fatal("a pin below gc_worker was stored")
	}
	// At or above the minimum: stored.
	if r, err = update("fedbr-x", 60, 1000); err != nil || r.GetMinSafePoint() != 1000 {
		t.Fatalf("pin at the minimum = %v, %v", r, err)
	}
	if sp, ok := listed("fedbr-x"); !ok || sp != 1000 {
		t.Fatalf("pin at the minimum not stored: %d, %v", sp, ok)
	}
	for _, tc := range []struct {
		ttl  int64
		want string
	}{{60, "TTL of gc_worker's service safe point must be infinity"}, {0, "cannot remove service safe point of gc_worker"}} {
		if _, err := update(GCWorkerService, tc.ttl, 2000); status.Code(err) != codes.Unknown || status.Convert(err).Message() != tc.want {
			t.Errorf("gc_worker with TTL %d: %v, want %q", tc.ttl, err, tc.want)
		}
	}

	// The GC worker raises gc_worker to its target before it moves the GC safe point, which
	// the pin at 1000 holds back.
	target := composeTS(clock.Now().Add(-life).UnixMilli(), 0)
	if sp := runGC(s); sp != 1000 {
		t.Fatalf("GC safe point = %d, want it held at the pin 1000", sp)
	}
	if sp, _ := listed(GCWorkerService); sp != target {
		t.Fatalf("gc_worker = %d after a run, want the target %d", sp, target)
	}
}

// post sends body to the double's POST /config?ttlSecond=ttl and returns the status and the
// decoded JSON answer.
func post(t *testing.T, s *Server, ttl string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	url := s.URL() + apiPrefix + "/config"
	if ttl != "" {
		url += "?ttlSecond=" + ttl
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var msg string
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("answer %q is not a JSON string: %v", raw, err)
	}
	return resp.StatusCode, msg
}

// TestTTLConfigAsPD: PD's POST /config?ttlSecond=: an integer TTL only, only the keys PD takes
// with a TTL (the schedule. prefix included), every refusal 400 with the error as a JSON string
// and nothing set; v8.5's and v7.5's answers; a persisted write refused while a TTL is live.
func TestTTLConfigAsPD(t *testing.T) {
	for _, api := range []string{APIv85, APIv75} {
		t.Run(api, func(t *testing.T) {
			s := startPD(t, Config{API: api, GCLifeTime: -1})
			defer func() { _ = s.Close() }()
			for _, tc := range []struct {
				name, ttl string
				body      map[string]any
				code      int
				msg       string
			}{
				{"a fractional TTL", "1.5", map[string]any{"schedule.leader-schedule-limit": 0}, 400, `strconv.Atoi: parsing "1.5": invalid syntax`},
				{"a key without schedule.", "60", map[string]any{"leader-schedule-limit": 0}, 400, "unsupported ttl config leader-schedule-limit"},
				{"a key PD takes no TTL for", "60", map[string]any{"schedule.leader-schedule-limit": 0, "schedule.max-store-down-time": "1h"}, 400,
					"unsupported ttl config schedule.max-store-down-time"},
			} {
				if code, msg := post(t, s, tc.ttl, tc.body); code != tc.code || msg != tc.msg {
					t.Errorf("%s: %d %q, want %d %q", tc.name, code, msg, tc.code, tc.msg)
				}
			}
			if v := s.EffectiveScheduleConfig()["leader-schedule-limit"]; v != 4.0 {
				t.Fatalf("a refused write set leader-schedule-limit to %v", v)
			}
			updated, deleted := "The ttl config is updated.", "The ttl config is deleted."
			if api == APIv75 {
				updated, deleted = "The config is updated.", "The config is updated."
			}
			if code, msg := post(t, s, "60", map[string]any{"schedule.leader-schedule-limit": 0}); code != 200 || msg != updated {
				t.Fatalf("TTL write: %d %q, want 200 %q", code, msg, updated)
			}
			if v := s.EffectiveScheduleConfig()["leader-schedule-limit"]; v != 0.0 {
				t.Fatalf("leader-schedule-limit in force = %v, want 0", v)
			}
			if v := s.scheduleConfig()["leader-schedule-limit"]; v != 4.0 {
				t.Fatalf("GET /config/schedule shows %v, want the persisted 4", v)
			}
			if code, msg := post(t, s, "", map[string]any{"schedule.leader-schedule-limit": 8}); code != 400 ||
				msg != "need to clean up TTL first for schedule.leader-schedule-limit" {
				t.Fatalf("persisted write under a live TTL: %d %q", code, msg)
			}
			if code, msg := post(t, s, "0", map[string]any{"schedule.leader-schedule-limit": 0}); code != 200 || msg != deleted {
				t.Fatalf("TTL 0: %d %q, want 200 %q", code, msg, deleted)
			}
			if v := s.EffectiveScheduleConfig()["leader-schedule-limit"]; v != 4.0 {
				t.Fatalf("leader-schedule-limit in force after TTL 0 = %v, want 4", v)
			}
		})
	}
}

// TestMinResolvedTSRealTimeAsPD: is_real_time is persist interval != 0 and absent when false.
func TestMinResolvedTSRealTimeAsPD(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     map[string]any
	}{
		{0, map[string]any{"min_resolved_ts": 0.0, "is_real_time": true, "persist_interval": "1s"}},
		{-1, map[string]any{"min_resolved_ts": 0.0, "persist_interval": "0s"}},
	} {
		s := startPD(t, Config{GCLifeTime: -1, MinResolvedTSPersistenceInterval: tc.interval})
		resp, err := http.Get(s.URL() + apiPrefix + "/min-resolved-ts")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		_ = resp.Body.Close()
		_ = s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if b1, b2 := mustJSON(got), mustJSON(tc.want); !bytes.Equal(b1, b2) {
			t.Errorf("interval %v: %s, want %s", tc.interval, b1, b2)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
