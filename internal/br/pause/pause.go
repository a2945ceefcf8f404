package pause

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/tidb"
)

// Phase is where a pause is; the command publishes it (status file, HTTP) so the agent can act
// on readiness without parsing logs.
type Phase string

const (
	PhaseStarting Phase = report.PhaseStarting
	// PhaseGCPaused: the GC safepoint is pinned; leases are being taken.
	PhaseGCPaused Phase = report.PhaseGCPaused
	// PhaseReady: GC pinned, every TiKV leased and applied, PD scheduling paused. Snapshots may start.
	PhaseReady    Phase = report.PhaseReady
	PhaseStopping Phase = report.PhaseStopping
	// PhaseStopped: everything was lifted.
	PhaseStopped Phase = report.PhaseStopped
	// PhaseFailed: the pause broke (see Error); whatever was lifted is lifted, the rest lapses by TTL.
	PhaseFailed Phase = report.PhaseFailed
)

// Status is the machine-readable state of a pause.
type Status struct {
	Phase    Phase     `json:"phase"`
	BackupTS uint64    `json:"backupTS,omitempty"`
	Stores   int       `json:"stores,omitempty"`
	Error    string    `json:"error,omitempty"`
	Since    time.Time `json:"since"`
	// GCPausedAt is when the GC safepoint was first pinned, and LiftedAt when everything the
	// pause held was lifted (absent when lifting failed and the rest lapses by TTL): together
	// they are the GC pause window the live cluster paid for, which the agent reports.
	GCPausedAt time.Time `json:"gcPausedAt,omitzero"`
	LiftedAt   time.Time `json:"liftedAt,omitzero"`
	// ReadyAt is when everything was held and snapshots could start.
	ReadyAt time.Time `json:"readyAt,omitzero"`
	// Hold is the pause's identity, what it places in PD: reported (and recorded, Deps.Record)
	// before it places any of it, so that Lift can undo exactly that if the pause dies.
	tidb.Hold
}

// Config tunes a pause.
type Config struct {
	// TTL bounds every piece (service safepoint, TiKV leases, scheduler delay, config TTL): a
	// killed process lets everything lapse within it.
	TTL time.Duration
	// BackupTS pins GC at this ts; 0 reads PD's min-resolved-ts (which must be real-time).
	BackupTS uint64
	// ServiceID names the service safepoint; empty makes a unique "fedbr-<uuid>".
	ServiceID string
	// CleanupTimeout bounds lifting everything on stop.
	CleanupTimeout time.Duration
	// DialTimeout bounds each attempt to connect to a TiKV store — dial, stream, first lease
	// answered — (default 10s); a failed attempt is retried until ctx ends.
	DialTimeout time.Duration
	// WaitApplyRounds bounds how often moving regions are re-sent (default 300: with the 1s
	// backoff, about the 5 minutes of retries BR allows, 60 rounds 5s apart).
	WaitApplyRounds int
	// RetryBackoff is the wait before re-sending failed regions (default 1s).
	RetryBackoff time.Duration
	// Unsafe removes safeguards, for negative controls only: tests set it to show that the
	// checker catches each safeguard's absence. No fedbr command sets it.
	Unsafe Unsafe
}

// Unsafe lists the pause's safeguards that a negative control can remove. Test-only: no fedbr
// command or flag sets any of them.
type Unsafe struct {
	// NoGCPin neither pins GC at the backup ts nor checks that GC stayed below it.
	NoGCPin bool
	// NoLease opens no PrepareSnapshotBackup stream: no TiKV store holds a lease (so none
	// refuses splits, merges, conf changes or leader transfers while the stores are captured)
	// and no region is waited on to apply. GC is pinned and PD's schedulers are paused as usual.
	NoLease bool
	// TrustPin takes PD's answer to the GC pin on trust: a pin PD did not store (its minimum
	// service safepoint above backup ts − 1: ErrPinRefused) goes unnoticed and the pause
	// reports Ready without it.
	TrustPin bool
	// SchedulersRunning leaves PD's schedulers and schedule limits as they are: the pause
	// neither plans, records nor places a scheduler pause. GC is pinned and every store is
	// leased and applied as usual.
	SchedulersRunning bool
}

// Deps are the clients a pause uses.
type Deps struct {
	PD   PD
	HTTP PDHTTP
	Dial Dialer
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Now is the clock for Status.Since; nil means time.Now.
	Now func() time.Time
	// Record, when set, is called once the pause reported the status carrying its identity
	// (Status.Hold), before it places any of it, and returns once that status is recorded where
	// a lift reads it (the member's status.steps) — or with an error, and then the pause places
	// nothing and fails: a pause killed after it placed something must have left what undoes it.
	Record func(context.Context) error
}

