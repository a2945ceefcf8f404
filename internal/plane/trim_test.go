package plane

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// TestTrimKeepsWhatTheManagerReadsOfABackupMember: of a padded backup member the trim keeps
// exactly the fields trim.go lists (the owner labels, the step clock at the same instant, the
// read conditions, the pause and snapshot steps' read fields), and trimming again changes
// nothing.
func TestTrimKeepsWhatTheManagerReadsOfABackupMember(t *testing.T) {
	m := paddedBackupMember(0)
	m.UID, m.ResourceVersion, m.Generation = "uid-1", "7", 3
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "fedbr-br-pause"}}
	m.Status.Phase, m.Status.BackupPath, m.Status.CommitTs = "Running", "s3://backups/nightly", "1000"
	got := TrimBackupMember(m.DeepCopy())
	since := metav1.ObjectMeta{Annotations: map[string]string{dpv1alpha1.AnnotationPhaseSince: "2026-12-06T12:00:00Z"}}
	if len(m.Annotations[dpv1alpha1.AnnotationPhaseSince]) < 16<<10 || !phaseSince(&m.ObjectMeta).Equal(phaseSince(&since)) {
		t.Fatalf("the padded step clock %q… is not the time it should be", m.Annotations[dpv1alpha1.AnnotationPhaseSince][:40])
	}
	p, s := m.Status.Steps[0], m.Status.Steps[1]
	f := func(c metav1.Condition) metav1.Condition {
		return metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	st := func(c metav1.Condition) metav1.Condition { return metav1.Condition{Type: c.Type, Status: c.Status} }
	want := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: "uid-1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{dpv1alpha1.LabelOwnerName: m.Labels[dpv1alpha1.LabelOwnerName], dpv1alpha1.LabelOwnerNamespace: m.Labels[dpv1alpha1.LabelOwnerNamespace],
				dpv1alpha1.LabelOwnerUID: m.Labels[dpv1alpha1.LabelOwnerUID]},
			Annotations: since.Annotations},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{Phase: m.Spec.Phase, BackupTS: m.Spec.BackupTS, StartPause: true, ResumeGC: true},
		Status: dpv1alpha1.VolumeBackupMemberStatus{Phase: "Running", BackupPath: "s3://backups/nightly", CommitTs: "1000", BackupSize: 1, IncrementalBackupSize: 1,
			Conditions: []metav1.Condition{f(m.Status.Conditions[0]), f(m.Status.Conditions[1]), st(m.Status.Conditions[2]), st(m.Status.Conditions[3])},
			Steps: []dpv1alpha1.StepReport{{Name: p.Name, Phase: p.Phase, BackupTS: p.BackupTS, GCPausedAt: p.GCPausedAt, LiftedAt: p.LiftedAt},
				{Name: s.Name, Phase: s.Phase, StartedAt: s.StartedAt}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("trimmed member (-want +got):\n%s", d)
	}
	if d := cmp.Diff(got, TrimBackupMember(got.DeepCopy())); d != "" {
		t.Errorf("trimming twice changed the member (-once +twice):\n%s", d)
	}
}

// TestTrimKeepsWhatTheManagerReadsOfARestoreMember: the same for a restore member, whose steps
// the manager does not read.
func TestTrimKeepsWhatTheManagerReadsOfARestoreMember(t *testing.T) {
	m := paddedRestoreMember(0)
	m.Status.Phase, m.Status.CommitTs, m.Status.RestoredTS = "Running", "400", "400"
	m.Annotations[dpv1alpha1.AnnotationPhaseSince] = "2026-12-06T13:00:00.5+01:00"
	got := TrimRestoreMember(m.DeepCopy())
	f := func(c metav1.Condition) metav1.Condition {
		return metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	st := func(c metav1.Condition) metav1.Condition { return metav1.Condition{Type: c.Type, Status: c.Status} }
	cs := m.Status.Conditions
	want := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
			Labels: map[string]string{dpv1alpha1.LabelOwnerName: m.Labels[dpv1alpha1.LabelOwnerName], dpv1alpha1.LabelOwnerNamespace: m.Labels[dpv1alpha1.LabelOwnerNamespace],
				dpv1alpha1.LabelOwnerUID: m.Labels[dpv1alpha1.LabelOwnerUID]},
			Annotations: map[string]string{dpv1alpha1.AnnotationPhaseSince: "2026-12-06T13:00:00.5+01:00"}},
		Spec:   dpv1alpha1.VolumeRestoreMemberSpec{Phase: m.Spec.Phase, DataMember: true, ResolvedTS: m.Spec.ResolvedTS},
		Status: dpv1alpha1.VolumeRestoreMemberStatus{Phase: "Running", CommitTs: "400", RestoredTS: "400", Conditions: []metav1.Condition{f(cs[0]), f(cs[1]), st(cs[2]), st(cs[3]), st(cs[4]), st(cs[5]), f(cs[6])}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("trimmed member (-want +got):\n%s", d)
	}
	if d := cmp.Diff(got, TrimRestoreMember(got.DeepCopy())); d != "" {
		t.Errorf("trimming twice changed the member (-once +twice):\n%s", d)
	}
}

