package job

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

func TestName(t *testing.T) {
	if got := Name("fed-b1", StepPause); got != "fed-b1-pause" {
		t.Errorf("Name = %q", got)
	}
	long := strings.Repeat("a", 80)
	a, b := Name(long, StepRestoreVolumes), Name(long+"b", StepRestoreVolumes)
	if len(a) > 63 || a == b || !strings.HasSuffix(a, "-restore-volumes") {
		t.Errorf("long names %q %q", a, b)
	}
	if v := LabelValue(long); len(v) > 63 {
		t.Errorf("label value %q", v)
	}
}

func TestBuild(t *testing.T) {
	j := Build(Spec{
		Member: "fed-b1", Namespace: "ns", OwnerKind: "VolumeBackupMember", Step: StepSnapshot, Image: "img",
		Owner: metav1.OwnerReference{Kind: "VolumeBackupMember", Name: "fed-b1", UID: "u"}, Args: []string{"br", "snapshot"},
		BackoffLimit: 1, ActiveDeadlineSeconds: 60, TTLSecondsAfterFinished: 30,
		Labels: map[string]string{"team": "db"}, AllowedLabels: []string{"team"}, Annotations: map[string]string{"iam.amazonaws.com/role": "r"},
		Pod: PodTemplate{Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", Value: "override"}}, ServiceAccount: "sa", PriorityClassName: "high",
			Tolerations:      []corev1.Toleration{{Key: "k"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
			Volumes:          []corev1.Volume{{Name: "extra"}}, VolumeMounts: []corev1.VolumeMount{{Name: "extra", MountPath: "/x"}}},
	})
	ps := j.Spec.Template.Spec
	c := ps.Containers[0]
	switch {
	case j.Name != "fed-b1-snapshot", j.Labels[LabelStep] != StepSnapshot, j.Labels["team"] != "db", j.Spec.Template.Labels[LabelMember] != "fed-b1":
		t.Errorf("metadata %+v", j.ObjectMeta)
	case j.Annotations[AnnotationOwner] != "VolumeBackupMember/fed-b1", j.Spec.Template.Annotations["iam.amazonaws.com/role"] != "r":
		t.Errorf("annotations %v / %v", j.Annotations, j.Spec.Template.Annotations)
	case *j.Spec.BackoffLimit != 1, *j.Spec.ActiveDeadlineSeconds != 60, *j.Spec.TTLSecondsAfterFinished != 30:
		t.Errorf("limits %+v", j.Spec)
	case ps.RestartPolicy != corev1.RestartPolicyNever, ps.ServiceAccountName != "sa", ps.PriorityClassName != "high",
		len(ps.Tolerations) != 1, len(ps.ImagePullSecrets) != 1, len(ps.Volumes) != 2, len(c.VolumeMounts) != 2:
		t.Errorf("pod spec %+v", ps)
	case c.Image != "img", c.Env[len(c.Env)-1].Value != "override":
		t.Errorf("container %+v", c)
	case len(j.OwnerReferences) != 1:
		t.Errorf("owners %v", j.OwnerReferences)
	}
	if j := Build(Spec{Member: "m", Step: StepClean}); len(j.OwnerReferences) != 0 {
		t.Errorf("a Job without an owner got %v", j.OwnerReferences)
	}
	// A warm-up restarts its container in the same pod, keeping its checkpoint emptyDir.
	if j := Build(Spec{Member: "m", Step: StepWarmup, Pod: PodTemplate{RestartPolicy: corev1.RestartPolicyOnFailure}}); j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("restartPolicy %s, want the template's OnFailure", j.Spec.Template.Spec.RestartPolicy)
	}
}

// TestBuildWithoutDeadline: a step whose phase the manager times has no activeDeadlineSeconds.
func TestBuildWithoutDeadline(t *testing.T) {
	j := Build(Spec{Member: "fed-b1", Namespace: "ns", OwnerKind: "VolumeBackupMember", Step: StepSnapshot, Image: "img",
		Owner: metav1.OwnerReference{Kind: "VolumeBackupMember", Name: "fed-b1", UID: "u"}, Args: []string{"br", "snapshot"}})
	if j.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("activeDeadlineSeconds = %d, want none", *j.Spec.ActiveDeadlineSeconds)
	}
}

