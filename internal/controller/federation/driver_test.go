package federation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

type testAction struct{ kind, cluster string }

func (a testAction) Describe() (string, string) { return a.kind, a.cluster }

// TestApplyAllRunsPlanesAtOnce: one plane's actions keep their order, different planes do not
// wait for each other (dp1's first action can only finish once dp2's has started), and a
// failing plane neither stops the others nor goes unreported.
func TestApplyAllRunsPlanesAtOnce(t *testing.T) {
	dp2Started := make(chan struct{})
	var mu sync.Mutex
	var applied []testAction
	d := &Driver[*fedv1alpha1.VolumeBackup, testAction]{
		Recorder: events.NewFakeRecorder(10),
		Apply: func(_ context.Context, _ *fedv1alpha1.VolumeBackup, a testAction, _ time.Time) error {
			switch {
			case a.cluster == "dp2" && a.kind == "first":
				close(dp2Started)
			case a.cluster == "dp1" && a.kind == "first":
				select {
				case <-dp2Started:
				case <-time.After(5 * time.Second):
					return errors.New("dp2 did not start while dp1 was applying: the planes ran one after another")
				}
			case a.cluster == "dp3":
				return errors.New("dp3 is down")
			}
			mu.Lock()
			applied = append(applied, a)
			mu.Unlock()
			return nil
		},
	}
	actions := []testAction{{"first", "dp1"}, {"second", "dp1"}, {"first", "dp2"}, {"first", "dp3"}, {"second", "dp2"}}
	err := d.applyAll(context.Background(), &fedv1alpha1.VolumeBackup{}, actions, time.Now())
	if err == nil || err.Error() != "first in dp3: dp3 is down" {
		t.Errorf("err = %v, want dp3's failure", err)
	}
	for _, cluster := range []string{"dp1", "dp2"} {
		var kinds []string
		for _, a := range applied {
			if a.cluster == cluster {
				kinds = append(kinds, a.kind)
			}
		}
		if !slices.Equal(kinds, []string{"first", "second"}) {
			t.Errorf("%s applied %v, want first then second", cluster, kinds)
		}
	}
}

// fakeBackup is a VolumeBackup with the driver's finalizer, in a fake client with a status
// subresource.
func fakeBackup(t *testing.T) (*fedv1alpha1.VolumeBackup, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := fedv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "u1", Finalizers: []string{"f"}}}
	return b, fake.NewClientBuilder().WithScheme(scheme).WithObjects(b).WithStatusSubresource(b).Build()
}

// lagging serves Get from a copy taken before the driver's own write while lag is set, as an
// informer cache does until the write's watch event arrives.
type lagging struct {
	client.Client
	lag   bool
	stale *fedv1alpha1.VolumeBackup
}

func (l *lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if l.lag {
		l.stale.DeepCopyInto(obj.(*fedv1alpha1.VolumeBackup))
		return nil
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// TestACacheThatPredatesAWriteChangesNothing: a pass that reads the object as it was before
// the driver's last status write writes nothing and counts no second phase change, with the
// skip of stale copies (ownwrite, an optimisation) and without it (the status write is locked
// to the version it was planned from, and the API server refuses it). Both end the same.
func TestACacheThatPredatesAWriteChangesNothing(t *testing.T) {
	for _, skip := range []bool{true, false} {
		b, fc := fakeBackup(t)
		before := &fedv1alpha1.VolumeBackup{}
		if err := fc.Get(context.Background(), client.ObjectKeyFromObject(b), before); err != nil {
			t.Fatal(err)
		}
		c := &lagging{Client: fc, stale: before}
		decided, phaseChanges := 0, 0
		var writes []string
		d := &Driver[*fedv1alpha1.VolumeBackup, testAction]{
			Name: "test", Finalizer: "f", Client: c, Recorder: events.NewFakeRecorder(10), noSkip: !skip,
			New:                func() *fedv1alpha1.VolumeBackup { return &fedv1alpha1.VolumeBackup{} },
			ObservedGeneration: func(b *fedv1alpha1.VolumeBackup) *int64 { return &b.Status.ObservedGeneration },
			Phase:              func(b *fedv1alpha1.VolumeBackup) string { return string(b.Status.Phase) },
			Failed:             func(*fedv1alpha1.VolumeBackup) bool { return false },
			Message:            func(*fedv1alpha1.VolumeBackup) string { return "" },
			OnPhase:            func(*fedv1alpha1.VolumeBackup, string) { phaseChanges++ },
			OnWrite: func(old, b *fedv1alpha1.VolumeBackup) {
				writes = append(writes, string(old.Status.Phase)+"→"+string(b.Status.Phase))
			},
			Apply: func(context.Context, *fedv1alpha1.VolumeBackup, testAction, time.Time) error { return nil },
			Decide: func(_ context.Context, b *fedv1alpha1.VolumeBackup, _ time.Time) (Decision[*fedv1alpha1.VolumeBackup, testAction], error) {
				decided++
				// The planner moves the phase on by one each pass, as a plan from an
				// older copy would plan the step already taken.
				next := fedv1alpha1.VolumeBackupRunning
				if b.Status.Phase == fedv1alpha1.VolumeBackupRunning {
					next = fedv1alpha1.VolumeBackupComplete
				}
				return Decision[*fedv1alpha1.VolumeBackup, testAction]{SetStatus: func(b *fedv1alpha1.VolumeBackup) { b.Status.Phase = next }}, nil
			},
		}
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}
		wantDecided := 2
		if !skip {
			wantDecided = 3 // the stale pass plans, and its write is refused
		}
		for i, lag := range []bool{false, true, false} {
			c.lag = lag
			if _, err := d.Reconcile(context.Background(), req); err != nil {
				t.Fatalf("skip=%v: reconcile %d: %v", skip, i, err)
			}
		}
		var got fedv1alpha1.VolumeBackup
		if err := fc.Get(context.Background(), req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != fedv1alpha1.VolumeBackupComplete || phaseChanges != 2 || decided != wantDecided {
			t.Errorf("skip=%v: phase %s after %d phase changes and %d plans; want Complete after 2 changes and %d plans",
				skip, got.Status.Phase, phaseChanges, decided, wantDecided)
		}
		if !slices.Equal(writes, []string{"→Running", "Running→Complete"}) {
			t.Errorf("skip=%v: OnWrite saw %q, want each written status once with the one it replaced", skip, writes)
		}
	}
}
