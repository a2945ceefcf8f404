package br

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/testenv"
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

// TestCommandsReportToOneConfigMap is the agent's view of two Jobs sharing the ConfigMap it
// created: `br pause` against a PD/TiKV double and `br clean` run while the pause holds both
// report through a real API server; each command's keys carry its status and result JSON, and
// neither clobbers the other's keys or the agent's.
func TestCommandsReportToOneConfigMap(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: "default", Name: "vb-1-east"}
	agentCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: map[string]string{"agent": "keep"}}
	if err := env.Client.Create(ctx, agentCM); err != nil {
		t.Fatal(err)
	}
	reportFlags := []string{"--status-configmap", key.Name, "--status-configmap-namespace", key.Namespace, "--kubeconfig", env.Kubeconfig}
	get := func() map[string]string {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}

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
	var ready pause.Status
	for ready.Phase != pause.PhaseReady {
		select {
		case o := <-pauseDone:
			t.Fatalf("pause exited before Ready: %v\n%s", o.err, o.stderr)
		case <-ctx.Done():
			t.Fatalf("the ConfigMap never said Ready: %v", get())
		case <-time.After(100 * time.Millisecond):
		}
		if doc, ok := get()["pause"]; ok {
			if err := json.Unmarshal([]byte(doc), &ready); err != nil {
				t.Fatalf("pause key %q: %v", doc, err)
			}
		}
	}
	if ready.BackupTS == 0 || ready.Stores != 3 || ready.GCPausedAt.IsZero() || !ready.LiftedAt.IsZero() {
		t.Errorf("Ready status %+v: want backupTS, 3 stores, gcPausedAt and no liftedAt", ready)
	}

	// A second command writes its keys to the same ConfigMap while the pause holds.
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

	// The agent asks for the release through the ConfigMap (no signal): the pause lifts and exits.
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, key, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["release"] = "true"
	if err := env.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-pauseDone:
		if o.err != nil {
			t.Fatalf("pause after the release key: %v\n%s", o.err, o.stderr)
		}
	case <-ctx.Done():
		t.Fatal("the pause did not lift on the release key")
	}
	data := get()
	if data["agent"] != "keep" {
		t.Errorf("the agent's key was clobbered: %v", data)
	}
	var stopped, result pause.Status
	if err := json.Unmarshal([]byte(data["pause"]), &stopped); err != nil {
		t.Fatalf("pause = %q: %v", data["pause"], err)
	}
	if err := json.Unmarshal([]byte(data["pause.result"]), &result); err != nil {
		t.Fatalf("pause.result = %q: %v", data["pause.result"], err)
	}
	if stopped.Phase != pause.PhaseStopped || stopped.BackupTS != ready.BackupTS || !stopped.GCPausedAt.Equal(ready.GCPausedAt) ||
		stopped.LiftedAt.Before(stopped.GCPausedAt) {
		t.Errorf("pause = %+v, want Stopped with the Ready backupTS, gcPausedAt and a liftedAt after it", stopped)
	}
	if result != stopped {
		t.Errorf("pause.result = %+v, want the final status %+v", result, stopped)
	}
	var cleanStatus clean.Status
	var cleanResult clean.Summary
	if err := json.Unmarshal([]byte(data["clean"]), &cleanStatus); err != nil || cleanStatus.Phase != clean.PhaseCompleted {
		t.Errorf("clean = %q (%v), want phase Completed", data["clean"], err)
	}
	if err := json.Unmarshal([]byte(data["clean.result"]), &cleanResult); err != nil || cleanResult.Result != "cleaned" {
		t.Errorf("clean.result = %q (%v), want result cleaned", data["clean.result"], err)
	}
	if len(data) != 6 {
		t.Errorf("keys = %v, want agent, release, pause, pause.result, clean, clean.result", data)
	}
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