// Run pauses the cluster, reports progress through report, holds the pause until ctx ends, then
// lifts everything within CleanupTimeout. It returns nil when it held until stopped and lifted
// everything; an error when the pause could not be established, broke while held (a TiKV
// stream ended, a lease was lost, GC passed the backup ts), or could not be fully lifted.
func Run(ctx context.Context, d Deps, cfg Config, report func(Status)) error {
	if cfg.TTL < 3*time.Second {
		return fmt.Errorf("TTL %s is too short; use at least 3s", cfg.TTL)
	}
	if cfg.ServiceID == "" {
		cfg.ServiceID = tidb.PauseServicePrefix + uuid.NewString()
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = cfg.TTL
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.WaitApplyRounds <= 0 {
		cfg.WaitApplyRounds = 300
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if d.Log == nil {
		d.Log = func(string, ...any) {}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	st := Status{Phase: PhaseStarting, Since: d.Now()}
	set := func(p Phase, err error) {
		if p != st.Phase {
			st.Since = d.Now()
		}
		st.Phase = p
		if p == PhaseReady {
			st.ReadyAt = st.Since
		}
		if err != nil {
			st.Error = err.Error()
		}
		report(st)
	}
	set(PhaseStarting, nil)

	gc, prep, sched := &gcKeeper{pd: d.PD, id: cfg.ServiceID, ttl: cfg.TTL},
		&preparer{pd: d.PD, regions: tidb.NewRegionScanner(d.PD, tidb.RegionScanOptions{Log: d.Log}), dial: d.Dial, dialTimeout: cfg.DialTimeout, lease: cfg.TTL, backoff: cfg.RetryBackoff, maxRounds: cfg.WaitApplyRounds, log: d.Log},
		&scheduleKeeper{http: d.HTTP, ttl: cfg.TTL}
	var lifted []undo // in the order taken
	holdErr := establishAndHold(ctx, d, cfg, &st, set, gc, prep, sched, &lifted)

	set(PhaseStopping, nil)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CleanupTimeout)
	defer cancel()
	took, cleanupErr := liftAll(cctx, d.Now, lifted)
	if cleanupErr != nil {
		d.Log("Lifting the pause failed; the rest lapses within %s: %v", cfg.TTL, cleanupErr)
	}
	if cleanupErr == nil && !st.GCPausedAt.IsZero() {
		st.LiftedAt = d.Now()
	}
	if err := errors.Join(holdErr, cleanupErr); err != nil {
		set(PhaseFailed, err)
		return err
	}
	set(PhaseStopped, nil)
	d.Log("Pause lifted: GC, PD scheduling and TiKV admin operations resumed (%s)", strings.Join(took, ", "))
	return nil
}

// undo lifts one piece of the pause; what names it in the log.
type undo struct {
	what string
	lift func(context.Context) error
}

// liftAll runs every undo at once: the pieces are independent (PD's GC safepoint, PD's
// schedulers, each TiKV's lease), so the live cluster waits for the slowest, not for their
// sum. It returns how long each took, in order, and every error.
func liftAll(ctx context.Context, now func() time.Time, undos []undo) ([]string, error) {
	errs := make([]error, len(undos))
	took := make([]string, len(undos))
	start := now()
	var wg sync.WaitGroup
	for i, u := range undos {
		wg.Go(func() {
			errs[i] = u.lift(ctx)
			took[i] = fmt.Sprintf("%s %s", u.what, now().Sub(start).Round(time.Millisecond))
		})
	}
	wg.Wait()
	return took, errors.Join(errs...)
}

// establishAndHold takes every piece of the pause in order, then holds it until ctx ends. It
// records an undo step for each piece taken, and returns nil only when ctx ended while holding.
func establishAndHold(ctx context.Context, d Deps, cfg Config, st *Status, set func(Phase, error),
	gc *gcKeeper, prep *preparer, sched *scheduleKeeper, lifted *[]undo) error {
	stores, err := tidb.TiKVStores(ctx, d.PD)
	if err != nil {
		return err
	}
	st.Stores = len(stores)
	ids := make([]uint64, len(stores))
	for i, s := range stores {
		ids[i] = s.GetId()
	}
	gc.backupTS = cfg.BackupTS
	if gc.backupTS == 0 {
		if gc.backupTS, err = minResolvedTS(ctx, d.HTTP, cfg.TTL); err != nil {
			return err
		}
	}
	st.BackupTS = gc.backupTS
	if err := decideAndRecord(ctx, d, cfg.Unsafe, st, set, gc, sched); err != nil {
		return err
	}
	gc.off, gc.trustPin = cfg.Unsafe.NoGCPin, cfg.Unsafe.TrustPin
	if gc.off {
		d.Log("Not pinning GC (negative control)")
	} else {
		d.Log("Pinning GC at backup ts %d (service %s, TTL %s)", gc.backupTS, gc.id, cfg.TTL)
	}
	if err := gc.pin(ctx); err != nil {
		return err
	}
	*lifted = append(*lifted, undo{"GC safepoint", gc.release})
	st.GCPausedAt = d.Now()
	set(PhaseGCPaused, nil)
	d.Log("GC is paused")
	// From here on the keeper refreshes what is placed, whatever else is still being set up: a
	// store that takes longer than a TTL to connect must not let the pin lapse.
	k := startKeeper(ctx, d.Log, cfg.TTL, gc)
	defer k.stop() // before anything is lifted: a late refresh would place it again
	ctx = k.ctx

	prep.off = cfg.Unsafe.NoLease
	if prep.off {
		d.Log("Taking no PrepareSnapshotBackup lease and waiting for no region to apply (negative control)")
	} else {
		d.Log("Taking PrepareSnapshotBackup leases on %d stores", len(stores))
	}
	// Each lease is kept from the moment it is taken, so those taken are finished even when
	// connecting to the rest fails.
	*lifted = append(*lifted, undo{"TiKV leases", prep.finish})
	if err := prep.connect(ctx, stores); err != nil {
		return k.cause(err)
	}
	// Every store holds its lease now, so no region can change hands: PD's schedulers are
	// paused while the regions apply (as BR does), and the pause is ready when both are done.
	if !prep.off {
		d.Log("Leases held; waiting for every region to apply and pausing PD schedulers meanwhile")
	}
	paused := make(chan error, 1)
	go func() { paused <- sched.refresh(ctx) }()
	applyErr := prep.waitApply(ctx)
	schedErr := <-paused
	*lifted = append(*lifted, undo{"PD schedulers", sched.resume}) // a partial pause is undone too
	if schedErr == nil {
		k.keepSchedules(sched)
	}
	if applyErr != nil {
		return k.cause(fmt.Errorf("wait-apply: %w", applyErr))
	}
	if schedErr != nil {
		return k.cause(schedErr)
	}
	d.Log("Every region applied")
	// The pin is checked once more right before readiness: Ready promises the data at the
	// backup ts is still there.
	if err := gc.check(ctx); err != nil {
		return err
	}
	set(PhaseReady, nil)
	if cfg.Unsafe.SchedulersRunning {
		d.Log("Schedulers left running (negative control)")
	} else {
		d.Log("Schedulers are paused")
	}
	d.Log("All ready")
	return k.cause(hold(ctx, prep))
}

// decideAndRecord decides everything the pause places in PD — its service safepoint, the
// schedulers and config items to pause — and reports it as the pause's identity (st.Hold),
// recorded (Deps.Record) before any of it is placed: however the pause dies afterwards, a lift
// can undo exactly what it placed. With u.SchedulersRunning the plan pauses no scheduler and
// sets no limit.
func decideAndRecord(ctx context.Context, d Deps, u Unsafe, st *Status, set func(Phase, error), gc *gcKeeper, sched *scheduleKeeper) error {
	if u.SchedulersRunning {
		d.Log("Leaving PD's schedulers running (negative control)")
	} else if err := sched.decide(ctx, st.Stores); err != nil {
		return err
	}
	st.Hold = tidb.Hold{ServiceSafePoint: gc.id, Schedulers: sched.plan.Schedulers, Config: sched.plan.settings()}
	set(PhaseStarting, nil)
	if d.Record == nil {
		return nil
	}
	if err := d.Record(ctx); err != nil {
		return fmt.Errorf("record what the pause places in PD (service safepoint %s, %d schedulers, %d config items) before placing any of it: %w",
			gc.id, len(st.Schedulers), len(st.Config), err)
	}
	return nil
}

// hold waits until ctx ends, and fails as soon as a TiKV stream breaks (the keeper watches the
// rest).
func hold(ctx context.Context, prep *preparer) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-prep.events:
			if err := streamError(e); err != nil {
				return err
			}
		}
	}
}

// minResolvedTS reads PD's min-resolved-ts, waiting up to limit for the stores to report one
// (a freshly started cluster reports 0 for a moment).
func minResolvedTS(ctx context.Context, h PDHTTP, limit time.Duration) (uint64, error) {
	deadline := time.Now().Add(limit)
	for {
		ts, _, err := h.GetMinResolvedTSByStoresIDs(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("read min-resolved-ts: %w", err)
		}
		if ts > 0 {
			return ts, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("min-resolved-ts stayed 0 for %s: the stores report no resolved ts", limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
