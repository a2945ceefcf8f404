package volumebackupschedule

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

func TestBackupName(t *testing.T) {
	if got := BackupName("every-6h", time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)); got != "every-6h-2026-11-29t06-00-00" {
		t.Fatalf("BackupName = %s", got)
	}
}

// templated is a schedule over two data planes whose template stores in sp.
func templated(sp fedv1alpha1.StorageProvider) *fedv1alpha1.VolumeBackupSchedule {
	return schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
		s.Namespace = "default"
		s.Spec.BackupTemplate.Clusters = []fedv1alpha1.VolumeBackupMemberCluster{
			{K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb"},
			{K8sClusterName: "dp2", TCName: "basic", TCNamespace: "tidb"},
		}
		s.Spec.BackupTemplate.Template.StorageProvider = sp
	})
}

// TestTickPrefixIsUpstreamsLayout: the backup of a tick stores under path.Join(prefix,
// "-"+tick), each member under <that>-<k8sClusterName>, for S3 and local storage alike.
func TestTickPrefixIsUpstreamsLayout(t *testing.T) {
	tick := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	local := func(prefix string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{
			Volume:      corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/backups"}}},
			VolumeMount: corev1.VolumeMount{Name: "nfs", MountPath: "/mnt"}, Prefix: prefix}}
	}
	s3 := func(prefix string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "b", Prefix: prefix}}
	}
	tests := []struct {
		name string
		sp   fedv1alpha1.StorageProvider
		want string // dp1's storage flag
	}{
		{"s3", s3("scheduled"), "s3://b/scheduled/-2026-11-29t06-00-00-dp1"},
		{"s3 prefix with a trailing slash", s3("scheduled/"), "s3://b/scheduled/-2026-11-29t06-00-00-dp1"},
		{"s3 without a prefix", s3(""), "s3://b/-2026-11-29t06-00-00-dp1"},
		{"s3 path instead of bucket and prefix", fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Path: "s3://b/nightly"}},
			"s3://b/nightly/-2026-11-29t06-00-00-dp1"},
		{"local", local("scheduled"), job.InPod("/mnt/scheduled/-2026-11-29t06-00-00-dp1")},
		{"local without a prefix", local(""), job.InPod("/mnt/-2026-11-29t06-00-00-dp1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackup(templated(tc.sp), tick)
			st, err := job.StorageFor(b.Spec.Template.MemberStorage("dp1"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Flag != tc.want {
				t.Fatalf("dp1 stores at %s, want %s", st.Flag, tc.want)
			}
		})
	}
}

// TestTwoTicksNeverShareAPrefix: every member of every tick's backup has a storage location
// of its own, and none is the template's (where a manual backup with the same template
// writes), so no scheduled backup ever meets another's backupmeta — which the snapshot step
// would refuse (snapshot.TestOtherBackupMetaIsRefused) and the clean would not delete
// (clean.TestCleanLeavesAnotherBackupsMetadata).
func TestTwoTicksNeverShareAPrefix(t *testing.T) {
	for _, sp := range []fedv1alpha1.StorageProvider{
		{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "b", Prefix: "scheduled"}},
		{Local: &fedv1alpha1.LocalStorageProvider{VolumeMount: corev1.VolumeMount{Name: "v", MountPath: "/mnt"}, Prefix: "scheduled"}},
	} {
		s := templated(sp)
		seen := map[string]string{}
		note := func(flag, who string) {
			t.Helper()
			if other, ok := seen[flag]; ok {
				t.Fatalf("%s and %s both store at %s", other, who, flag)
			}
			seen[flag] = who
		}
		manual := &fedv1alpha1.VolumeBackup{Spec: *s.Spec.BackupTemplate.DeepCopy()}
		for _, c := range []string{"dp1", "dp2"} {
			st, err := job.StorageFor(manual.Spec.Template.MemberStorage(c))
			if err != nil {
				t.Fatal(err)
			}
			note(st.Flag, "a manual backup with the template in "+c)
		}
		tick := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
		for _, next := range []time.Time{tick, tick.Add(time.Minute), tick.Add(time.Second), tick.Add(24 * time.Hour)} {
			b := NewBackup(s, next)
			for _, c := range []string{"dp1", "dp2"} {
				st, err := job.StorageFor(b.Spec.Template.MemberStorage(c))
				if err != nil {
					t.Fatal(err)
				}
				note(st.Flag, b.Name+" in "+c)
			}
		}
		if got := *s.Spec.BackupTemplate.Template.StorageProvider.DeepCopy(); got.S3 != nil && got.S3.Prefix != "scheduled" ||
			got.Local != nil && got.Local.Prefix != "scheduled" {
			t.Fatalf("NewBackup changed the schedule's template: %+v", got)
		}
	}
}