// TestPauseTakesItsSignalsFromTheMember: a pause started with --member begins on the member's
// spec.startPause and lifts on its spec.resumeGC, the manager's writes, without the agent
// copying either into the status ConfigMap (the hop the member watch saves).
func TestPauseTakesItsSignalsFromTheMember(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b2", dpv1alpha1.BackupMemberInitialize)
	key := client.ObjectKey{Namespace: "default", Name: "fed-b2-status"}
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
	go func() {
		stderr, err := execute(ctx, "pause", "--pd", cl.PDAddr(), "--ttl", "5m", "--wait-start", "--watch-release",
			"--status-configmap", key.Name, "--status-configmap-namespace", key.Namespace, "--kubeconfig", env.Kubeconfig, "--member", m.Name)
		done <- outcome{stderr, err}
	}()
	phase := func() pause.Phase {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, key, &cm); err != nil {
			return ""
		}
		var st pause.Status
		_ = json.Unmarshal([]byte(cm.Data["pause"]), &st)
		return st.Phase
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case o := <-done:
				t.Fatalf("pause exited while waiting for %s: %v\n%s", what, o.err, o.stderr)
			case <-ctx.Done():
				t.Fatalf("never %s (phase %q)", what, phase())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// Armed, it holds nothing until the member says start.
	time.Sleep(time.Second)
	if p := phase(); p == pause.PhaseReady || p == pause.PhaseGCPaused {
		t.Fatalf("the pause began before the go: phase %s", p)
	}
	setSpec := func(f func(*dpv1alpha1.VolumeBackupMember)) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		f(m)
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	setSpec(func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.StartPause = true })
	waitFor("Ready on the member's startPause", func() bool { return phase() == pause.PhaseReady })
	// The pause stamps its ready ts into the member's status itself.
	var readyTS uint64
	waitFor("the ready ts stamped on the member", func() bool {
		var cm corev1.ConfigMap
		var st pause.Status
		if err := env.Client.Get(ctx, key, &cm); err == nil {
			_ = json.Unmarshal([]byte(cm.Data["pause"]), &st)
		}
		readyTS = st.BackupTS
		got := &dpv1alpha1.VolumeBackupMember{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(m), got) == nil && readyTS != 0 &&
			got.Status.PauseReadyTS == strconv.FormatUint(readyTS, 10)
	})
	setSpec(func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true })
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("pause: %v\n%s", o.err, o.stderr)
		}
		if !strings.Contains(o.stderr, "taken from volumebackupmembers default/fed-b2") {
			t.Errorf("the log does not say the signals came from the member:\n%s", o.stderr)
		}
	case <-ctx.Done():
		t.Fatal("the pause did not lift on the member's resumeGC")
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, key, &cm); err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["start"]; ok {
		t.Error("the ConfigMap has the start key: the test proves nothing about the member path")
	}
	if _, ok := cm.Data["release"]; ok {
		t.Error("the ConfigMap has the release key: the test proves nothing about the member path")
	}
	if p := phase(); p != pause.PhaseStopped {
		t.Errorf("final phase %q, want %s", p, pause.PhaseStopped)
	}
}

// TestSnapshotStepStampsItsMember: the stamp lands in the member's status through a real API
// server and survives the agent's status writes from a copy that does not know it (the
// agent's merge patches carry only what it changed).
func TestSnapshotStepStampsItsMember(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := createMember(ctx, t, env, "b3", dpv1alpha1.BackupMemberExecute)
	stale := m.DeepCopy() // the agent's cached copy, from before the stamp

	flags := session.ReportFlags{ConfigMap: "fed-b3-status", Namespace: "default", Kubeconfig: env.Kubeconfig, Member: m.Name}
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	var logs []string
	flags.StampMember(ctx, "snapshot", map[string]any{"snapshotsStartedAt": at.Format(metav1.RFC3339Micro)},
		func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) })
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "Stamped [snapshotsStartedAt] into the member's status in ") {
		t.Fatalf("stamp failed: %v", logs)
	}

	orig := stale.DeepCopy()
	stale.Status.Phase = "Snapshotting"
	stale.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.BackupMemberArmedCondition, Status: metav1.ConditionTrue, Reason: "SnapshotArmed",
		LastTransitionTime: metav1.NewTime(at)}}
	if err := env.Client.Status().Patch(ctx, stale, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.SnapshotsStartedAt == nil || !got.Status.SnapshotsStartedAt.Time.Equal(at) {
		t.Errorf("snapshotsStartedAt = %v, want %v", got.Status.SnapshotsStartedAt, at)
	}
	if got.Status.Phase != "Snapshotting" {
		t.Errorf("the agent's write was lost: phase %q", got.Status.Phase)
	}

	// Without --member nothing is written and nothing is logged.
	none := session.ReportFlags{ConfigMap: "fed-b3-status", Namespace: "default", Kubeconfig: env.Kubeconfig}
	none.StampMember(ctx, "snapshot", map[string]any{"snapshotsStartedAt": "x"}, func(string, ...any) { t.Error("logged without --member") })
}
