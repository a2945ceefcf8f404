package pause

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/fedbr/fedbr/internal/tidb"
)

// Holder keeps the PD half of a pause on a cluster that needs no TiKV lease: a GC service
// safepoint at a ts − 1 and PD's schedulers and scheduling limits paused, both refreshed every
// TTL/3 by the pause's own keeper (GC also checked against the ts every few seconds) until
// Release. restore-data holds one over its data phase: PD must not move a region or its leader
// away from the planned one, and GC must keep every version the flashback reads.
type Holder struct {
	k     *keeper
	gc    *gcKeeper
	sched *scheduleKeeper
	ttl   time.Duration
	log   func(string, ...any)
	// undos are what was placed, in order.
	undos []undo
}

// HolderDeps are the clients a Holder uses; github.com/tikv/pd/client's Client and
// github.com/tikv/pd/client/http's Client satisfy them.
type HolderDeps struct {
	PD   tidb.GCReader
	HTTP SchedulePD
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// HolderConfig tunes a Holder.
type HolderConfig struct {
	// TS is what GC is held below: the service safepoint is TS − 1, and GC reaching TS breaks
	// the hold.
	TS uint64
	// TTL bounds both pieces: a killed process lets them lapse within it (at least 3s).
	TTL time.Duration
	// Stores is the cluster's TiKV count, which PD's max-snapshot-count is scaled by.
	Stores int
	// ServiceID names the service safepoint; empty makes a unique "fedbr-<uuid>".
	ServiceID string
}

// HoldGCAndSchedules pins GC below cfg.TS and pauses PD's schedulers and scheduling limits,
// and keeps both until Release. It fails, after undoing whatever it placed, when GC already
// reached the ts or PD refuses a piece. ctx bounds the hold: when it ends the keeper stops
// refreshing (Release still lifts everything).
func HoldGCAndSchedules(ctx context.Context, d HolderDeps, cfg HolderConfig) (*Holder, error) {
	if cfg.TTL < 3*time.Second {
		return nil, fmt.Errorf("hold TTL %s is too short; use at least 3s", cfg.TTL)
	}
	if cfg.TS == 0 {
		return nil, errors.New("hold GC below ts 0: no ts given")
	}
	if cfg.ServiceID == "" {
		cfg.ServiceID = tidb.PauseServicePrefix + uuid.NewString()
	}
	if d.Log == nil {
		d.Log = func(string, ...any) {}
	}
	h := &Holder{
		gc:    &gcKeeper{pd: d.PD, id: cfg.ServiceID, ttl: cfg.TTL, backupTS: cfg.TS},
		sched: &scheduleKeeper{http: d.HTTP, ttl: cfg.TTL},
		ttl:   cfg.TTL, log: d.Log,
	}
	if err := h.sched.decide(ctx, cfg.Stores); err != nil {
		return nil, err
	}
	d.Log("Pinning GC below ts %d (service %s, TTL %s)", cfg.TS, cfg.ServiceID, cfg.TTL)
	if err := h.gc.pin(ctx); err != nil {
		return nil, err
	}
	h.undos = append(h.undos, undo{"GC safepoint", h.gc.release})
	h.k = startKeeper(ctx, d.Log, cfg.TTL, h.gc)
	// A partial pause is undone too.
	h.undos = append(h.undos, undo{"PD schedulers", h.sched.resume})
	if err := h.sched.refresh(ctx); err != nil {
		return nil, errors.Join(err, h.Release(context.WithoutCancel(ctx)))
	}
	h.k.keepSchedules(h.sched)
	d.Log("GC is held and PD's schedulers are paused (%s)", describe(h.Hold()))
	return h, nil
}

// Hold is what the holder placed in PD, as a pause's identity names it.
func (h *Holder) Hold() tidb.Hold {
	return tidb.Hold{ServiceSafePoint: h.gc.id, Schedulers: h.sched.plan.Schedulers, Config: h.sched.plan.settings()}
}

// Context is the ctx the hold was taken with, ended also when the hold breaks (GC reached the
// ts): run what the hold protects under it.
func (h *Holder) Context() context.Context { return h.k.ctx }

// Cause is why the hold broke when it did (whatever failed for that reason, err, is only a
// consequence), else err.
func (h *Holder) Cause(err error) error { return h.k.cause(err) }

// Release stops refreshing and lifts both pieces at once, within ctx (give it one that
// outlives a cancelled step: a lift cut short leaves the rest to lapse within the TTL).
func (h *Holder) Release(ctx context.Context) error {
	if h.k != nil {
		h.k.stop() // before anything is lifted: a late refresh would place it again
	}
	took, err := liftAll(ctx, time.Now, h.undos)
	h.undos = nil
	if err != nil {
		return fmt.Errorf("lift the GC hold and the scheduler pause (the rest lapses within %s): %w", h.ttl, err)
	}
	if len(took) > 0 {
		h.log("GC and PD's schedulers resumed (%s)", strings.Join(took, ", "))
	}
	return nil
}