// TestNewBackupCarriesTheSchedulesLabelsAndAnnotations: the schedule's labels and annotations
// (an IAM role, say) reach the backup with upstream's schedule labels; kubectl's bookkeeping
// and fedbr's controls do not.
func TestNewBackupCarriesTheSchedulesLabelsAndAnnotations(t *testing.T) {
	s := templated(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "b"}})
	s.Labels = map[string]string{"team": "db", ScheduleLabel: "spoofed"}
	s.Annotations = map[string]string{"iam.amazonaws.com/role": "backup", corev1.LastAppliedConfigAnnotation: "{}",
		fedv1alpha1.AnnotationForceRemove: "true"}
	tick := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	b := NewBackup(s, tick)
	wantLabels := map[string]string{"team": "db", ScheduleLabel: "every-6h", InstanceLabel: "every-6h",
		NameLabel: "backup-schedule", ManagedByLabel: "backup-schedule-operator"}
	if len(b.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want %v", b.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if b.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, b.Labels[k], v)
		}
	}
	wantAnn := map[string]string{"iam.amazonaws.com/role": "backup", ScheduledAnnotation: "2026-11-29T06:00:00Z"}
	if len(b.Annotations) != len(wantAnn) || b.Annotations["iam.amazonaws.com/role"] != "backup" || b.Annotations[ScheduledAnnotation] != wantAnn[ScheduledAnnotation] {
		t.Errorf("annotations %v, want %v", b.Annotations, wantAnn)
	}
	if b.Name != "every-6h-2026-11-29t06-00-00" || b.Namespace != "default" || len(b.OwnerReferences) != 0 {
		t.Errorf("meta %+v", b.ObjectMeta)
	}
	if len(b.Spec.Clusters) != 2 || b.Spec.Clusters[1].K8sClusterName != "dp2" {
		t.Errorf("clusters %+v", b.Spec.Clusters)
	}
	b.Labels["team"] = "changed"
	if s.Labels["team"] != "db" {
		t.Error("the backup shares its labels map with the schedule")
	}
}

// TestNewBackupCleanPolicy: a schedule with retention whose template leaves cleanPolicy unset
// creates backups with cleanPolicy Delete written in their spec, so retention's deletions clean
// their snapshots and metadata and the stored VolumeBackup says so; a template's explicit
// policy is kept; a schedule without retention leaves it unset (the VolumeBackup's default,
// Retain). The schedule's own template is never changed.
func TestNewBackupCleanPolicy(t *testing.T) {
	tests := []struct {
		name            string
		maxBackups      *int32
		maxReservedTime *string
		template, want  fedv1alpha1.CleanPolicyType
	}{
		{name: "maxReservedTime, unset: Delete", maxReservedTime: ptr.To("7d"), want: fedv1alpha1.CleanPolicyDelete},
		{name: "maxBackups, unset: Delete", maxBackups: ptr.To[int32](3), want: fedv1alpha1.CleanPolicyDelete},
		{name: "maxBackups 0 is no retention: unset", maxBackups: ptr.To[int32](0), want: ""},
		{name: "no retention: unset", want: ""},
		{name: "retention, Retain kept", maxReservedTime: ptr.To("7d"), template: fedv1alpha1.CleanPolicyRetain, want: fedv1alpha1.CleanPolicyRetain},
		{name: "retention, OnFailure kept", maxBackups: ptr.To[int32](2), template: fedv1alpha1.CleanPolicyOnFailure, want: fedv1alpha1.CleanPolicyOnFailure},
		{name: "retention, Delete kept", maxBackups: ptr.To[int32](2), template: fedv1alpha1.CleanPolicyDelete, want: fedv1alpha1.CleanPolicyDelete},
		{name: "no retention, Retain kept", template: fedv1alpha1.CleanPolicyRetain, want: fedv1alpha1.CleanPolicyRetain},
	}
	tick := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := templated(fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "b"}})
			s.Spec.MaxBackups, s.Spec.MaxReservedTime = tc.maxBackups, tc.maxReservedTime
			s.Spec.BackupTemplate.Template.CleanPolicy = tc.template
			b := NewBackup(s, tick)
			if got := b.Spec.Template.CleanPolicy; got != tc.want {
				t.Errorf("the backup's spec.template.cleanPolicy = %q, want %q", got, tc.want)
			}
			if got := s.Spec.BackupTemplate.Template.CleanPolicy; got != tc.template {
				t.Errorf("NewBackup changed the schedule's template cleanPolicy to %q", got)
			}
		})
	}
}