// TestBuildCarriesTheMembersMetadata: a member's allowed labels (here every one: *) and its
// allowed annotations (by default the IAM role keys only: a sidecar injector's key stays behind)
// reach the Job and its pod template, except fedbr's own keys, kubectl's
// last-applied-configuration and the Job controller's keys, whatever the lists say; fedbr's
// selector labels and owner annotation win over any copied value.
func TestBuildCarriesTheMembersMetadata(t *testing.T) {
	j := Build(Spec{Member: "fed-b1", Namespace: "ns", OwnerKind: "VolumeBackupMember", Step: StepPause, AllowedLabels: []string{"*"},
		Labels: map[string]string{
			"team": "db", LabelManagedBy: "helm", LabelMember: "fed-other", LabelStep: StepSnapshot, LabelComponent: "tikv",
			LabelName: "tidb-cluster", "dataplane.fedbr.io/owner-uid": "u", "job-name": "x", "controller-uid": "y",
			"batch.kubernetes.io/job-name": "z",
		},
		Annotations: map[string]string{
			"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/br", "sidecar.istio.io/inject": "false",
			corev1.LastAppliedConfigAnnotation: "{}", "fedbr.io/force-remove": "true", AnnotationOwner: "VolumeBackupMember/forged",
			"batch.kubernetes.io/job-tracking": "",
		},
	})
	wantLabels := map[string]string{"team": "db", LabelManagedBy: ManagedByValue, LabelMember: "fed-b1", LabelStep: StepPause,
		LabelComponent: StepPause, LabelName: NameValue}
	wantPodAnnotations := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/br"}
	wantJobAnnotations := maps.Clone(wantPodAnnotations)
	wantJobAnnotations[AnnotationOwner] = "VolumeBackupMember/fed-b1"
	for what, got := range map[string]map[string]string{"Job labels": j.Labels, "pod labels": j.Spec.Template.Labels} {
		if !maps.Equal(got, wantLabels) {
			t.Errorf("%s = %v, want %v", what, got, wantLabels)
		}
	}
	if got := j.Spec.Template.Annotations; !maps.Equal(got, wantPodAnnotations) {
		t.Errorf("pod annotations = %v, want %v", got, wantPodAnnotations)
	}
	if got := j.Annotations; !maps.Equal(got, wantJobAnnotations) {
		t.Errorf("Job annotations = %v, want %v", got, wantJobAnnotations)
	}
	sel := Selector("fed-b1")
	for k, v := range sel {
		if j.Spec.Template.Labels[k] != v {
			t.Errorf("the pod is out of the agent's selection: %s=%q, want %q", k, j.Spec.Template.Labels[k], v)
		}
	}
}

func TestStateOf(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		name   string
		job    *batchv1.Job
		phase  Phase
		reason string
	}{
		{"absent", nil, Absent, ""},
		{"active", &batchv1.Job{}, Active, ""},
		{"complete", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}}, Succeeded, ""},
		{"deadline", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: ReasonDeadlineExceeded},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: ReasonDeadlineExceeded, LastTransitionTime: now}}}}, Failed, ReasonDeadlineExceeded},
		{"not yet failed", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionFalse}}}}, Active, ""},
	} {
		s := StateOf(tt.job)
		if s.Phase != tt.phase || s.Reason != tt.reason {
			t.Errorf("%s: %+v", tt.name, s)
		}
	}
	if msg := (State{Name: "j", Phase: Failed, Reason: ReasonDeadlineExceeded}).FailureText(); !strings.Contains(msg, "deadline") {
		t.Errorf("failure text %q", msg)
	}
}

