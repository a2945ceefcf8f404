package backupmember

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/podsecurity"
)

// jobsOfEveryKind are the Jobs planned for a member dressed by dress in the scenarios that
// start each kind of backup Job: pause and snapshot, size, lift, clean.
func jobsOfEveryKind(t *testing.T, dress func(*dpv1alpha1.VolumeBackupMember)) []*batchv1.Job {
	t.Helper()
	complete := withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
	ready := withCond(dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
	started := func(m *dpv1alpha1.VolumeBackupMember) { m.Status.BackupPath = "s3://bk/nightly-az1" }
	scenarios := []Observed{
		// a new initializer: its pause and its armed snapshot
		obs(member(dpv1alpha1.BackupMemberInitialize, dress), func(o *Observed) { o.Cluster = cluster() }),
		// a complete backup: its size step
		obs(member(dpv1alpha1.BackupMemberTeardown, dress, complete)),
		// a pause killed while holding: its lift
		obs(member(dpv1alpha1.BackupMemberExecute, dress, ready), func(o *Observed) {
			o.Snapshot, o.Pause = active(snapName), failed(pauseName, job.ReasonBackoffLimitExceeded)
			o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Ready", "backupTS": backupTS,
				"serviceSafePoint": "fedbr-1", "pausedSchedulers": []string{"balance-leader-scheduler"}})})
		}),
		// a deleted backup under cleanPolicy Delete: its clean
		obs(member(dpv1alpha1.BackupMemberTeardown, dress, deleting(fedv1alpha1.CleanPolicyDelete), started, complete)),
	}
	var jobs []*batchv1.Job
	var steps []string
	for _, o := range scenarios {
		o.Env.PodLabels = podLabels
		for _, a := range Plan(o, t0).Actions {
			if a.Kind == CreateJob {
				jobs, steps = append(jobs, a.Job), append(steps, a.Job.Labels[job.LabelStep])
			}
		}
	}
	slices.Sort(steps)
	if want := []string{job.StepClean, job.StepLift, job.StepPause, job.StepSize, job.StepSnapshot}; !slices.Equal(steps, want) {
		t.Errorf("Jobs built %v, want one of each kind %v", steps, want)
	}
	return jobs
}

// TestEveryStepPodIsRestricted: the pod of every kind of Job a backup member runs, planned from
// a template as a user writes one (S3 credentials from a Secret, resources, tolerations, an
// extra ConfigMap volume), is admitted by Pod Security "restricted" as the admission controller
// evaluates it, and its root file system is read-only.
func TestEveryStepPodIsRestricted(t *testing.T) {
	userTemplate := func(m *dpv1alpha1.VolumeBackupMember) {
		tpl := &m.Spec.Template
		tpl.S3.SecretName = "s3-credentials"
		tpl.ResourceRequirements = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
		tpl.Env = []corev1.EnvVar{{Name: "AWS_MAX_ATTEMPTS", Value: "10"}}
		tpl.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "tidb", Effect: corev1.TaintEffectNoSchedule}}
		tpl.PriorityClassName, tpl.ImagePullSecrets = "backup", []corev1.LocalObjectReference{{Name: "registry"}}
		tpl.AdditionalVolumes = []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "corp-ca"}}}}}
		tpl.AdditionalVolumeMounts = []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ssl/corp", ReadOnly: true}}
	}
	for _, j := range jobsOfEveryKind(t, userTemplate) {
		pod := j.Spec.Template
		if err := podsecurity.Check(podsecurity.Restricted, &pod.ObjectMeta, &pod.Spec); err != nil {
			t.Errorf("Job %s: %v", j.Name, err)
		}
		for _, c := range pod.Spec.Containers {
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("Job %s, container %s: root file system not read-only: %+v", j.Name, c.Name, sc)
			}
		}
	}
}

// TestOneBoundPerStep: the snapshot step runs in the phases the manager times (stepTimeout),
// so its Job has no deadline of its own; the size, clean and lift steps, which nothing else
// times, have stepTimeout; the pause has volumeBackupInitJobMaxActiveSeconds.
func TestOneBoundPerStep(t *testing.T) {
	stepTimeout := int64(fedv1alpha1.DefaultStepTimeout / time.Second)
	want := map[string]*int64{job.StepSnapshot: nil, job.StepSize: &stepTimeout, job.StepClean: &stepTimeout, job.StepLift: &stepTimeout,
		job.StepPause: ptr.To(int64(fedv1alpha1.DefaultInitJobMaxActiveSeconds))}
	for _, j := range jobsOfEveryKind(t, func(*dpv1alpha1.VolumeBackupMember) {}) {
		step := j.Labels[job.LabelStep]
		if got, w := j.Spec.ActiveDeadlineSeconds, want[step]; (got == nil) != (w == nil) || got != nil && *got != *w {
			t.Errorf("%s Job: activeDeadlineSeconds %v, want %v", step, deref(got), deref(w))
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}
