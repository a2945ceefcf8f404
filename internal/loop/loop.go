// Package loop is the reconcile skeleton every fedbr controller runs, the manager's and the
// agent's alike, in cluster-api's shape: fetch the object, keep its finalizer, observe and plan,
// apply the plan's actions, patch the status once, release the finalizer when the plan says so.
//
// What makes a pass safe to repeat after a crash at any point, or to run from a cache that
// predates the controller's own last write:
//   - the status is patched with the resourceVersion it was planned from (an optimistic lock):
//     a plan made from an older copy is refused by the API server and made again from the newer
//     one, so a status is never written backwards, and the Events and metrics that follow a
//     status change are recorded once;
//   - observedGeneration advances only when every action of the pass succeeded: a status whose
//     observedGeneration equals the generation says the controller acted on that spec;
//   - a decision the actions depend on (which data plane holds the pause, that the pause was
//     asked for) is recorded in the status before any action runs (Decision.RecordFirst), so a
//     crash between the two cannot make a second, different decision;
//   - every action is idempotent and derived from what was observed, never from memory.
//
// ownwrite.Tracker is only an optimisation on top: it skips a pass whose cached copy predates
// the last write instead of planning it and having the write refused (tested: same result).
package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fedbr/fedbr/internal/ownwrite"
)

// Decision is what one pass's observe-and-plan returns.
type Decision[O client.Object, A any] struct {
	Actions []A
	// SetStatus puts the planned status on the object (observedGeneration included: the loop
	// keeps the stored one when an action fails).
	SetStatus func(O)
	// RecordFirst writes the planned status before any action runs: the actions act on a
	// decision the status records.
	RecordFirst bool
	// RemoveFinalizer releases the object once its status is written.
	RemoveFinalizer bool
	RequeueAfter    time.Duration
	// Done, when set, runs at the end of a pass that reached the actions, with the error the
	// pass returns (metrics of what was observed).
	Done func(err error)
}

// Loop is one controller's reconcile: the funcs are what differs per kind.
type Loop[O client.Object, A any] struct {
	// Finalizer is the finalizer the loop keeps on every object it acts on ("": none; a
	// deleted object is then not acted on).
	Finalizer string
	Client    client.Client
	// New returns an empty object of the kind.
	New func() O
	// Gone, when set, is called when the object no longer exists (metrics).
	Gone func(req reconcile.Request)
	// Skip, when set, says the object is not this controller's to act on (it records why).
	Skip func(ctx context.Context, o O) bool
	// Decide observes and plans.
	Decide func(ctx context.Context, o O, now time.Time) (Decision[O, A], error)
	// Apply applies the actions idempotently, in the order and with the concurrency the kind
	// needs; an action that writes o itself leaves o as stored.
	Apply func(ctx context.Context, o O, actions []A, now time.Time) error
	// ObservedGeneration points at the status's observedGeneration.
	ObservedGeneration func(O) *int64
	// Changed, when set, is called once per status write that changed the status (Events,
	// metrics of transitions).
	Changed func(ctx context.Context, before, after O)
	// Released, when set, is called once the loop removed the finalizer.
	Released func(ctx context.Context, o O)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Writes, when set, skips a pass whose cached copy predates the loop's last write.
	Writes *ownwrite.Tracker
}

