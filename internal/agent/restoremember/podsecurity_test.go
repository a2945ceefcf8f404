package restoremember

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/podsecurity"
)

// TestEveryStepPodIsRestricted: the pod of every kind of Job a restore member runs
// (restore-volumes, restore-data, sync and async warm-ups), planned from a template as a user
// writes one, is admitted by Pod Security "restricted" as the admission controller evaluates
// it, with a read-only root file system, except a warm-up that reads a block device (the
// strategies fio, and hybrid or fsr for the volumes other than the data volume): that pod is
// privileged, says so, and even "baseline" refuses it (docs/install.md, "Pod security").
func TestEveryStepPodIsRestricted(t *testing.T) {
	tpl := func(mode fedv1alpha1.RestoreWarmupMode, strategy fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Backup.S3.SecretName = "s3-credentials"
			t := &m.Spec.Template
			t.Warmup, t.WarmupStrategy = mode, strategy
			t.ResourceRequirements = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
			t.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "tidb", Effect: corev1.TaintEffectNoSchedule}}
			t.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		}
	}
	sync := func(strategy fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return tpl(fedv1alpha1.RestoreWarmupSync, strategy)
	}
	volumesIn := rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason)
	restored := func(rec *meta.Record) func(*Observed) { return func(o *Observed) { o.RestoreMeta = rec } }
	// dataOnly is a TidbCluster, and a restoremeta, whose TiKV has only its data volume.
	dataOnlyTC := func() *pcv1alpha1.TidbCluster { tc := targetTC(2, true); tc.Spec.TiKV.StorageVolumes = nil; return tc }
	scenarios := map[string]Observed{
		"new member": robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, sync("")), targetTC(2, true)),
		"sync hybrid, data and raft volumes": robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, sync(fedv1alpha1.RestoreWarmupStrategyHybrid), volumesIn),
			targetTC(2, true), restored(record(t))),
		"sync hybrid, data volume only": robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, sync(fedv1alpha1.RestoreWarmupStrategyHybrid), volumesIn),
			dataOnlyTC(), restored(dataOnly(record(t)))),
		"sync fio, data volume only": robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, sync(fedv1alpha1.RestoreWarmupStrategyFio), volumesIn),
			dataOnlyTC(), restored(dataOnly(record(t)))),
		"data member, volumes restored": robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, sync(""), dataMember, volumesIn,
			rcond(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, dpv1alpha1.RestoreMemberWarmedUpReason)), targetTC(2, true), restored(record(t))),
		"complete, async hybrid, data volume only": robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, tpl(fedv1alpha1.RestoreWarmupAsync, ""), volumesIn,
			rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason), rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)),
			storesUp(dataOnlyTC(), 2), restored(dataOnly(record(t))), func(o *Observed) {
				o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "p0", Ready: true, Node: "node-a"}, {Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b"}}
			}),
	}
	var restricted, privileged []string
	for name, o := range scenarios {
		for _, j := range plannedJobs(o) {
			step := j.Labels[job.LabelStep]
			pod := j.Spec.Template
			c := pod.Spec.Containers[0]
			if s := c.SecurityContext; s == nil || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem {
				t.Errorf("%s: Job %s: root file system not read-only: %+v", name, j.Name, s)
			}
			err := podsecurity.Check(podsecurity.Restricted, &pod.ObjectMeta, &pod.Spec)
			if c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
				restricted = append(restricted, step)
				if err != nil {
					t.Errorf("%s: Job %s: %v", name, j.Name, err)
				}
				continue
			}
			// The documented exception: a warm-up reading a block device.
			privileged = append(privileged, step)
			if step != job.StepWarmup || !slices.Contains(c.Args, "--block") {
				t.Errorf("%s: Job %s is privileged without a block read: %v", name, j.Name, c.Args)
			}
			if err := podsecurity.Check(podsecurity.Baseline, &pod.ObjectMeta, &pod.Spec); err == nil || !strings.Contains(err.Error(), "privileged") {
				t.Errorf("%s: Job %s: baseline admits it (%v), want privileged refused", name, j.Name, err)
			}
		}
	}
	slices.Sort(restricted)
	slices.Sort(privileged)
	w := job.StepWarmup
	if want := []string{job.StepRestoreData, job.StepRestoreVolumes, w, w, w, w}; !slices.Equal(restricted, want) {
		t.Errorf("restricted Jobs %v, want %v", restricted, want)
	}
	if want := []string{w, w, w, w}; !slices.Equal(privileged, want) {
		t.Errorf("privileged Jobs %v, want %v (hybrid with a raft volume, fio)", privileged, want)
	}
}

// plannedJobs are the Jobs planned for scenarios, in order.
func plannedJobs(scenarios ...Observed) []*batchv1.Job {
	var jobs []*batchv1.Job
	for _, o := range scenarios {
		for _, a := range Plan(o, t0).Actions {
			if a.Kind == CreateJob {
				jobs = append(jobs, a.Job)
			}
		}
	}
	return jobs
}

// dataOnly drops the storage volume "raft" from record's TiKV members.
func dataOnly(rec *meta.Record) *meta.Record {
	for _, ord := range []int{3, 5} {
		rec = dropVolume(rec, "vol-old-"+strconv.Itoa(ord)+"-tikv-raft")
	}
	return rec
}
