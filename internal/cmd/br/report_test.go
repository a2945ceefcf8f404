package br

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/testenv"
	"github.com/fedbr/fedbr/internal/tidb"
)

// execute runs `fedbr br ARGS…` and returns its stderr with the error.
func execute(ctx context.Context, args ...string) (string, error) {
	cmd := NewCmd()
	var stderr bytes.Buffer
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return stderr.String(), err
}

// createMember creates the VolumeBackupMember fed-<backup> in default, in phase.
func createMember(ctx context.Context, t *testing.T, env *testenv.Env, backup string, phase dpv1alpha1.BackupMemberPhase) *dpv1alpha1.VolumeBackupMember {
	t.Helper()
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: fedv1alpha1.MemberName(backup), Namespace: "default"},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: backup, K8sClusterName: "dp1", TCName: "basic", TCNamespace: "default",
			Phase: phase, Template: fedv1alpha1.VolumeBackupMemberSpec{
				StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: backup}}}}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// setSpec changes the member's spec as the manager does.
func setSpec(ctx context.Context, t *testing.T, env *testenv.Env, m *dpv1alpha1.VolumeBackupMember, f func(*dpv1alpha1.VolumeBackupMember)) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if err := env.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// step reads the member's report of step.
func step(ctx context.Context, t *testing.T, env *testenv.Env, m *dpv1alpha1.VolumeBackupMember, name string) (dpv1alpha1.StepReport, bool) {
	t.Helper()
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	return dpv1alpha1.Step(got.Status.Steps, name)
}

// TestCommandsReportToOneMember is the agent's view of two Jobs reporting in their member:
// `br pause` against a PD/TiKV double and `br clean` run while the pause holds each write their
// own entry of status.steps through a real API server, with their status and result, and
// neither clobbers the other's entry or the agent's conditions. The pause lifts on the member's
// spec.resumeGC, the manager's write, with no signal.
func TestCommandsReportToOneMember(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b1", dpv1alpha1.BackupMemberInitialize)
	agent := m.DeepCopy()
	agent.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.BackupMemberArmedCondition, Status: metav1.ConditionTrue, Reason: "SnapshotArmed",
		LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, agent); err != nil {
		t.Fatal(err)
	}
	reportFlags := []string{"--member", m.Name, "--member-namespace", m.Namespace, "--kubeconfig", env.Kubeconfig}

	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("m")}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	type outcome struct {
		stderr string
		err    error
	}
	pauseDone := make(chan outcome, 1)
	go func() {
		stderr, err := execute(runCtx, append([]string{"pause", "--pd", cl.PDAddr(), "--ttl", "5m", "--watch-release"}, reportFlags...)...)
		pauseDone <- outcome{stderr, err}
	}()

	// The agent watches; polling the API server stands in for its watch here.
	var ready dpv1alpha1.StepReport
	for ready.Phase != string(pause.PhaseReady) {
		select {
		case o := <-pauseDone:
			t.Fatalf("pause exited before Ready: %v\n%s", o.err, o.stderr)
		case <-ctx.Done():
			t.Fatalf("the member never said Ready: %+v", ready)
		case <-time.After(100 * time.Millisecond):
		}
		ready, _ = step(ctx, t, env, m, "pause")
	}
	if ready.BackupTS == 0 || ready.Stores != 3 || ready.GCPausedAt == nil || ready.LiftedAt != nil || ready.ReadyAt == nil {
		t.Errorf("Ready report %+v: want backupTS, 3 stores, gcPausedAt, readyAt and no liftedAt", ready)
	}
	if dpv1alpha1.PauseHeld(ready) != ready.BackupTS {
		t.Errorf("a Ready pause holds %d, want its backup ts %d", dpv1alpha1.PauseHeld(ready), ready.BackupTS)
	}

	// A second command writes its entry in the same member while the pause holds.
	awsdoubletest.Credentials(t)
	aws, err := awsdouble.Open(t.TempDir(), awsdouble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(aws)
	defer func() {
		hs.Close()
		_ = aws.Close()
	}()
	if stderr, err := execute(ctx, append([]string{"clean", "-s", t.TempDir(), "--region", "us-west-2", "--aws-endpoint", hs.URL,
		"--backup-outcome", "failed"}, reportFlags...)...); err != nil {
		t.Fatalf("clean: %v\n%s", err, stderr)
	}

	// The manager asks for the release in the member's spec: the pause lifts and exits.
	setSpec(ctx, t, env, m, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true })
	select {
	case o := <-pauseDone:
		if o.err != nil {
			t.Fatalf("pause after resumeGC: %v\n%s", o.err, o.stderr)
		}
		if !strings.Contains(o.stderr, "taken from volumebackupmembers default/fed-b1") {
			t.Errorf("the log does not say the release came from the member:\n%s", o.stderr)
		}
	case <-ctx.Done():
		t.Fatal("the pause did not lift on the member's resumeGC")
	}
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Conditions; len(c) != 1 || c[0].Type != dpv1alpha1.BackupMemberArmedCondition {
		t.Errorf("the agent's conditions were clobbered: %+v", c)
	}
	stopped, _ := dpv1alpha1.Step(got.Status.Steps, "pause")
	if stopped.Phase != string(pause.PhaseStopped) || stopped.BackupTS != ready.BackupTS || !stopped.GCPausedAt.Equal(ready.GCPausedAt) ||
		stopped.LiftedAt == nil || stopped.LiftedAt.Before(stopped.GCPausedAt) {
		t.Errorf("pause = %+v, want Stopped with the Ready backupTS, gcPausedAt and a liftedAt after it", stopped)
	}
	var result pause.Status
	if stopped.Result == nil || json.Unmarshal(stopped.Result.Raw, &result) != nil || result.Phase != pause.PhaseStopped || result.BackupTS != ready.BackupTS {
		t.Errorf("pause result %v, want the final status", stopped.Result)
	}
	cleanStep, _ := dpv1alpha1.Step(got.Status.Steps, "clean")
	var cleanResult clean.Summary
	if cleanStep.Phase != string(clean.PhaseCompleted) || cleanStep.Result == nil || json.Unmarshal(cleanStep.Result.Raw, &cleanResult) != nil ||
		cleanResult.Result != "cleaned" {
		t.Errorf("clean = %+v, want phase Completed and result cleaned", cleanStep)
	}
	if len(got.Status.Steps) != 2 {
		t.Errorf("steps = %+v, want pause and clean", got.Status.Steps)
	}
}

