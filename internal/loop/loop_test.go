package loop

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

type vb = fedv1alpha1.VolumeBackup

// setup returns a VolumeBackup at generation 2 whose status says it acted on generation 1,
// in a fake client with a status subresource, and a loop over it.
func setup(t *testing.T) (*vb, client.Client, *Loop[*vb, string]) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := fedv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := &vb{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Generation: 2}}
	b.Status.ObservedGeneration = 1
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(b).WithStatusSubresource(b).Build()
	l := &Loop[*vb, string]{
		Finalizer: "f", Client: c,
		New:                func() *vb { return &vb{} },
		ObservedGeneration: func(b *vb) *int64 { return &b.Status.ObservedGeneration },
	}
	return b, c, l
}

func get(t *testing.T, c client.Client, b *vb) *vb {
	t.Helper()
	got := &vb{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// plan is a Decide that plans actions and the phase, with observedGeneration as planners set it.
func plan(phase fedv1alpha1.VolumeBackupPhase, recordFirst bool, actions ...string) func(context.Context, *vb, time.Time) (Decision[*vb, string], error) {
	return func(_ context.Context, b *vb, _ time.Time) (Decision[*vb, string], error) {
		gen := b.Generation
		return Decision[*vb, string]{Actions: actions, RecordFirst: recordFirst, SetStatus: func(b *vb) {
			b.Status.Phase, b.Status.ObservedGeneration = phase, gen
		}}, nil
	}
}

// TestObservedGenerationOnlyWhenActionsSucceeded: a pass whose action fails writes the status
// it planned (its conditions say what happened) with the observedGeneration it had, and returns
// the failure; the next pass, whose actions succeed, advances it. The finalizer is added first.
func TestObservedGenerationOnlyWhenActionsSucceeded(t *testing.T) {
	b, c, l := setup(t)
	l.Decide = plan(fedv1alpha1.VolumeBackupRunning, false, "create")
	fail := true
	l.Apply = func(context.Context, *vb, []string, time.Time) error {
		if fail {
			return errors.New("plane down")
		}
		return nil
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}
	if _, err := l.Reconcile(context.Background(), req); err == nil || err.Error() != "plane down" {
		t.Fatalf("err = %v, want the action's", err)
	}
	got := get(t, c, b)
	if got.Status.Phase != fedv1alpha1.VolumeBackupRunning || got.Status.ObservedGeneration != 1 || len(got.Finalizers) != 1 {
		t.Errorf("after a failed action: phase %q, observedGeneration %d, finalizers %v; want Running, 1, [f]",
			got.Status.Phase, got.Status.ObservedGeneration, got.Finalizers)
	}
	fail = false
	if _, err := l.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, b); got.Status.ObservedGeneration != 2 {
		t.Errorf("after the actions succeeded: observedGeneration %d, want 2", got.Status.ObservedGeneration)
	}
}

// TestRecordFirstWritesBeforeActing: with RecordFirst the actions run only once the status is
// stored; without it they run before the status write, which comes once, after them.
func TestRecordFirstWritesBeforeActing(t *testing.T) {
	for _, first := range []bool{true, false} {
		b, c, l := setup(t)
		l.Decide = plan(fedv1alpha1.VolumeBackupRunning, first, "start-pause")
		var storedWhenActing fedv1alpha1.VolumeBackupPhase
		l.Apply = func(ctx context.Context, o *vb, _ []string, _ time.Time) error {
			storedWhenActing = get(t, c, b).Status.Phase
			return nil
		}
		writes := 0
		l.Changed = func(context.Context, *vb, *vb) { writes++ }
		if _, err := l.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
		want, wantWrites := fedv1alpha1.VolumeBackupPhase(""), 1
		if first {
			want, wantWrites = fedv1alpha1.VolumeBackupRunning, 2 // the record, then observedGeneration
		}
		if storedWhenActing != want || writes != wantWrites {
			t.Errorf("recordFirst=%v: the actions saw phase %q stored, %d status writes; want %q, %d", first, storedWhenActing, writes, want, wantWrites)
		}
		if got := get(t, c, b); got.Status.Phase != fedv1alpha1.VolumeBackupRunning || got.Status.ObservedGeneration != 2 {
			t.Errorf("recordFirst=%v: stored phase %q, observedGeneration %d", first, got.Status.Phase, got.Status.ObservedGeneration)
		}
	}
}

// TestDeletionReleasesTheFinalizerAfterTheStatus: a deleted object keeps its finalizer until
// the plan says so; then the status is written and the finalizer released (the object goes).
func TestDeletionReleasesTheFinalizerAfterTheStatus(t *testing.T) {
	b, c, l := setup(t)
	l.Apply = func(context.Context, *vb, []string, time.Time) error { return nil }
	l.Decide = plan(fedv1alpha1.VolumeBackupRunning, false)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}
	if _, err := l.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), get(t, c, b)); err != nil {
		t.Fatal(err)
	}
	released := 0
	l.Released = func(context.Context, *vb) { released++ }
	l.Decide = func(ctx context.Context, b *vb, now time.Time) (Decision[*vb, string], error) {
		d, _ := plan(fedv1alpha1.VolumeBackupCleaning, false, "delete-members")(ctx, b, now)
		d.RemoveFinalizer = true
		return d, nil
	}
	if _, err := l.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), req.NamespacedName, &vb{}); err == nil || released != 1 {
		t.Errorf("after release: get err %v, released %d times; want gone, once", err, released)
	}
	if _, err := l.Reconcile(context.Background(), req); err != nil {
		t.Errorf("a pass on a gone object: %v", err)
	}
}

// TestRefusedFinalizerPatchActsOnNothing: when the finalizer patch is refused (the object changed
// since it was read), nothing is planned or acted on and no status is written; the pass is
// retried quietly.
func TestRefusedFinalizerPatchActsOnNothing(t *testing.T) {
	b, c, l := setup(t)
	l.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewConflict(schema.GroupResource{Group: fedv1alpha1.GroupVersion.Group, Resource: "volumebackups"}, b.Name, errors.New("changed"))
		},
	})
	decide := plan(fedv1alpha1.VolumeBackupRunning, true, "create")
	planned := false
	l.Decide = func(ctx context.Context, b *vb, now time.Time) (Decision[*vb, string], error) {
		planned = true
		return decide(ctx, b, now)
	}
	acted := false
	l.Apply = func(context.Context, *vb, []string, time.Time) error { acted = true; return nil }
	res, err := l.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	if err != nil || res.RequeueAfter == 0 {
		t.Errorf("result %+v, err %v; want a quiet retry", res, err)
	}
	if got := get(t, c, b); planned || acted || got.Status.Phase != "" || len(got.Finalizers) != 0 {
		t.Errorf("planned %v, acted %v, stored phase %q, finalizers %v; want nothing done", planned, acted, got.Status.Phase, got.Finalizers)
	}
}
