package pause

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/tidb"
)

// deadPD is PD's gRPC API to a pause that dies before it lifts anything: removing its service
// safepoint (TTL 0) never reaches PD, as after a kill -9.
type deadPD struct{ PD }

func (p deadPD) UpdateServiceGCSafePoint(ctx context.Context, id string, ttl int64, sp uint64) (uint64, error) {
	if ttl <= 0 {
		return 0, errors.New("killed")
	}
	return p.PD.UpdateServiceGCSafePoint(ctx, id, ttl, sp)
}

// deadHTTP is PD's HTTP API to a pause that dies before it lifts anything: resuming schedulers
// and reverting the config never reach PD.
type deadHTTP struct{ PDHTTP }

func (h deadHTTP) SetSchedulerDelay(ctx context.Context, name string, delay int64) error {
	if delay <= 0 {
		return errors.New("killed")
	}
	return h.PDHTTP.SetSchedulerDelay(ctx, name, delay)
}

func (h deadHTTP) SetConfig(ctx context.Context, cfg map[string]any, ttl ...float64) error {
	if len(ttl) > 0 && ttl[0] <= 0 {
		return errors.New("killed")
	}
	return h.PDHTTP.SetConfig(ctx, cfg, ttl...)
}

// readHeld is ReadHeldOf with the hold's config items read from the double's ground truth:
// PD's API shows no TTL'd value, so a lift cannot read them back, but the test can.
func (e *env) readHeld(ctx context.Context, h tidb.Hold) (tidb.Held, error) {
	held, err := tidb.Plaintext.ReadHeldOf(ctx, e.cluster.PD.URL(), h, time.Now())
	if err != nil {
		return held, err
	}
	held.Settings = tidb.HeldSettings(h, e.cluster.PD.EffectiveScheduleConfig())
	return held, nil
}

func (e *env) liftDeps(t *testing.T) LiftDeps {
	return LiftDeps{PD: e.pd, HTTP: e.http, ReadHeld: e.readHeld, Log: t.Logf}
}

// TestLiftAfterAKilledPause: a pause records its identity before it places anything, then dies
// holding everything (its undo never reaches PD, as after kill -9). PD holds its service
// safepoint, paused schedulers and TTL'd config until the TTL (10 minutes here); Lift, given
// only the recorded identity, removes all of it at once, and PD then shows nothing of it held.
// A second lift finds nothing to do and succeeds too.
func TestLiftAfterAKilledPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	beforeCfg := e.cluster.PD.EffectiveScheduleConfig()

	log := newStatusLog()
	var recorded *Status
	d := e.deps(t)
	d.PD, d.HTTP = deadPD{e.pd}, deadHTTP{e.http}
	d.Record = func(ctx context.Context) error {
		// The identity is recorded before anything of it is placed.
		log.mu.Lock()
		s := log.all[len(log.all)-1]
		log.mu.Unlock()
		recorded = &s
		if held, err := e.readHeld(ctx, s.Hold); err != nil || held.Any() {
			t.Errorf("PD holds %s (%v) of the pause before it recorded its identity", held, err)
		}
		return nil
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, d, Config{TTL: 10 * time.Minute, CleanupTimeout: 5 * time.Second}, log.report)
	}()
	ready := log.waitFor(t, ctx, PhaseReady)
	stop()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Run = %v, want the failed lifting", err)
	}
	if recorded == nil || recorded.Phase != PhaseStarting || !recorded.GCPausedAt.IsZero() || recorded.ServiceSafePoint == "" ||
		len(recorded.Schedulers) == 0 || len(recorded.Config) == 0 {
		t.Fatalf("recorded status %+v: want Starting, before the GC pin, with the whole identity", recorded)
	}
	if ready.ServiceSafePoint != recorded.ServiceSafePoint || len(ready.Config) != len(recorded.Config) {
		t.Errorf("Ready status identity %+v differs from the recorded %+v", ready.Hold, recorded.Hold)
	}
	last := log.all[len(log.all)-1]
	if last.Phase != PhaseFailed || !last.LiftedAt.IsZero() {
		t.Fatalf("last status %+v: want Failed without liftedAt", last)
	}
	held, err := e.readHeld(ctx, last.Hold)
	if err != nil {
		t.Fatal(err)
	}
	if !held.GC || len(held.Schedulers) != len(last.Schedulers) || len(held.Settings) == 0 {
		t.Fatalf("PD holds %+v after the pause died: want its safepoint, its %d schedulers and its config", held, len(last.Schedulers))
	}

	var lifts []LiftStatus
	st, err := Lift(ctx, e.liftDeps(t), last.Hold, func(s LiftStatus) { lifts = append(lifts, s) })
	if err != nil {
		t.Fatalf("Lift = %v", err)
	}
	if st.Phase != PhaseLifted || st.LiftedAt.IsZero() || st.ServiceSafePoint != last.ServiceSafePoint || len(lifts) != 2 || lifts[0].Phase != PhaseLifting {
		t.Errorf("lift statuses %+v, want Lifting then Lifted with liftedAt and the identity", lifts)
	}
	if held, err := e.readHeld(ctx, last.Hold); err != nil || held.Any() {
		t.Errorf("PD holds %s (%v) after the lift", held, err)
	}
	if sp := e.minServiceSafePoint(t, ctx); sp == ready.BackupTS-1 {
		t.Errorf("service safepoint still pinned at %d after the lift", sp)
	}
	if paused := e.pausedSchedulers(t, ctx); len(paused) != 0 {
		t.Errorf("schedulers %v still paused after the lift", paused)
	}
	afterCfg := e.cluster.PD.EffectiveScheduleConfig()
	for k, v := range beforeCfg {
		if tidb.ConfigText(afterCfg[k]) != tidb.ConfigText(v) {
			t.Errorf("%s = %v after the lift, want the original %v", k, afterCfg[k], v)
		}
	}

	// Idempotent: nothing left to undo, PD holds nothing, the lift succeeds.
	if st, err := Lift(ctx, e.liftDeps(t), last.Hold, func(LiftStatus) {}); err != nil || st.Phase != PhaseLifted {
		t.Errorf("second Lift = %+v, %v; want Lifted", st, err)
	}
}

