package report_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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
	if !managers["fedbr-br-pause"] || !managers["fedbr-br-snapshot"] {
		t.Errorf("field managers %v, want fedbr-br-pause and fedbr-br-snapshot", managers)
	}
}