// TestTrimRefusesAStatusTooLargeToKeep: a status.phase, status.commitTs or (backup)
// status.backupPath over its bound leaves a cached status of one Failed condition naming the
// field, and trimming that again keeps it; a field at its bound is kept.
func TestTrimRefusesAStatusTooLargeToKeep(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*dpv1alpha1.VolumeBackupMemberStatus, string)
		max   int
	}{
		{"phase", func(s *dpv1alpha1.VolumeBackupMemberStatus, v string) { s.Phase = v }, MaxMemberPhase},
		{"commitTs", func(s *dpv1alpha1.VolumeBackupMemberStatus, v string) { s.CommitTs = v }, MaxMemberCommitTs},
		{"backupPath", func(s *dpv1alpha1.VolumeBackupMemberStatus, v string) { s.BackupPath = v }, MaxMemberBackupPath},
	} {
		m := &dpv1alpha1.VolumeBackupMember{}
		m.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.BackupMemberCompleteCondition, Status: metav1.ConditionTrue}}
		tc.set(&m.Status, strings.Repeat("x", tc.max))
		if got := TrimBackupMember(m); len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != dpv1alpha1.BackupMemberCompleteCondition {
			t.Errorf("status.%s of %d bytes (the bound): conditions %+v, want Complete kept", tc.field, tc.max, got.Status.Conditions)
		}
		tc.set(&m.Status, strings.Repeat("x", 1<<20))
		got := TrimBackupMember(m)
		want := dpv1alpha1.VolumeBackupMemberStatus{Conditions: []metav1.Condition{{Type: dpv1alpha1.BackupMemberFailedCondition, Status: metav1.ConditionTrue,
			Reason: StatusTooLargeReason, Message: "status." + tc.field + " is 1048576 bytes, more than the " + strconv.Itoa(tc.max) + " the manager reads of it: the manager ignores this member's status"}}}
		if d := cmp.Diff(want, got.Status); d != "" {
			t.Errorf("status.%s of 1 MiB (-want +got):\n%s", tc.field, d)
		}
		if d := cmp.Diff(got, TrimBackupMember(got.DeepCopy())); d != "" {
			t.Errorf("trimming a refused member twice changed it:\n%s", d)
		}
	}
	r := &dpv1alpha1.VolumeRestoreMember{}
	r.Status.CommitTs = strings.Repeat("1", MaxMemberCommitTs+1)
	if c := TrimRestoreMember(r).Status.Conditions; len(c) != 1 || c[0].Type != dpv1alpha1.RestoreMemberFailedCondition || c[0].Reason != StatusTooLargeReason ||
		!strings.HasPrefix(c[0].Message, "status.commitTs is 33 bytes") {
		t.Errorf("restore member with a 33-byte commitTs: conditions %+v, want Failed %s naming status.commitTs", c, StatusTooLargeReason)
	}
}

// TestPhaseSinceKeepsItsInstant: the step clock is kept at the same instant whatever form its
// RFC 3339 text takes, and dropped when it is no time.
func TestPhaseSinceKeepsItsInstant(t *testing.T) {
	for _, v := range []string{"2026-12-06T12:00:00Z", "2026-12-06T12:00:00.123456789Z", "2026-12-06T12:00:00.1234567891234Z",
		"2026-12-06T13:00:00+01:00", "2026-12-06T12:00:00." + strings.Repeat("9", 4096) + "-07:00", "", "yesterday", "2026-12-06 12:00:00Z"} {
		m := metav1.ObjectMeta{Annotations: map[string]string{dpv1alpha1.AnnotationPhaseSince: v}}
		kept := keptMeta(&m)
		if !phaseSince(&kept).Equal(phaseSince(&m)) {
			t.Errorf("phase-since %.40q: kept as %q, %v; was %v", v, kept.Annotations[dpv1alpha1.AnnotationPhaseSince], phaseSince(&kept), phaseSince(&m))
		}
		if len(kept.Annotations[dpv1alpha1.AnnotationPhaseSince]) > 40 {
			t.Errorf("phase-since %.40q kept as %d bytes", v, len(kept.Annotations[dpv1alpha1.AnnotationPhaseSince]))
		}
	}
}

// phaseSince reads the step clock as federation.PhaseSince does (that package imports this one).
func phaseSince(m *metav1.ObjectMeta) time.Time {
	t, err := time.Parse(time.RFC3339, m.Annotations[dpv1alpha1.AnnotationPhaseSince])
	if err != nil {
		return time.Time{}
	}
	return t
}

// TestCacheOptions: every object loses its managedFields, the member kinds are trimmed where the
// scheme knows them, and a deletion tombstone passes as it is.
func TestCacheOptions(t *testing.T) {
	empty := CacheOptions(k8sruntime.NewScheme())
	if len(empty.ByObject) != 0 || empty.DefaultTransform == nil {
		t.Fatalf("options for an empty scheme: %d kinds trimmed, default transform %v", len(empty.ByObject), empty.DefaultTransform != nil)
	}
	s := k8sruntime.NewScheme()
	if err := dpv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	o := CacheOptions(s)
	var trims []toolscache.TransformFunc
	for obj, b := range o.ByObject {
		switch obj.(type) {
		case *dpv1alpha1.VolumeBackupMember, *dpv1alpha1.VolumeRestoreMember:
			trims = append(trims, b.Transform)
		}
	}
	if len(trims) != 2 {
		t.Fatalf("%d member kinds trimmed, want 2", len(trims))
	}
	b := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", Finalizers: []string{"x"}}}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "default/m", Obj: b}
	for _, f := range trims {
		if out, err := f(tomb); err != nil || out != any(tomb) {
			t.Errorf("tombstone transformed to %v, %v", out, err)
		}
	}
	out, err := o.DefaultTransform(&dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "m", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}})
	if err != nil || out.(*dpv1alpha1.VolumeBackupMember).ManagedFields != nil {
		t.Errorf("default transform left managedFields: %+v, %v", out, err)
	}
}
