package pause

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
)

// TestUnsafeSwitchesRemoveOnlyTheirPiece: each negative-control switch removes its own piece of
// the pause and nothing else. NoLease dials no TiKV (no lease, no wait-apply) and still pins GC
// and pauses PD's schedulers; SchedulersRunning records and pauses no scheduler and still pins
// GC and leases every store.
func TestUnsafeSwitchesRemoveOnlyTheirPiece(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unsafe     Unsafe
		wantLeases bool
		wantPaused bool
	}{
		{"no lease", Unsafe{NoLease: true}, false, true},
		{"schedulers running", Unsafe{SchedulersRunning: true}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			e := startEnv(t, ctx)
			var dials atomic.Int32
			d := e.deps(t)
			d.Dial = func(ctx context.Context, addr string) (brpb.BackupClient, func() error, error) {
				dials.Add(1)
				return grpcDial(ctx, addr)
			}
			runCtx, stop := context.WithCancel(ctx)
			log := newStatusLog()
			done := make(chan error, 1)
			go func() { done <- Run(runCtx, d, Config{TTL: 10 * time.Minute, Unsafe: tc.unsafe}, log.report) }()
			ready := log.waitFor(t, ctx, PhaseReady)

			if sp := e.minServiceSafePoint(t, ctx); sp != ready.BackupTS-1 {
				t.Errorf("service safepoint = %d, want backup ts - 1 = %d", sp, ready.BackupTS-1)
			}
			if leased := dials.Load() >= 3; leased != tc.wantLeases {
				t.Errorf("%d stores dialled: leases taken %v, want %v", dials.Load(), leased, tc.wantLeases)
			}
			paused := e.pausedSchedulers(t, ctx)
			if (len(paused) > 0) != tc.wantPaused || (len(ready.Schedulers) > 0) != tc.wantPaused {
				t.Errorf("paused schedulers %v, recorded %v: want paused %v", paused, ready.Schedulers, tc.wantPaused)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run returned %v after a clean stop", err)
			}
		})
	}
}
