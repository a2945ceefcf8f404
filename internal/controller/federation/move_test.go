package federation

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestMovePhase moves backup members against a real API server (the members' CEL rules
// included), counting the patches sent.
func TestMovePhase(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var patches atomic.Int32
	c, err := client.NewWithWatch(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counted := interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, p, opts...)
		}})
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	create := func(name string, phase dpv1alpha1.BackupMemberPhase) *dpv1alpha1.VolumeBackupMember {
		t.Helper()
		m := &dpv1alpha1.VolumeBackupMember{
			ObjectMeta: NewMeta(&fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "bk", Namespace: "default", UID: "u1"}}, name, "default", t0),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "bk", K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb",
				Phase: phase, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}},
		}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	move := func(name string, from, to dpv1alpha1.BackupMemberPhase, spec map[string]any, now time.Time) (*dpv1alpha1.VolumeBackupMember, error) {
		ref := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if spec == nil {
			spec = map[string]any{}
		}
		spec["phase"] = to
		patches.Store(0)
		err := MovePhase(ctx, counted, c, ref, string(from), spec, now, func() bool { return ref.Spec.Phase == to })
		got := &dpv1alpha1.VolumeBackupMember{}
		if gerr := env.Client.Get(ctx, client.ObjectKeyFromObject(ref), got); gerr != nil {
			t.Fatal(gerr)
		}
		return got, err
	}
	t1 := t0.Add(time.Minute)

	// The agent and the steps write the member's status all along: a move planned before such a
	// write goes through in one patch (a lock on the resourceVersion would conflict, read and
	// patch again).
	t.Run("status written since the plan", func(t *testing.T) {
		m := create("status-since", dpv1alpha1.BackupMemberInitialize)
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Initialized", Status: metav1.ConditionTrue, Reason: "PauseReady"})
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		got, err := move(m.Name, dpv1alpha1.BackupMemberInitialize, dpv1alpha1.BackupMemberExecute, map[string]any{"backupTS": "100"}, t1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Phase != dpv1alpha1.BackupMemberExecute || got.Spec.BackupTS != "100" || PhaseSince(got) != t1 {
			t.Errorf("member spec %+v, step clock %s: want execute, backup ts 100, clock %s", got.Spec, PhaseSince(got), t1)
		}
		if n := patches.Load(); n != 1 {
			t.Errorf("%d patches, want 1", n)
		}
	})
	// A move repeated from a stale copy (the member already moved) changes nothing: the step
	// clock keeps the time of the first move.
	t.Run("repeated from a stale copy", func(t *testing.T) {
		m := create("repeated", dpv1alpha1.BackupMemberInitialize)
		if _, err := move(m.Name, dpv1alpha1.BackupMemberInitialize, dpv1alpha1.BackupMemberExecute, map[string]any{"backupTS": "100"}, t1); err != nil {
			t.Fatal(err)
		}
		got, err := move(m.Name, dpv1alpha1.BackupMemberInitialize, dpv1alpha1.BackupMemberExecute, map[string]any{"backupTS": "100"}, t1.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if PhaseSince(got) != t1 || got.Spec.Phase != dpv1alpha1.BackupMemberExecute {
			t.Errorf("phase %s, step clock %s after a repeated move: want execute since %s", got.Spec.Phase, PhaseSince(got), t1)
		}
	})
	// A move planned from a phase the member has left, to a phase it has not reached, is made
	// from the stored phase.
	t.Run("planned from an older phase", func(t *testing.T) {
		m := create("older", dpv1alpha1.BackupMemberExecute)
		got, err := move(m.Name, dpv1alpha1.BackupMemberInitialize, dpv1alpha1.BackupMemberTeardown, nil, t1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Phase != dpv1alpha1.BackupMemberTeardown || PhaseSince(got) != t1 {
			t.Errorf("phase %s since %s: want teardown since %s", got.Spec.Phase, PhaseSince(got), t1)
		}
		if n := patches.Load(); n != 2 {
			t.Errorf("%d patches, want 2 (refused, then from the stored phase)", n)
		}
	})
	// The members' rules still refuse a move backwards, with their message.
	t.Run("backwards", func(t *testing.T) {
		m := create("backwards", dpv1alpha1.BackupMemberTeardown)
		got, err := move(m.Name, dpv1alpha1.BackupMemberTeardown, dpv1alpha1.BackupMemberExecute, nil, t1)
		if err == nil || !strings.Contains(err.Error(), "phase cannot go back from teardown") {
			t.Errorf("move back from teardown: %v, want the member's rule", err)
		}
		if got.Spec.Phase != dpv1alpha1.BackupMemberTeardown {
			t.Errorf("phase %s, want teardown", got.Spec.Phase)
		}
	})
}