func TestReportOf(t *testing.T) {
	lifted := metav1.NewMicroTime(time.Date(2026, 11, 29, 12, 0, 9, 0, time.UTC))
	r := ReportOf([]dpv1alpha1.StepReport{
		{Name: StepPause, Phase: PhaseStopped, BackupTS: 470802380936708097, LiftedAt: &lifted, Stores: 3},
		{Name: StepClean, Phase: PhaseCompleted, Result: &runtime.RawExtension{Raw: []byte(`{"deleted":3}`)}},
	})
	p, ok := r.Step(StepPause)
	if !ok || p.Phase != PhaseStopped || p.BackupTS != 470802380936708097 || p.LiftedAt == nil || !p.LiftedAt.Equal(&lifted) || p.Stores != 3 {
		t.Errorf("pause %+v", p)
	}
	if _, ok := r.Step(StepSnapshot); ok {
		t.Errorf("a step that did not report is reported: %+v", r)
	}
	var sum struct{ Deleted int }
	if ok, err := r.Result(StepClean, &sum); !ok || err != nil || sum.Deleted != 3 {
		t.Errorf("clean result %v %v %+v", ok, err, sum)
	}
	if ok, _ := r.Result(StepPause, &sum); ok {
		t.Error("a step without a result has one")
	}
}

func TestStorageFor(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sp      fedv1alpha1.StorageProvider
		flag    string
		hostDir string
		env     int
		err     string
	}{
		{"s3 bucket+prefix", fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Bucket: "b", Prefix: "/p/q-az1/", SecretName: "s"}}, "s3://b/p/q-az1", "", 2, ""},
		{"s3 path", fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Path: "s3://b/base", Prefix: "az1"}}, "s3://b/base/az1", "", 0, ""},
		{"s3 in its own region", fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Bucket: "b", Prefix: "p", Region: "eu-central-1"}}, "s3://b/p?region=eu-central-1", "", 0, ""},
		{"s3 no bucket", fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Prefix: "x"}}, "", "", 0, "neither bucket"},
		{"local hostPath", fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{
			Volume:      corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
			VolumeMount: corev1.VolumeMount{Name: "nfs", MountPath: "/backup"}, Prefix: "p-az1"}}, "backup/p-az1", "/data/p-az1", 0, ""},
		{"gcs", fedv1alpha1.StorageProvider{Gcs: &fedv1alpha1.GcsStorageProvider{ProjectId: "p"}}, "", "", 0, "unsupported"},
		{"none", fedv1alpha1.StorageProvider{}, "", "", 0, "no storage"},
	} {
		st, err := StorageFor(tt.sp)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err == "" && (st.Flag != tt.flag || st.HostDir != tt.hostDir || len(st.Env) != tt.env):
			t.Errorf("%s: %+v", tt.name, st)
		}
	}
}

func TestTTLSecondsBounded(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int32
	}{
		{0, int32(DefaultTTL / time.Second)},
		{time.Hour, 3600},
		{math.MaxInt32 * time.Second, math.MaxInt32},
		{600000 * time.Hour, math.MaxInt32}, // above int32 seconds: the flag refuses it, the Job never wraps
	} {
		if got := (Env{TTL: tt.ttl}).TTLSeconds(); got != tt.want {
			t.Errorf("TTLSeconds(%s) = %d, want %d", tt.ttl, got, tt.want)
		}
	}
}

