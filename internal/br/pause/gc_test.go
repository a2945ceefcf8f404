package pause

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// raiseGCWorker plays TiDB's GC worker's first step (gc_worker.go setGCWorkerServiceSafePoint):
// it raises the gc_worker service safepoint, TTL infinite, to sp. The worker does that before
// it resolves locks and moves the GC safe point, so the GC safe point itself is still below.
func (e *env) raiseGCWorker(t *testing.T, ctx context.Context, sp uint64) {
	t.Helper()
	if _, err := e.pd.UpdateServiceGCSafePoint(ctx, "gc_worker", math.MaxInt64, sp); err != nil {
		t.Fatal(err)
	}
}

// TestPauseFailsWhenPDRefusesThePin: TiDB's GC worker raised its service safepoint past the
// backup ts before the pause pinned GC (the GC safe point is still below it). PD stores no
// service safepoint below its minimum, so the pin is not stored and PD answers that minimum:
// the pause fails with ErrPinRefused and never reports Ready.
func TestPauseFailsWhenPDRefusesThePin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	backupTS := e.tso(t, ctx)
	e.raiseGCWorker(t, ctx, backupTS+1<<18) // a millisecond past it

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, e.deps(t), Config{TTL: time.Minute, BackupTS: backupTS}, func(s Status) {
			if s.Phase == PhaseReady {
				once.Do(func() { close(ready) })
			}
		})
	}()
	select {
	case <-ready:
		stop()
		t.Fatalf("the pause reported Ready with no pin: PD's minimum is past backup ts %d (Run then returned %v)", backupTS, <-done)
	case err := <-done:
		if !errors.Is(err, ErrPinRefused) {
			t.Fatalf("Run = %v, want ErrPinRefused", err)
		}
		t.Logf("refused: %v", err)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp != 0 {
		t.Errorf("a service safepoint at %d is listed after a refused pin", sp)
	}
}

// refusingPD answers every pin with a minimum above it, as PD does when it did not store it.
type refusingPD struct {
	PD
	min uint64
}

func (p refusingPD) UpdateServiceGCSafePoint(context.Context, string, int64, uint64) (uint64, error) {
	return p.min, nil
}

func (p refusingPD) UpdateGCSafePoint(context.Context, uint64) (uint64, error) { return 0, nil }

// TestKeeperBreaksThePauseWhenARefreshIsRefused: a refresh of the pin that PD does not store
// (the pin lapsed and GC's minimum moved past it meanwhile) is no transient failure the TTL
// covers: the keeper ends the pause with ErrPinRefused.
func TestKeeperBreaksThePauseWhenARefreshIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gc := &gcKeeper{pd: refusingPD{min: 1000}, id: "fedbr-test", ttl: 300 * time.Millisecond, backupTS: 500}
	k := startKeeper(ctx, t.Logf, gc.ttl, gc)
	defer k.stop()
	select {
	case <-k.ctx.Done():
	case <-ctx.Done():
		t.Fatal("the keeper kept a pause whose pin PD refused")
	}
	if err := k.cause(nil); !errors.Is(err, ErrPinRefused) {
		t.Fatalf("keeper ended with %v, want ErrPinRefused", err)
	}
}

// TestPauseRefusesMinResolvedTSNotRealTime: with no backup ts given the pause reads PD's
// min-resolved-ts; a PD whose min-resolved-ts persistence is off answers is_real_time false,
// which the PD client refuses, and the pause fails before it pins anything.
func TestPauseRefusesMinResolvedTSNotRealTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx, func(c *tidbcluster.Config) { c.PD.MinResolvedTSPersistenceInterval = -1 })
	err := Run(ctx, e.deps(t), Config{TTL: time.Minute}, func(Status) {})
	if err == nil || !strings.Contains(err.Error(), "read min-resolved-ts") || !strings.Contains(err.Error(), "min resolved ts is not enabled") {
		t.Fatalf("Run = %v, want the min-resolved-ts refusal", err)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp != 0 {
		t.Errorf("a service safepoint at %d is listed after the refusal", sp)
	}
}
