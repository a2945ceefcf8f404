package report_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/testenv"
)

type progress struct {
	Phase    string    `json:"phase"`
	Done     int       `json:"done"`
	BackupTS uint64    `json:"backupTS,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Extra    string    `json:"extra,omitempty"` // not a field of a step report: dropped
}

// TestMemberStepWriters runs two steps' reporters against a real API server: each owns its own
// entry of the member's status.steps (server-side apply, field manager fedbr-br-<step>), neither
// drops the other's, and the agent's conditions survive them.
func TestMemberStepWriters(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	m := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: "bk-dp1", Namespace: "default"},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "bk", K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb",
			Phase: dpv1alpha1.BackupMemberInitialize, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}},
	}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Armed", Status: metav1.ConditionTrue, Reason: "Agent"})
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	start := func(step string) *report.Reporter {
		sink, err := report.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember"), "volumebackupmembers",
			"default", m.Name, step)
		if err != nil {
			t.Fatal(err)
		}
		r, err := report.New(report.Options{Command: step, Sink: sink, Log: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	since := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	pauseR, snapR := start("pause"), start("snapshot")
	// Interleaved writes: neither may drop the other's entry.
	pauseR.Update("Ready", progress{Phase: "Ready", BackupTS: 470802380936708097, Since: since, Extra: "x"})
	snapR.Update("Starting", progress{Phase: "Starting"})
	snapR.Update("Waiting", progress{Phase: "Waiting", Done: 1})
	pauseR.Update("Stopped", progress{Phase: "Stopped", BackupTS: 470802380936708097, Since: since})
	if err := pauseR.Result(ctx, map[string]int{"stores": 3}); err != nil {
		t.Fatal(err)
	}
	snapR.Update("Completed", progress{Phase: "Completed", Done: 2})
	if err := snapR.Result(ctx, map[string]string{"backupID": "b1"}); err != nil {
		t.Fatal(err)
	}

	var got dpv1alpha1.VolumeBackupMember
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	p, ok := dpv1alpha1.Step(got.Status.Steps, "pause")
	if !ok || p.Phase != "Stopped" || p.BackupTS != 470802380936708097 /* a TSO: exact, never through a float */ || p.Since == nil || !p.Since.Equal(&metav1.MicroTime{Time: since.Truncate(time.Microsecond)}) {
		t.Errorf("pause entry %+v", p)
	}
	var pr map[string]int
	if p.Result == nil || json.Unmarshal(p.Result.Raw, &pr) != nil || pr["stores"] != 3 {
		t.Errorf("pause result %v", p.Result)
	}
	s, ok := dpv1alpha1.Step(got.Status.Steps, "snapshot")
	if !ok || s.Phase != "Completed" || s.Done != 2 || s.Result == nil {
		t.Errorf("snapshot entry %+v", s)
	}
	if len(got.Status.Steps) != 2 {
		t.Errorf("steps %+v, want pause and snapshot", got.Status.Steps)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, "Armed") {
		t.Errorf("the agent's condition was dropped: %+v", got.Status.Conditions)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers["fedbr-br-pause.result"] || !managers["fedbr-br-snapshot.result"] {
		t.Errorf("field managers %v, want fedbr-br-pause.result and fedbr-br-snapshot.result (each result under its own)", managers)
	}
}

// TestMemberStatusIsBounded: the API server refuses a member status padded beyond the CRD's
// bounds (an error longer than MaxStepError, more steps than a restore can have, a pause
// identity of more schedulers than PD has), and a step's own report of a long error still lands,
// cut to the bound at a rune boundary.
func TestMemberStatusIsBounded(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: "bounded", Namespace: "default"},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "bk", K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb",
			Phase: dpv1alpha1.BackupMemberInitialize, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}},
	}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		steps func() []dpv1alpha1.StepReport
		field string
	}{
		{"an error past MaxStepError", func() []dpv1alpha1.StepReport {
			return []dpv1alpha1.StepReport{{Name: "pause", Phase: "Failed", Error: strings.Repeat("x", dpv1alpha1.MaxStepError+1)}}
		}, "status.steps[0].error"},
		{"4097 steps", func() []dpv1alpha1.StepReport {
			steps := make([]dpv1alpha1.StepReport, 4097)
			for i := range steps {
				steps[i].Name = "warmup-" + strconv.Itoa(i)
			}
			return steps
		}, "status.steps"},
		{"65 paused schedulers", func() []dpv1alpha1.StepReport {
			return []dpv1alpha1.StepReport{{Name: "pause", PausedSchedulers: make([]string, 65)}}
		}, "status.steps[0].pausedSchedulers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cur dpv1alpha1.VolumeBackupMember
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Status.Steps = tc.steps()
			err := env.Client.Status().Update(ctx, &cur)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("padded status written: %v; want Invalid naming %s", err, tc.field)
			}
		})
	}

	sink, err := report.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember"), "volumebackupmembers", "default", m.Name, "pause")
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.New(report.Options{Command: "pause", Sink: sink, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", dpv1alpha1.MaxStepError) // two bytes a rune
	r.Update("Failed", struct {
		Phase string `json:"phase"`
		Error string `json:"error"`
	}{"Failed", long})
	if err := r.Result(ctx, map[string]string{"error": "see status"}); err != nil {
		t.Fatal(err)
	}
	var got dpv1alpha1.VolumeBackupMember
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	p, ok := dpv1alpha1.Step(got.Status.Steps, "pause")
	if !ok || p.Phase != "Failed" || len(p.Error) > dpv1alpha1.MaxStepError || !utf8.ValidString(p.Error) ||
		!strings.HasPrefix(long, strings.TrimSuffix(p.Error, report.CutSuffix)) || !strings.HasSuffix(p.Error, report.CutSuffix) {
		t.Errorf("pause entry: phase %q, error of %d bytes (valid UTF-8 %v) ending %q; want Failed, the error cut to at most %d bytes",
			p.Phase, len(p.Error), utf8.ValidString(p.Error), p.Error[max(0, len(p.Error)-40):], dpv1alpha1.MaxStepError)
	}
}

// TestAStatusLandingLateKeepsTheResult: a status write the API server stores after the result
// (sent before it, abandoned by its client, carried on by the server) leaves the result where
// it is: the result has a field manager of its own.
func TestAStatusLandingLateKeepsTheResult(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "r-dp2", Namespace: "default"},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r", K8sClusterName: "dp2", TCName: "basic", TCNamespace: "tidb",
			Phase: dpv1alpha1.RestoreMemberRestoreVolume, Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}},
	}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	sink, err := report.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind("VolumeRestoreMember"), "volumerestoremembers", "default", r.Name, "restore-volumes")
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Apply(ctx, map[string]string{"restore-volumes": `{"phase":"Starting"}`}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Apply(ctx, map[string]string{"restore-volumes": `{"phase":"Completed","volumes":3}`, "restore-volumes.result": `{"volumes":3}`}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Apply(ctx, map[string]string{"restore-volumes": `{"phase":"Restoring","volumes":2}`}); err != nil { // the late one
		t.Fatal(err)
	}
	got := &dpv1alpha1.VolumeRestoreMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
		t.Fatal(err)
	}
	s, ok := dpv1alpha1.Step(got.Status.Steps, "restore-volumes")
	if !ok || s.Result == nil || string(s.Result.Raw) != `{"volumes":3}` {
		t.Fatalf("restore-volumes entry %+v: a status stored after the result took the result away", s)
	}
	if s.Phase != "Restoring" {
		t.Errorf("phase %q, want the late status's (its fields are the status writer's)", s.Phase)
	}
}

// TestAReRunRemovesAnEarlierResult: a step's re-run (a Job retry after a run that reported its
// result and then died) removes that result with its first status write, so the agent never
// takes the earlier run's result for the re-run's.
func TestAReRunRemovesAnEarlierResult(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "r-dp3", Namespace: "default"},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r", K8sClusterName: "dp3", TCName: "basic", TCNamespace: "tidb",
			Phase: dpv1alpha1.RestoreMemberRestoreVolume, Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}},
	}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	run := func() *report.MemberStep {
		sink, err := report.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind("VolumeRestoreMember"), "volumerestoremembers", "default", r.Name, "restore-volumes")
		if err != nil {
			t.Fatal(err)
		}
		return sink
	}
	if err := run().Apply(ctx, map[string]string{"restore-volumes": `{"phase":"Completed"}`, "restore-volumes.result": `{"volumes":3}`}); err != nil {
		t.Fatal(err)
	}
	again := run()
	for _, phase := range []string{"Starting", "Restoring"} {
		if err := again.Apply(ctx, map[string]string{"restore-volumes": `{"phase":"` + phase + `"}`}); err != nil {
			t.Fatal(err)
		}
	}
	got := &dpv1alpha1.VolumeRestoreMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
		t.Fatal(err)
	}
	if s, ok := dpv1alpha1.Step(got.Status.Steps, "restore-volumes"); !ok || s.Result != nil || s.Phase != "Restoring" {
		t.Fatalf("the re-run's entry %+v: want its own phase and no result of the earlier run", s)
	}
}