// TestPauseTakesItsSignalsFromTheMember: an armed pause begins on the member's spec.startPause,
// not before (its GC pin is later than the go), and lifts on its spec.resumeGC, the manager's
// writes.
func TestPauseTakesItsSignalsFromTheMember(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b2", dpv1alpha1.BackupMemberInitialize)
	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type outcome struct {
		stderr string
		err    error
	}
	done := make(chan outcome, 1)
	name, ns := m.Name, m.Namespace // m is read again below, as the manager changes it
	go func() {
		stderr, err := execute(ctx, "pause", "--pd", cl.PDAddr(), "--ttl", "5m", "--wait-start", "--watch-release",
			"--member", name, "--member-namespace", ns, "--kubeconfig", env.Kubeconfig)
		done <- outcome{stderr, err}
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case o := <-done:
				t.Fatalf("pause exited while waiting for %s: %v\n%s", what, o.err, o.stderr)
			case <-ctx.Done():
				t.Fatalf("never %s", what)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	goAt := time.Now()
	setSpec(ctx, t, env, m, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.StartPause = true })
	var ready dpv1alpha1.StepReport
	waitFor("Ready on the member's startPause", func() bool {
		ready, _ = step(ctx, t, env, m, "pause")
		return ready.Phase == string(pause.PhaseReady)
	})
	if ready.GCPausedAt == nil || ready.GCPausedAt.Time.Before(goAt) {
		t.Errorf("the pause pinned GC at %v, before the go at %v", ready.GCPausedAt, goAt)
	}
	setSpec(ctx, t, env, m, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true })
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("pause: %v\n%s", o.err, o.stderr)
		}
		if strings.Count(o.stderr, "taken from volumebackupmembers default/fed-b2") != 2 {
			t.Errorf("the log does not say both signals came from the member:\n%s", o.stderr)
		}
	case <-ctx.Done():
		t.Fatal("the pause did not lift on the member's resumeGC")
	}
	if s, _ := step(ctx, t, env, m, "pause"); s.Phase != string(pause.PhaseStopped) {
		t.Errorf("final phase %q, want %s", s.Phase, pause.PhaseStopped)
	}
}

// TestStepReportSurvivesTheAgentsWrites: a step's entry lands in the member's status through a
// real API server and survives the agent's status writes from a copy that does not know it
// (the agent's merge patches carry only what it changed).
func TestStepReportSurvivesTheAgentsWrites(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b3", dpv1alpha1.BackupMemberExecute)
	stale := m.DeepCopy() // the agent's cached copy, from before the report

	flags := session.ReportFlags{Namespace: "default", Kubeconfig: env.Kubeconfig, Member: m.Name}
	rep, err := flags.Reporter("snapshot", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	rep.Update("Started", map[string]any{"phase": "Started", "startedAt": at, "backupTS": uint64(470802380936708097)})
	if err := rep.Result(ctx, map[string]any{"resolvedTS": uint64(470802380936708097)}); err != nil {
		t.Fatal(err)
	}

	orig := stale.DeepCopy()
	stale.Status.Phase = "Snapshotting"
	stale.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.BackupMemberArmedCondition, Status: metav1.ConditionTrue, Reason: "SnapshotArmed",
		LastTransitionTime: metav1.NewTime(at)}}
	if err := env.Client.Status().Patch(ctx, stale, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	s, ok := step(ctx, t, env, m, "snapshot")
	if !ok || !dpv1alpha1.SnapshotsStarted(s) || !s.StartedAt.Time.Equal(at.Truncate(time.Microsecond)) || s.BackupTS != 470802380936708097 || s.Result == nil {
		t.Errorf("snapshot entry %+v, want startedAt %v, the backup ts and a result", s, at)
	}
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "Snapshotting" {
		t.Errorf("the agent's write was lost: phase %q", got.Status.Phase)
	}

	// Without --member nothing is reported.
	if rep, err := (&session.ReportFlags{}).Reporter("snapshot", t.Logf); rep != nil || err != nil {
		t.Errorf("a reporter without --member: %v, %v", rep, err)
	}
}

// TestPauseWithoutItsMemberLiftsAndFails: a pause told to watch a member for the release that
// it cannot read (here: no such member) lifts everything at once and fails, naming why, rather
// than hold what only a SIGTERM could release.
func TestPauseWithoutItsMemberLiftsAndFails(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stderr, err := execute(ctx, "pause", "--pd", cl.PDAddr(), "--ttl", "5m", "--watch-release",
		"--member", "fed-gone", "--member-namespace", "default", "--kubeconfig", env.Kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "--watch-release") || !strings.Contains(err.Error(), "cannot watch the member") {
		t.Fatalf("pause = %v, want a failure naming --watch-release and the member\n%s", err, stderr)
	}
	pc, err := pd.NewClientWithContext(ctx, []string{cl.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	held, err := tidb.Plaintext.ReadHeld(ctx, cl.PD.URL())
	if err != nil {
		t.Fatal(err)
	}
	if held.Any() {
		t.Errorf("the pause left %+v held", held)
	}
}