// TestLiftAfterTheTTL: what a dead pause placed lapsed by its TTL before the lift ran; the
// lift's undo finds nothing (a scheduler whose delay lapsed resumes with delay 0 all the same)
// and PD holds nothing: it succeeds.
func TestLiftAfterTheTTL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	// The pause's placing functions alone, as a pause killed right after placing them.
	ttl := 3 * time.Second
	gc := &gcKeeper{pd: e.pd, id: "fedbr-lift-ttl", ttl: ttl, backupTS: e.tso(t, ctx)}
	sched := &scheduleKeeper{http: e.http, ttl: ttl}
	if err := sched.decide(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := gc.pin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sched.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hold := tidb.Hold{ServiceSafePoint: gc.id, Schedulers: sched.plan.Schedulers, Config: sched.plan.settings()}
	if held, err := e.readHeld(ctx, hold); err != nil || !held.GC || len(held.Schedulers) == 0 || len(held.Settings) == 0 {
		t.Fatalf("PD holds %+v (%v) of the placed pause, want all of it", held, err)
	}
	for {
		held, err := e.readHeld(ctx, hold)
		if err != nil {
			t.Fatal(err)
		}
		if !held.Any() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PD still holds %s after the TTL", held)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if st, err := Lift(ctx, e.liftDeps(t), hold, func(LiftStatus) {}); err != nil || st.Phase != PhaseLifted {
		t.Errorf("Lift after the TTL = %+v, %v; want Lifted", st, err)
	}
}

// TestLiftFailsWhilePDHolds: a lift whose undo does not take (its scheduler resumes never
// reach PD) fails and names what PD still holds; it never reports Lifted.
func TestLiftFailsWhilePDHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	sched := &scheduleKeeper{http: e.http, ttl: 10 * time.Minute}
	if err := sched.decide(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := sched.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hold := tidb.Hold{Schedulers: sched.plan.Schedulers}
	d := e.liftDeps(t)
	d.HTTP = deadHTTP{e.http}
	var mu sync.Mutex
	var last LiftStatus
	_, err := Lift(ctx, d, hold, func(s LiftStatus) { mu.Lock(); last = s; mu.Unlock() })
	if err == nil || !strings.Contains(err.Error(), "PD still holds paused schedulers") || !strings.Contains(err.Error(), sched.plan.Schedulers[0]) {
		t.Fatalf("Lift = %v, want a failure naming the paused schedulers", err)
	}
	if last.Phase != PhaseFailed || !last.LiftedAt.IsZero() || last.Error == "" {
		t.Errorf("last lift status %+v, want Failed with the error and no liftedAt", last)
	}
	if _, err := Lift(ctx, d, tidb.Hold{}, func(LiftStatus) {}); err == nil || !strings.Contains(err.Error(), "nothing to lift") {
		t.Errorf("Lift of an empty identity = %v, want nothing to lift", err)
	}
	// The real undo lifts it.
	if _, err := Lift(ctx, e.liftDeps(t), hold, func(LiftStatus) {}); err != nil {
		t.Errorf("Lift = %v", err)
	}
}

// TestLiftFailsWhenTheConfigRevertFails: PD's API shows no TTL'd config, so the lift's read-back
// (tidb.ReadHeldOf, as `br lift` uses it) cannot see paused limits left in force; a revert PD
// did not take fails the lift, naming the items, where the read-back alone would report Lifted.
func TestLiftFailsWhenTheConfigRevertFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	sched := &scheduleKeeper{http: e.http, ttl: 10 * time.Minute}
	if err := sched.decide(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := sched.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	hold := tidb.Hold{Config: sched.plan.settings()}
	d := e.liftDeps(t)
	d.HTTP = deadHTTP{e.http}
	d.ReadHeld = func(ctx context.Context, h tidb.Hold) (tidb.Held, error) {
		return tidb.Plaintext.ReadHeldOf(ctx, e.cluster.PD.URL(), h, time.Now())
	}
	if held, err := d.ReadHeld(ctx, hold); err != nil || held.Any() {
		t.Fatalf("PD's API shows %+v (%v) of TTL'd config, want nothing", held, err)
	}
	_, err := Lift(ctx, d, hold, func(LiftStatus) {})
	if err == nil || !strings.Contains(err.Error(), "revert the schedule config") || !strings.Contains(err.Error(), "schedule.leader-schedule-limit") {
		t.Fatalf("Lift = %v, want the failed revert named", err)
	}
	if s := tidb.HeldSettings(hold, e.cluster.PD.EffectiveScheduleConfig()); len(s) == 0 {
		t.Fatal("the double shows no paused config in force: the revert was not what failed")
	}
	// The real revert lifts it.
	if _, err := Lift(ctx, e.liftDeps(t), hold, func(LiftStatus) {}); err != nil {
		t.Fatalf("Lift = %v", err)
	}
	if s := tidb.HeldSettings(hold, e.cluster.PD.EffectiveScheduleConfig()); len(s) > 0 {
		t.Errorf("config %v still in force after the lift", s)
	}
}
