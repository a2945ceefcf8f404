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

// TestReconcileSkipsACacheThatPredatesItsWrite: a reconcile that reads the object as it was
// before the driver's last status write neither plans nor writes, so a phase change is
// written and counted once; once the cache shows the write, planning resumes.
func TestReconcileSkipsACacheThatPredatesItsWrite(t *testing.T) {
	b, fc := fakeBackup(t)
	before := &fedv1alpha1.VolumeBackup{}
	if err := fc.Get(context.Background(), client.ObjectKeyFromObject(b), before); err != nil {
		t.Fatal(err)
	}
	c := &lagging{Client: fc, stale: before}
	decided, phaseChanges := 0, 0
	d := &Driver[*fedv1alpha1.VolumeBackup, testAction]{
		Name: "test", Finalizer: "f", Client: c, Recorder: events.NewFakeRecorder(10),
		New:     func() *fedv1alpha1.VolumeBackup { return &fedv1alpha1.VolumeBackup{} },
		Phase:   func(b *fedv1alpha1.VolumeBackup) string { return string(b.Status.Phase) },
		Failed:  func(*fedv1alpha1.VolumeBackup) bool { return false },
		Message: func(*fedv1alpha1.VolumeBackup) string { return "" },
		OnPhase: func(*fedv1alpha1.VolumeBackup, string) { phaseChanges++ },
		Decide: func(context.Context, *fedv1alpha1.VolumeBackup, time.Time) (Decision[*fedv1alpha1.VolumeBackup, testAction], error) {
			decided++
			return Decision[*fedv1alpha1.VolumeBackup, testAction]{SetStatus: func(b *fedv1alpha1.VolumeBackup) {
				b.Status.Phase = fedv1alpha1.VolumeBackupComplete
			}}, nil
		},
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}
	for i, step := range []struct {
		lag                          bool
		wantDecided, wantPhaseChange int
	}{
		{false, 1, 1}, // plans and writes Complete
		{true, 1, 1},  // the cache still shows the object before that write: nothing happens
		{false, 2, 1}, // the cache caught up: plans again, nothing new to write
	} {
		c.lag = step.lag
		res, err := d.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if decided != step.wantDecided || phaseChanges != step.wantPhaseChange {
			t.Errorf("reconcile %d: decided %d times, %d phase changes; want %d, %d", i, decided, phaseChanges, step.wantDecided, step.wantPhaseChange)
		}
		if step.lag && res.RequeueAfter == 0 {
			t.Errorf("reconcile %d: a stale read must be retried", i)
		}
	}
}

// TestReconcileWritesStatusWhileActionsRun: the status write does not wait for the members'
// writes (an action here can only finish once the status is written), and an action that fails
// is reported while the status it went out with stays written, for the next pass to plan the
// action again.
func TestReconcileWritesStatusWhileActionsRun(t *testing.T) {
	b, fc := fakeBackup(t)
	statusWritten := func() bool {
		var got fedv1alpha1.VolumeBackup
		return fc.Get(context.Background(), client.ObjectKeyFromObject(b), &got) == nil && got.Status.Phase == fedv1alpha1.VolumeBackupSnapshotsCreated
	}
	d := &Driver[*fedv1alpha1.VolumeBackup, testAction]{
		Name: "test", Finalizer: "f", Client: fc, Recorder: events.NewFakeRecorder(10),
		New:     func() *fedv1alpha1.VolumeBackup { return &fedv1alpha1.VolumeBackup{} },
		Phase:   func(b *fedv1alpha1.VolumeBackup) string { return string(b.Status.Phase) },
		Failed:  func(*fedv1alpha1.VolumeBackup) bool { return false },
		Message: func(*fedv1alpha1.VolumeBackup) string { return "" },
		Decide: func(context.Context, *fedv1alpha1.VolumeBackup, time.Time) (Decision[*fedv1alpha1.VolumeBackup, testAction], error) {
			return Decision[*fedv1alpha1.VolumeBackup, testAction]{
				Actions:   []testAction{{"ResumeGC", "dp1"}, {"SetPhase", "dp2"}},
				SetStatus: func(b *fedv1alpha1.VolumeBackup) { b.Status.Phase = fedv1alpha1.VolumeBackupSnapshotsCreated },
			}, nil
		},
		Apply: func(_ context.Context, _ *fedv1alpha1.VolumeBackup, a testAction, _ time.Time) error {
			if a.cluster == "dp2" {
				return errors.New("dp2 is down")
			}
			for deadline := time.Now().Add(5 * time.Second); !statusWritten(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					return errors.New("the status was not written while the actions ran")
				}
			}
			return nil
		},
	}
	_, err := d.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	if err == nil || err.Error() != "SetPhase in dp2: dp2 is down" {
		t.Errorf("err = %v, want only dp2's failure", err)
	}
	if !statusWritten() {
		t.Error("the status was not written")
	}
}