// TestBuildIsSidecarSafe: the step container gets the exit marker's emptyDir at ExitDir and
// the variables that make `fedbr` write the marker (relative to its working directory "/")
// and wait the delay; the template's volumes and mounts stay, unaliased.
func TestBuildIsSidecarSafe(t *testing.T) {
	vols := make([]corev1.Volume, 1, 4)
	vols[0] = corev1.Volume{Name: "extra"}
	j := Build(Spec{Member: "m", Step: StepSnapshot, ExitDelay: 3 * time.Second, Pod: PodTemplate{Volumes: vols}})
	ps := j.Spec.Template.Spec
	c := ps.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env[EnvExitMarker] != "var/run/fedbr-exit/main-terminated" || env[EnvExitDelay] != "3s" {
		t.Errorf("exit variables %v", env)
	}
	var emptyDir bool
	for _, v := range ps.Volumes {
		emptyDir = emptyDir || v.Name == ExitVolume && v.EmptyDir != nil
	}
	if !emptyDir || len(ps.Volumes) != 2 || ps.Volumes[0].Name != "extra" {
		t.Errorf("volumes %+v", ps.Volumes)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != ExitVolume || c.VolumeMounts[0].MountPath != ExitDir || c.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if vols[:2][1].Name != "" { //nolint:gosec // G602: within vols' capacity, which is what the check reads
		t.Errorf("Build wrote into the caller's volumes: %+v", vols[:2]) //nolint:gosec // G602: as above
	}
	if j := Build(Spec{Member: "m", Step: StepSnapshot}); j.Spec.Template.Spec.Containers[0].Env[1].Value != "0s" {
		t.Errorf("no delay: %+v", j.Spec.Template.Spec.Containers[0].Env)
	}
}

// TestPodAnnotationsAllowlist: the operator's --pod-annotations decide which of a member's
// annotations its pods carry: exact keys and prefixes ending in *; none when empty; fedbr's own
// keys and the Job controller's never, whatever the list says.
func TestPodAnnotationsAllowlist(t *testing.T) {
	member := map[string]string{
		"iam.amazonaws.com/role": "br", "eks.amazonaws.com/role-arn": "arn", "sidecar.istio.io/inject": "true",
		"sidecar.istio.io/userVolume": "[]", "vault.hashicorp.com/agent-inject": "true", "eks.amazonaws.com/skip-containers": "fedbr",
		"config.linkerd.io/proxy-image": "evil", "fedbr.io/force-remove": "true", "batch.kubernetes.io/job-tracking": "",
	}
	for _, c := range []struct {
		allowed []string
		want    []string
	}{
		{nil, []string{"eks.amazonaws.com/role-arn", "iam.amazonaws.com/role"}},
		{[]string{}, nil},
		{[]string{"sidecar.istio.io/inject"}, []string{"sidecar.istio.io/inject"}},
		{[]string{"sidecar.istio.io/*"}, []string{"sidecar.istio.io/inject", "sidecar.istio.io/userVolume"}},
		{[]string{"*"}, []string{"config.linkerd.io/proxy-image", "eks.amazonaws.com/role-arn", "eks.amazonaws.com/skip-containers",
			"iam.amazonaws.com/role", "sidecar.istio.io/inject", "sidecar.istio.io/userVolume", "vault.hashicorp.com/agent-inject"}},
		{[]string{"eks.amazonaws.com/role"}, nil}, // an exact key is no prefix
	} {
		j := Build(Spec{Member: "m", Step: StepSnapshot, Annotations: member, AllowedAnnotations: c.allowed})
		if got := slices.Sorted(maps.Keys(j.Spec.Template.Annotations)); !slices.Equal(got, c.want) {
			t.Errorf("allowed %q: pod annotations %q, want %q", c.allowed, got, c.want)
		}
	}
}

// TestPodLabelsAllowlist: the operator's --pod-labels decide which of a member's labels its Jobs
// and pods carry: exact keys and prefixes ending in *; none by default, so a sidecar injector's
// or a workload identity's label (istio.io/rev, sidecar.istio.io/inject,
// azure.workload.identity/use) never reaches a pod unless listed; fedbr's own keys and the Job
// controller's never.
func TestPodLabelsAllowlist(t *testing.T) {
	member := map[string]string{
		"team": "db", "app.kubernetes.io/part-of": "tidb", "istio.io/rev": "canary", "sidecar.istio.io/inject": "true",
		"azure.workload.identity/use": "true", LabelStep: "forged", "batch.kubernetes.io/job-name": "x",
	}
	fedbr := []string{LabelComponent, LabelManagedBy, LabelMember, LabelName, LabelStep}
	for _, c := range []struct {
		allowed []string
		want    []string
	}{
		{nil, nil},
		{[]string{}, nil},
		{[]string{"team"}, []string{"team"}},
		{[]string{"app.kubernetes.io/*", "team"}, []string{"app.kubernetes.io/part-of", "team"}},
		{[]string{"*"}, []string{"app.kubernetes.io/part-of", "azure.workload.identity/use", "istio.io/rev", "sidecar.istio.io/inject", "team"}},
		{[]string{"tea"}, nil}, // an exact key is no prefix
	} {
		j := Build(Spec{Member: "m", Step: StepSnapshot, Labels: member, AllowedLabels: c.allowed})
		want := slices.Sorted(slices.Values(append(slices.Clone(fedbr), c.want...)))
		for what, labels := range map[string]map[string]string{"Job": j.Labels, "pod": j.Spec.Template.Labels} {
			if got := slices.Sorted(maps.Keys(labels)); !slices.Equal(got, want) {
				t.Errorf("allowed %q: %s labels %q, want %q", c.allowed, what, got, want)
			}
			if labels[LabelStep] != StepSnapshot {
				t.Errorf("allowed %q: %s label %s=%q, want fedbr's", c.allowed, what, LabelStep, labels[LabelStep])
			}
		}
	}
}

// TestOwned: a Job whose controller reference names the member's uid is the member's, and a
// clean Job without any controller annotated as the member's; one with the member's labels and
// no owner, another controller, or the member only as a non-controlling owner is foreign, and
// so is a step other than clean that only claims the member in its annotation.
func TestOwned(t *testing.T) {
	ref := func(uid string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "dataplane.fedbr.io/v1alpha1", Kind: "VolumeBackupMember", Name: "fed-b1", UID: types.UID(uid), Controller: ptr.To(controller)}}
	}
	clean := func(name, owner string, refs []metav1.OwnerReference) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelStep: StepClean},
			Annotations: map[string]string{AnnotationOwner: owner}, OwnerReferences: refs}}
	}
	jobs := []batchv1.Job{
		{ObjectMeta: metav1.ObjectMeta{Name: "ours", OwnerReferences: ref("u1", true)}},
		clean("our-clean", "VolumeBackupMember/fed-b1", nil),
		{ObjectMeta: metav1.ObjectMeta{Name: "no-owner"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-member", OwnerReferences: ref("u2", true)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-controller", OwnerReferences: ref("u1", false)}},
		clean("another-members-clean", "VolumeBackupMember/fed-b2", nil),
		clean("a-clean-with-a-controller", "VolumeBackupMember/fed-b1", ref("u2", true)),
		{ObjectMeta: metav1.ObjectMeta{Name: "a-pause-claiming-the-owner", Annotations: map[string]string{AnnotationOwner: "VolumeBackupMember/fed-b1"}}},
	}
	member := &metav1.ObjectMeta{Name: "fed-b1", UID: "u1"}
	owned, foreign := Owned(member, "VolumeBackupMember", jobs)
	var names []string
	for _, j := range owned {
		names = append(names, j.Name)
	}
	if !slices.Equal(names, []string{"ours", "our-clean"}) || !slices.Equal(foreign, []string{"no-owner", "other-member", "not-controller",
		"another-members-clean", "a-clean-with-a-controller", "a-pause-claiming-the-owner"}) {
		t.Errorf("owned %v, foreign %v", owned, foreign)
	}
}

// TestDefaultRequests: a step pod gets DefaultRequests for cpu and memory its template neither
// requests nor limits (so it is never BestEffort), and never a limit; what the template says
// is kept.
func TestDefaultRequests(t *testing.T) {
	q := resource.MustParse
	for _, tt := range []struct {
		name string
		in   corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{"nothing set", corev1.ResourceRequirements{},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("256Mi")}}},
		{"cpu requested", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("256Mi")}}},
		{"memory limited only (Kubernetes requests the limit)", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q("4Gi")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}, Limits: corev1.ResourceList{corev1.ResourceMemory: q("4Gi")}}},
		{"another resource only", corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1"), corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("256Mi")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in.DeepCopy()
			if got := withDefaultRequests(tt.in); !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("withDefaultRequests = %+v, want %+v", got, tt.want)
			}
			if !equality.Semantic.DeepEqual(&tt.in, in) {
				t.Errorf("the template's requirements were changed: %+v", tt.in)
			}
		})
	}
}
