package describe

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

var t0 = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

func micro(t time.Time) *metav1.MicroTime { m := metav1.NewMicroTime(t); return &m }

func TestProgress(t *testing.T) {
	for _, c := range []struct {
		name string
		s    dpv1alpha1.StepReport
		want string
	}{
		{"no progress reported", dpv1alpha1.StepReport{Name: "pause", Phase: "Ready"}, ""},
		{"snapshots: the percent reported, estimating from one read", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Waiting", Done: 10, Total: 40, Percent: 37.5, Since: micro(t0.Add(-30 * time.Second))},
			"10/40 snapshots completed, 37.5%, estimating"},
		{"completed: no estimate", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Completed", Done: 40, Total: 40, Percent: 100, Since: micro(t0.Add(-time.Minute))},
			"40/40 snapshots completed, 100.0%"},
		{"restore-volumes counts its volumes", dpv1alpha1.StepReport{Name: "restore-volumes", Phase: "Creating", Done: 3, Volumes: 6, Since: micro(t0.Add(-10 * time.Second))},
			"3/6 volumes (50%), about 10s left"},
		{"warm-up in bytes", dpv1alpha1.StepReport{Name: "warmup-0", Phase: "Reading", Done: 1 << 30, Total: 4 << 30, Since: micro(t0.Add(-time.Minute))},
			"1GiB of 4GiB read (25%), about 3m0s left"},
		{"a wait that has not moved for a while says since when", dpv1alpha1.StepReport{Name: "snapshot", Phase: "Waiting", Done: 10, Total: 40, Percent: 37.5,
			Since: micro(t0.Add(-3 * time.Hour)), ProgressAt: micro(t0.Add(-2*time.Hour - 20*time.Second))},
			"10/40 snapshots completed, 37.5%, estimating, no progress for 2h0m0s"},
		{"a warm-up that moved within the minute says nothing more", dpv1alpha1.StepReport{Name: "warmup-0", Phase: "Reading", Done: 1 << 30, Total: 4 << 30,
			Since: micro(t0.Add(-time.Minute)), ProgressAt: micro(t0.Add(-5 * time.Second))},
			"1GiB of 4GiB read (25%), about 3m0s left"},
		{"a warm-up stalled for minutes", dpv1alpha1.StepReport{Name: "warmup-0", Phase: "Reading", Done: 1 << 30, Total: 4 << 30,
			Since: micro(t0.Add(-time.Hour)), ProgressAt: micro(t0.Add(-10 * time.Minute))},
			"1GiB of 4GiB read (25%), about 3h0m0s left, no progress for 10m0s"},
		{"clean counts deletions", dpv1alpha1.StepReport{Name: "clean", Phase: "Deleting", Deleted: 5, Total: 10, Since: micro(t0.Add(-5 * time.Second))},
			"5/10 snapshots deleted (50%), about 5s left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Progress(c.s, nil, t0); got != c.want {
				t.Errorf("Progress = %q, want %q", got, c.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	v := &View{Kind: "VolumeBackup", Namespace: "default", Name: "nightly", Phase: "Running",
		Fields: []Field{{"Commit ts", "4711"}, {"Size", ""}},
		Conditions: []metav1.Condition{{Type: "GCPaused", Status: metav1.ConditionTrue, Reason: "Paused",
			Message: "held by\nfed-nightly", LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Second))}},
		Events: []Event{{Time: t0.Add(-time.Minute), Type: "Normal", Reason: "Created", Object: "VolumeBackup/nightly", Message: "members created", Count: 3}},
		Members: []Member{
			{Plane: "dp1", Namespace: "tidb", Name: "fed-nightly", Phase: "Running",
				Steps: []dpv1alpha1.StepReport{{Name: "snapshot", Phase: "Waiting", Done: 2, Total: 4, Percent: 75, Since: micro(t0.Add(-4 * time.Second))},
					{Name: "pause", Phase: "Failed", Error: "lost the lease"}},
				Observed: map[string][]Observation{"snapshot": {{At: t0.Add(-2 * time.Second), Percent: 65}, {At: t0, Percent: 75}}},
				Jobs: []Job{{Name: "fed-nightly-snapshot", Step: "snapshot", Status: "Active (1 running)",
					Pods: []Pod{{Name: "fed-nightly-snapshot-x", Phase: "Running", Node: "n1", Restarts: 1, Exit: "exit 137 (Error)"}}}}},
			{Plane: "dp2", Namespace: "tidb", Name: "fed-nightly", Problem: "data plane unreachable: connection refused"},
		}}
	var b bytes.Buffer
	if err := Render(&b, v, t0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"VolumeBackup default/nightly\n",
		"  Phase: Running\n",
		"  Commit ts: 4711\n",
		"GCPaused  True    Paused  2s   held by fed-nightly", // one line per condition
		"Created (x3)",
		"Member tidb/fed-nightly in data plane dp1\n",
		"    snapshot: Waiting for 4s, 2/4 snapshots completed, 75.0%, about 5s left\n",
		"    pause: Failed; error: lost the lease\n",
		"    fed-nightly-snapshot (snapshot): Active (1 running)\n",
		"      pod fed-nightly-snapshot-x: Running on n1, 1 restarts, exit 137 (Error)\n",
		"Member tidb/fed-nightly in data plane dp2\n  data plane unreachable: connection refused\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Size:") {
		t.Errorf("an empty field is printed:\n%s", out)
	}
}

// TestVerificationFields: a backup's verification reads as the restore that judged it, when, and
// the recovery time split by step; none without one.
func TestVerificationFields(t *testing.T) {
	if f := verificationFields(nil); f != nil {
		t.Errorf("no verification: %v", f)
	}
	at := metav1.NewTime(time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
	got := verificationFields(&fedv1alpha1.VolumeBackupVerification{Restore: "drill-1", TimeJudged: at, TimeTaken: "12m3s",
		Steps: []fedv1alpha1.VolumeRestoreStep{{StepName: "RestoreVolume", TimeTaken: "5m"}, {StepName: "RestoreData"}, {StepName: "Verify", TimeTaken: "3s"}}})
	want := []Field{{"Verified by", "drill-1 at 2026-12-07T03:00:00Z"}, {"Recovery time", "12m3s (RestoreVolume 5m, Verify 3s)"}}
	if !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}