// Reconcile runs one pass.
func (l *Loop[O, A]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o := l.New()
	if err := l.Client.Get(ctx, req.NamespacedName, o); err != nil {
		if apierrors.IsNotFound(err) {
			if l.Gone != nil {
				l.Gone(req)
			}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get %s: %w", req, err)
	}
	if l.Writes != nil && l.Writes.Stale(o) {
		ctrl.LoggerFrom(ctx).V(1).Info("Cache predates our last write; waiting for it")
		return reconcile.Result{RequeueAfter: ownwrite.Retry}, nil
	}
	if l.Skip != nil && l.Skip(ctx, o) {
		return reconcile.Result{}, nil
	}
	deleting := o.GetDeletionTimestamp() != nil
	if deleting && (l.Finalizer == "" || !controllerutil.ContainsFinalizer(o, l.Finalizer)) {
		return reconcile.Result{}, nil
	}
	if !deleting && l.Finalizer != "" && !controllerutil.ContainsFinalizer(o, l.Finalizer) {
		before := o.DeepCopyObject().(O)
		controllerutil.AddFinalizer(o, l.Finalizer)
		if err := l.Client.Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return requeueOnConflict(ctx, fmt.Errorf("add finalizer: %w", err))
		}
		l.wrote(o, before)
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	start := time.Now()
	dec, err := l.Decide(ctx, o, now)
	planned := time.Since(start)
	if err != nil {
		return reconcile.Result{}, err
	}
	res, err := l.act(ctx, o, dec, now)
	if dec.Done != nil {
		dec.Done(err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Reconciled", "actions", len(dec.Actions), "planned", planned, "took", time.Since(start), "err", err)
	return res, err
}

// act records first when asked, applies the actions, writes the status and releases the
// finalizer.
func (l *Loop[O, A]) act(ctx context.Context, o O, dec Decision[O, A], now time.Time) (reconcile.Result, error) {
	acted := *l.ObservedGeneration(o)
	if dec.RecordFirst {
		if err := l.writeStatus(ctx, o, dec.SetStatus, acted); err != nil {
			return requeueOnConflict(ctx, err)
		}
	}
	applyErr := l.Apply(ctx, o, dec.Actions, now)
	if applyErr == nil {
		acted = o.GetGeneration()
	}
	statusErr := l.writeStatus(ctx, o, dec.SetStatus, acted)
	if applyErr != nil {
		return reconcile.Result{}, errors.Join(applyErr, statusErr)
	}
	if statusErr != nil {
		return requeueOnConflict(ctx, statusErr)
	}
	if dec.RemoveFinalizer && controllerutil.ContainsFinalizer(o, l.Finalizer) {
		before := o.DeepCopyObject().(O)
		controllerutil.RemoveFinalizer(o, l.Finalizer)
		if err := l.Client.Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return requeueOnConflict(ctx, fmt.Errorf("remove finalizer: %w", err))
		}
		if l.Released != nil {
			l.Released(ctx, o)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: dec.RequeueAfter}, nil
}

// writeStatus puts the planned status on o with observedGeneration acted and patches it when
// it differs from the stored one, locked to the version it was planned from.
func (l *Loop[O, A]) writeStatus(ctx context.Context, o O, set func(O), acted int64) error {
	before := o.DeepCopyObject().(O)
	set(o)
	*l.ObservedGeneration(o) = acted
	if sameJSON(before, o) {
		return nil
	}
	if err := l.Client.Status().Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		restore(o, before)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("write status: %w", err)
	}
	l.wrote(o, before)
	if l.Changed != nil {
		l.Changed(ctx, before, o)
	}
	return nil
}

func (l *Loop[O, A]) wrote(o, before O) {
	if l.Writes != nil {
		l.Writes.Wrote(o, before.GetResourceVersion())
	}
}

// sameJSON compares two objects in the form the API server stores them (times in whole
// seconds, empty and absent alike), so a status planned with finer times than it is stored
// with is not written again on every pass.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// restore puts before's content back into o after a refused write.
func restore[O client.Object](o, before O) {
	if in, ok := any(before).(interface{ DeepCopyInto(O) }); ok {
		in.DeepCopyInto(o)
	}
}

// requeueOnConflict turns a write refused because the object changed since it was read into a
// quiet retry: the newer copy's event re-queues the object at once; the retry is a backstop.
func requeueOnConflict(ctx context.Context, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("The object changed since it was read; planning again", "err", err)
		return reconcile.Result{RequeueAfter: ownwrite.Retry}, nil
	}
	return reconcile.Result{}, err
}
