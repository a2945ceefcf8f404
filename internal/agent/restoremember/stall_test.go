package restoremember

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

// TestStalledWarmup: a warm-up TiKV waits for (sync, or check-wal-only) is bounded by its
// progress, not by its length. One whose bytes read have not moved for stallTimeout fails the
// member with ProgressStalled (the manager then fails the restore and deletes its members, and
// the deletion stops the Jobs); one that moved within the window goes on, and the member is
// looked at again when the earliest window would end, so nothing polls. A Job that has not
// stamped progressAt yet counts from the start of its reading (since). An async warm-up, beside
// a TiKV that already serves, is not judged.
func TestStalledWarmup(t *testing.T) {
	warm := func(mode fedv1alpha1.RestoreWarmupMode, strategy fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Template.Warmup, m.Spec.Template.WarmupStrategy = mode, strategy
			m.Spec.Template.StallTimeout = &metav1.Duration{Duration: 2 * time.Hour}
		}
	}
	volumesIn := rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason)
	complete := []func(*dpv1alpha1.VolumeRestoreMember){volumesIn, rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
		rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)}
	w0, w1 := WarmupJobName("fed-r1", 0), WarmupJobName("fed-r1", 1)
	since := t0.Add(-10 * time.Hour)
	reading := func(progressAt *time.Time) string {
		doc := map[string]any{"phase": "Reading", "since": since, "done": 3 << 30, "total": 12 << 30, "percent": 25.0}
		if progressAt != nil {
			doc["progressAt"] = *progressAt
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	running := func(r0, r1 string) func(*Observed) {
		return func(o *Observed) {
			o.RestoreMeta = record(t)
			o.Warmups = map[string]job.State{w0: {Name: w0, Phase: job.Active, Active: 1}, w1: {Name: w1, Phase: job.Active, Active: 1}}
			o.Report = rreport(map[string]string{job.WarmupKey(0): r0, job.WarmupKey(1): r1})
		}
	}
	for _, tt := range []struct {
		name    string
		o       Observed
		stalled string // the Job the failure names; "" for none
		requeue time.Duration
	}{
		{name: "sync: one Job read nothing for longer than stallTimeout",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				running(reading(at(-time.Minute)), reading(at(-2*time.Hour-time.Second)))),
			stalled: w1},
		{name: "sync: both moved within the window: requeued at the earliest progressAt+stallTimeout",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				running(reading(at(-time.Minute)), reading(at(-100*time.Minute)))),
			requeue: 20 * time.Minute},
		{name: "sync: a Reading report without progressAt (the warm-up stamps one on each) is not judged",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				running(reading(nil), reading(at(-time.Minute)))),
			requeue: time.Hour + 59*time.Minute},
		{name: "sync: a Job that never reported (its pod never ran): counted from the Job's start",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				running(reading(at(-time.Minute)), ""), func(o *Observed) {
					o.Report = rreport(map[string]string{job.WarmupKey(0): reading(at(-time.Minute))})
					o.Warmups[w1] = job.State{Name: w1, Phase: job.Active, Started: t0.Add(-2 * time.Hour)}
				}),
			stalled: w1},
		{name: "sync: a Job that never reported, started within the window: requeued",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				running(reading(at(-time.Minute)), ""), func(o *Observed) {
					o.Report = rreport(map[string]string{job.WarmupKey(0): reading(at(-time.Minute))})
					o.Warmups[w1] = job.State{Name: w1, Phase: job.Active, Started: t0.Add(-time.Hour)}
				}),
			requeue: time.Hour},
		{name: "check-wal-only (async mode, TiKV still waits): judged",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, warm(fedv1alpha1.RestoreWarmupAsync, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly), volumesIn), targetTC(2, true),
				running(reading(at(-3*time.Hour)), reading(at(-time.Minute)))),
			stalled: w0},
		{name: "async beside a serving TiKV: not judged",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, append(complete, warm(fedv1alpha1.RestoreWarmupAsync, ""))...), storesUp(targetTC(2, false), 2),
				running(reading(at(-3*time.Hour)), reading(at(-3*time.Hour))), func(o *Observed) {
					o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "p0", Ready: true, Node: "node-a"}, {Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b"}}
				})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := planned(t, tt.o)
			f := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
			switch {
			case tt.stalled != "" && (f == nil || f.Reason != dpv1alpha1.ProgressStalledReason):
				t.Fatalf("Failed = %+v, want reason %s", f, dpv1alpha1.ProgressStalledReason)
			case tt.stalled != "":
				parts := []string{tt.stalled, "3Gi of 12Gi", "25%", "2h0m0s", "stallTimeout"}
				if strings.Contains(tt.name, "never reported") {
					parts = []string{tt.stalled, "reported no progress", "2h0m0s", "stallTimeout", "events"}
				}
				for _, part := range parts {
					if !strings.Contains(f.Message, part) {
						t.Errorf("message %q does not say %q", f.Message, part)
					}
				}
			case f != nil && f.Status == metav1.ConditionTrue:
				t.Errorf("Failed = %+v, want none", f)
			}
			if tt.stalled == "" && r.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter %s, want %s", r.RequeueAfter, tt.requeue)
			}
		})
	}
}
