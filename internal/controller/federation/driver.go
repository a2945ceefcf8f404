package federation

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fedbr/fedbr/internal/loop"
	"github.com/fedbr/fedbr/internal/ownwrite"
	"github.com/fedbr/fedbr/internal/plane"
)

// Action is one planned change to a member, described for Events.
type Action interface {
	// Describe names the action and the data plane it acts in.
	Describe() (kind, cluster string)
}

// Decision is what a controller's observe-and-plan step returns to the Driver.
type Decision[O client.Object, A Action] = loop.Decision[O, A]

// Driver is what both federation controllers share around the reconcile skeleton (loop.Loop):
// the watches of every data plane's members, the actions applied plane by plane, and the
// Events and metrics of a phase change. What differs per kind is in the funcs.
type Driver[O client.Object, A Action] struct {
	// Name is the controller's name; Finalizer the finalizer it keeps.
	Name, Finalizer string
	Client          client.Client
	Planes          *plane.Set
	Recorder        events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// New returns an empty object; NewList an empty list of them.
	New     func() O
	NewList func() client.ObjectList
	// Decide observes the members and calls the planner.
	Decide func(ctx context.Context, o O, now time.Time) (Decision[O, A], error)
	// Apply applies one action idempotently.
	Apply func(ctx context.Context, o O, a A, now time.Time) error
	// ObservedGeneration points at the status's observedGeneration.
	ObservedGeneration func(O) *int64
	// Phase reads the one-word phase of the status, Failed says whether it is a failure (a Warning Event),
	// and Message is what the status says about it now (for the phase-change Event).
	Phase   func(O) string
	Failed  func(O) bool
	Message func(O) string
	// OnPhase is called once per phase change written (metrics).
	OnPhase func(o O, before string)
	// OnWrite is called after every status write, with the object as it was stored before and
	// as written (metrics of what the write added).
	OnWrite func(old, o O)
	// Related, when set, maps an event of one object of the kind to other objects of the kind
	// whose decisions depend on it (a backup waiting for another's pause).
	Related handler.MapFunc
	// Also are other control-plane kinds whose events map to objects of this kind (a
	// VolumeRestore to the VolumeBackup it verifies).
	Also []Also

	ctrl controller.Controller
	// writes skips a pass from a cached copy that predates this driver's last write; an
	// optimisation only (loop.Loop locks every write to the version it planned from).
	writes ownwrite.Tracker
	// noSkip turns that optimisation off (tests show the result is the same without it).
	noSkip bool
}

// Also maps the events of one more control-plane kind to the objects of the driver's kind.
type Also struct {
	Kind client.Object
	Map  handler.MapFunc
}

// SetupWithManager registers the controller. Member watches are added per plane once its cache
// has synced (Watch); a plane's reachability change re-queues every object.
func (d *Driver[O, A]) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(d.New()).
		Named(d.Name).
		WatchesRawSource(source.Channel(d.Planes.Subscribe(), handler.EnqueueRequestsFromMapFunc(d.all)))
	if d.Related != nil {
		b = b.Watches(d.New(), handler.EnqueueRequestsFromMapFunc(d.Related))
	}
	for _, a := range d.Also {
		b = b.Watches(a.Kind, handler.EnqueueRequestsFromMapFunc(a.Map))
	}
	c, err := b.Build(d)
	d.ctrl = c
	return err
}

// Watch maps every event of member kind M in plane p to its owner, so a member's progress is
// acted on at once.
func Watch[M client.Object, O client.Object, A Action](d *Driver[O, A], p *plane.Plane, proto M) error {
	return d.ctrl.Watch(source.Kind(p.Cluster.GetCache(), proto,
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, m M) []reconcile.Request { return OwnerRequest(m) })))
}

// all enqueues every object of the kind.
func (d *Driver[O, A]) all(ctx context.Context, _ client.Object) []reconcile.Request {
	list := d.NewList()
	if err := d.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing objects to re-check after a data plane change", "controller", d.Name)
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(co)})
		}
		return nil
	})
	return out
}

// Reconcile drives one object through the reconcile skeleton.
func (d *Driver[O, A]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	l := loop.Loop[O, A]{
		Finalizer: d.Finalizer, Client: d.Client, New: d.New, Decide: d.Decide, Now: d.Now,
		ObservedGeneration: d.ObservedGeneration,
		Apply:              d.applyAll,
		Changed:            d.phaseChanged,
	}
	if !d.noSkip {
		l.Writes = &d.writes
	}
	return l.Reconcile(ctx, req)
}

// applyAll applies the actions: those of one data plane in the order planned, the planes at
// once. Each plane is its own API server, and a signal the planner gives every member (the
// backup ts, teardown) should reach the last plane as soon as the first, not one round trip
// per plane later. The first failure is returned; the other planes' actions still ran.
func (d *Driver[O, A]) applyAll(ctx context.Context, o O, actions []A, now time.Time) error {
	var order []string
	byCluster := map[string][]A{}
	for _, a := range actions {
		_, cluster := a.Describe()
		if _, ok := byCluster[cluster]; !ok {
			order = append(order, cluster)
		}
		byCluster[cluster] = append(byCluster[cluster], a)
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, cluster := range order {
		wg.Go(func() {
			for _, a := range byCluster[cluster] {
				kind, _ := a.Describe()
				ctrl.LoggerFrom(ctx).Info("Applying", "action", kind, "cluster", cluster)
				start := time.Now()
				err := d.Apply(ctx, o, a, now)
				ctrl.LoggerFrom(ctx).V(1).Info("Applied", "action", kind, "cluster", cluster, "took", time.Since(start), "err", err)
				if err != nil {
					d.Recorder.Eventf(o, nil, "Warning", "MemberUpdateFailed", kind, "%s in %s: %v", kind, cluster, err)
					errs[i] = fmt.Errorf("%s in %s: %w", kind, cluster, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// phaseChanged runs after every status write: OnWrite, then, for a phase change, a log line, an
// Event (Warning for a failure) and OnPhase.
func (d *Driver[O, A]) phaseChanged(ctx context.Context, old, o O) {
	if d.OnWrite != nil {
		d.OnWrite(old, o)
	}
	before := d.Phase(old)
	if before == d.Phase(o) {
		return
	}
	ctrl.LoggerFrom(ctx).Info("Phase changed", "from", before, "to", d.Phase(o))
	kind := "Normal"
	if d.Failed(o) {
		kind = "Warning"
	}
	d.Recorder.Eventf(o, nil, kind, d.Phase(o), "Phase", "%s", d.Message(o))
	if d.OnPhase != nil {
		d.OnPhase(o, before)
	}
}
