package restoremember

import (
	"maps"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/controller/federation"
)

// TestEveryStepPodCarriesTheRestoresMetadata: an annotation and a label on the VolumeRestore
// reach the pod template of every kind of Job a restore member runs (restore-volumes,
// restore-data armed and plain, sync and async warm-up), through the manager's member
// (federation.NewMeta) and the agent's Jobs; fedbr's own keys, kubectl's
// last-applied-configuration and a label or annotation the agent's --pod-labels or
// --pod-annotations does not name (a sidecar injector's) do not, and the agent's selector labels are its own.
func TestEveryStepPodCarriesTheRestoresMetadata(t *testing.T) {
	userLabels := map[string]string{"team": "db"}
	// Not on the agent's --pod-labels (["team"] here): stays on the member.
	injectorLabels := map[string]string{"istio.io/rev": "canary"}
	userAnnotations := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/fedbr-restore"}
	// Not on the agent's --pod-annotations (its default): stays on the member.
	injector := map[string]string{"sidecar.istio.io/inject": "true"}
	vr := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "ops", UID: "vr-uid",
		Labels: union(userLabels, injectorLabels, map[string]string{job.LabelManagedBy: "helm", job.LabelStep: job.StepPause, dpv1alpha1.LabelOwnerName: "forged"}),
		Annotations: union(userAnnotations, injector, map[string]string{fedv1alpha1.AnnotationForceRemove: "true",
			corev1.LastAppliedConfigAnnotation: `{"kind":"VolumeRestore"}`, AnnotationRecoveryPods: "forged"}),
	}}
	withRestoresMeta := func(m *dpv1alpha1.VolumeRestoreMember) {
		meta := federation.NewMeta(vr, m.Name, m.Namespace, t0)
		m.Labels, m.Annotations = meta.Labels, meta.Annotations
	}
	var built []string
	for _, j := range jobsOfEveryKind(t, withRestoresMeta) {
		step := stepOf(j)
		built = append(built, step)
		pod := j.Spec.Template.ObjectMeta
		for k, v := range userLabels {
			if pod.Labels[k] != v {
				t.Errorf("Job %s pod: label %s=%q, want %q", j.Name, k, pod.Labels[k], v)
			}
		}
		for k, v := range userAnnotations {
			if pod.Annotations[k] != v {
				t.Errorf("Job %s pod: annotation %s=%q, want %q", j.Name, k, pod.Annotations[k], v)
			}
		}
		for k, v := range job.Selector("fed-r1") {
			if pod.Labels[k] != v {
				t.Errorf("Job %s pod: selector label %s=%q, want %q", j.Name, k, pod.Labels[k], v)
			}
		}
		if got := pod.Labels[job.LabelStep]; got != j.Labels[job.LabelStep] || got == job.StepPause {
			t.Errorf("Job %s pod: step label %q", j.Name, got)
		}
		for k := range pod.Annotations {
			if dpv1alpha1.OwnedKey(k) || k == corev1.LastAppliedConfigAnnotation || injector[k] != "" {
				t.Errorf("Job %s pod: annotation %s travelled to the pod", j.Name, k)
			}
		}
		for k := range injectorLabels {
			if _, ok := pod.Labels[k]; ok {
				t.Errorf("Job %s pod: label %s travelled to the pod", j.Name, k)
			}
		}
		if _, ok := pod.Labels[dpv1alpha1.LabelOwnerName]; ok {
			t.Errorf("Job %s pod: the member's owner label travelled to the pod", j.Name)
		}
	}
	slices.Sort(built)
	want := []string{job.StepRestoreData, job.StepRestoreData, job.StepRestoreVolumes, job.StepWarmup, job.StepWarmup, "warmup-async", "warmup-async"}
	if !slices.Equal(built, want) {
		t.Errorf("Jobs built %v, want %v", built, want)
	}
}

func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// jobsOfEveryKind are the Jobs planned for a member dressed by dress in the scenarios that start
// each kind of restore Job: restore-volumes, restore-data armed and plain, sync and async warm-up.
func jobsOfEveryKind(t *testing.T, dress func(*dpv1alpha1.VolumeRestoreMember)) []*batchv1.Job {
	t.Helper()
	warm := func(mode fedv1alpha1.RestoreWarmupMode) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Warmup = mode }
	}
	volumesIn := rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason)
	restored := func(o *Observed) { o.RestoreMeta = record(t) }
	complete := []func(*dpv1alpha1.VolumeRestoreMember){dress, warm(fedv1alpha1.RestoreWarmupAsync), volumesIn,
		rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason), rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)}
	scenarios := []Observed{
		// a new member: restore-volumes
		robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, dress), targetTC(2, true)),
		// volumes restored, sync warm-up: one Job per TiKV member
		robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, dress, warm(fedv1alpha1.RestoreWarmupSync), volumesIn), targetTC(2, true), restored),
		// the data member, volumes restored: restore-data armed
		robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, dress, dataMember, volumesIn), targetTC(2, true), restored),
		// moved to restore-data without being marked: restore-data now
		robs(rmember(dpv1alpha1.RestoreMemberRestoreData, append([]func(*dpv1alpha1.VolumeRestoreMember){dress}, tikvUp...)...),
			storesUp(targetTC(2, true), 2)),
		// complete, async warm-up: one Job per serving TiKV pod
		robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, complete...), storesUp(targetTC(2, false), 2), restored, func(o *Observed) {
			o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "p0", Ready: true, Node: "node-a"}, {Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b"}}
		}),
	}
	for i := range scenarios {
		scenarios[i].Env.PodLabels = []string{"team"}
	}
	return plannedJobs(scenarios...)
}

// stepOf is a Job's step, "warmup-async" for a warm-up pinned to its TiKV pod's node.
func stepOf(j *batchv1.Job) string {
	if step := j.Labels[job.LabelStep]; step != job.StepWarmup || j.Spec.Template.Spec.NodeName == "" {
		return step
	}
	return "warmup-async"
}

// TestOneBoundPerStep: every step a member runs before it is Complete runs in a phase the
// manager times (stepTimeout), so its Job has no deadline of its own; the async warm-up, after
// Complete, which nothing else times, has stepTimeout.
func TestOneBoundPerStep(t *testing.T) {
	for _, j := range jobsOfEveryKind(t, func(*dpv1alpha1.VolumeRestoreMember) {}) {
		got := j.Spec.ActiveDeadlineSeconds
		switch stepOf(j) {
		case "warmup-async":
			if got == nil || *got != int64(fedv1alpha1.DefaultStepTimeout/time.Second) {
				t.Errorf("async warm-up Job %s: activeDeadlineSeconds %v, want stepTimeout", j.Name, got)
			}
		default:
			if got != nil {
				t.Errorf("%s Job %s: activeDeadlineSeconds %d, want none (the manager times its phase)", stepOf(j), j.Name, *got)
			}
		}
	}
}
