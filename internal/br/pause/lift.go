package pause

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/tidb"
)

// Phases of a lift (and PhaseFailed).
const (
	// PhaseLifting: undoing what the pause recorded placing, then reading PD back.
	PhaseLifting Phase = report.PhaseLifting
	// PhaseLifted: PD shows nothing of the pause's identity held.
	PhaseLifted Phase = report.PhaseLifted
)

// LiftStatus is the machine-readable state of a lift.
type LiftStatus struct {
	Phase Phase     `json:"phase"`
	Error string    `json:"error,omitempty"`
	Since time.Time `json:"since"`
	// LiftedAt is when PD showed nothing of the identity held any more.
	LiftedAt time.Time `json:"liftedAt,omitzero"`
	// Hold is the identity lifted: what the pause recorded placing in PD.
	tidb.Hold
}

// LiftDeps are the clients a lift uses.
type LiftDeps struct {
	PD   PD
	HTTP PDHTTP
	// ReadHeld reads what PD still holds of a pause's identity (tidb.ReadHeldOf).
	ReadHeld func(context.Context, tidb.Hold) (tidb.Held, error)
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Lift undoes what a pause placed in PD, given its identity (Status.Hold, recorded before the
// pause placed any of it), when the pause could not: it was killed, ran out of memory or lost
// its node. It runs the pause's own undo — the service safepoint removed (TTL 0), every paused
// scheduler resumed (delay 0), the TTL'd config reverted to the original values (TTL 0) — all at
// once, then reads PD back and succeeds only when PD holds nothing of the identity. An undo
// that fails is no failure when PD holds nothing anyway (its TTL lapsed, the scheduler is gone):
// a lift run twice, or after the TTL, succeeds. The config revert is the exception: PD's API
// shows no TTL'd value, so the read-back cannot see it and a failed revert fails the lift. TiKV's PrepareSnapshotBackup leases are not
// lifted: a lease is one per store, whoever took it, and lapses within the pause's TTL.
func Lift(ctx context.Context, d LiftDeps, h tidb.Hold, report func(LiftStatus)) (LiftStatus, error) {
	if d.Log == nil {
		d.Log = func(string, ...any) {}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	st := LiftStatus{Phase: PhaseLifting, Since: d.Now(), Hold: h}
	report(st)
	fail := func(err error) (LiftStatus, error) {
		st.Phase, st.Since, st.Error = PhaseFailed, d.Now(), err.Error()
		report(st)
		return st, err
	}
	if h.Empty() {
		return fail(errors.New("the pause's identity names nothing it placed in PD: nothing to lift"))
	}
	plan, err := scheduleOf(h)
	if err != nil {
		return fail(fmt.Errorf("the pause's identity: %w", err))
	}
	var undos []undo
	if h.ServiceSafePoint != "" {
		undos = append(undos, undo{"GC safepoint", (&gcKeeper{pd: d.PD, id: h.ServiceSafePoint}).release})
	}
	if len(plan.Schedulers) > 0 {
		undos = append(undos, undo{"PD schedulers", (&scheduleKeeper{http: d.HTTP, plan: schedulePause{Schedulers: plan.Schedulers}}).resume})
	}
	// PD's API shows no TTL'd config (GET /config/schedule answers the persisted values), so
	// the read-back below cannot see whether the revert took: only PD's answer to it can.
	var configErr error
	if len(plan.Original) > 0 {
		revert := &scheduleKeeper{http: d.HTTP, plan: schedulePause{Original: plan.Original}}
		undos = append(undos, undo{"PD schedule config", func(ctx context.Context) error {
			configErr = revert.resume(ctx)
			return configErr
		}})
	}
	d.Log("Lifting what the pause placed in PD: %s", describe(h))
	took, undoErr := liftAll(ctx, d.Now, undos)
	held, err := d.ReadHeld(ctx, h)
	if err != nil {
		return fail(errors.Join(fmt.Errorf("read back what PD holds: %w", err), undoErr))
	}
	if held.Any() {
		return fail(errors.Join(fmt.Errorf("PD still holds %s of the pause's identity", held), undoErr))
	}
	if configErr != nil {
		return fail(fmt.Errorf("revert the schedule config %s (PD's API cannot show whether the paused values are still in force; their TTL ends them): %w",
			strings.Join(sortedKeys(plan.Original), ", "), configErr))
	}
	if undoErr != nil {
		d.Log("Some undo failed, but PD holds none of it any more (lapsed or lifted before): %v", undoErr)
	}
	st.Phase, st.LiftedAt = PhaseLifted, d.Now()
	st.Since = st.LiftedAt
	report(st)
	d.Log("Lifted: PD holds nothing of the pause's identity (%s)", strings.Join(took, ", "))
	return st, nil
}

// describe names an identity for the log.
func describe(h tidb.Hold) string {
	var parts []string
	if h.ServiceSafePoint != "" {
		parts = append(parts, "service safepoint "+h.ServiceSafePoint)
	}
	if len(h.Schedulers) > 0 {
		parts = append(parts, "schedulers "+strings.Join(h.Schedulers, ", "))
	}
	if len(h.Config) > 0 {
		keys := make([]string, len(h.Config))
		for i, s := range h.Config {
			keys[i] = s.Key
		}
		parts = append(parts, "config "+strings.Join(keys, ", "))
	}
	return strings.Join(parts, "; ")
}
