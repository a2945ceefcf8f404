package volumebackup

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// completeBackup is backup() Complete, its storage on S3.
func completeBackup() *fedv1alpha1.VolumeBackup {
	b := backup()
	b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "nightly"}}
	b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.AllCompleteReason}}
	return b
}

// verifying is a restore named name of b's every plane from its member's storage, with verify,
// completed at t with Checked of status and message (no Checked when status is "").
func verifying(b *fedv1alpha1.VolumeBackup, name string, t time.Time, status metav1.ConditionStatus, msg string) *fedv1alpha1.VolumeRestore {
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace}}
	r.Spec.Template.Verify = true
	for _, c := range b.Spec.Clusters {
		r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: c.K8sClusterName, TCName: "tc", TCNamespace: "scratch",
			Backup: b.Spec.Template.MemberStorage(c.K8sClusterName)})
	}
	r.Status.TimeCompleted, r.Status.TimeTaken = &metav1.Time{Time: t}, "12m3s"
	r.Status.Steps = []fedv1alpha1.VolumeRestoreStep{{StepName: "RestoreVolume", TimeTaken: "5m"}, {StepName: "Verify", TimeTaken: "3s"}}
	r.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeRestoreCompleteCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.AllCompleteReason}}
	if status != "" {
		r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeRestoreCheckedCondition, Status: status, Reason: "R", Message: msg})
	}
	return r
}

// TestVerified: a Complete backup's Verified is the verdict of the latest judged restore that
// restores all of it, from its own storage, with verify; any other restore does not count.
func TestVerified(t *testing.T) {
	b := completeBackup()
	t1, t2 := t0.Add(time.Hour), t0.Add(2*time.Hour)
	passed := verifying(b, "drill-1", t1, metav1.ConditionTrue, "dp1: 9 stores, 18 regions")
	with := func(r *fedv1alpha1.VolumeRestore, f func(*fedv1alpha1.VolumeRestore)) *fedv1alpha1.VolumeRestore {
		r = r.DeepCopy()
		f(r)
		return r
	}
	for _, tt := range []struct {
		name     string
		backup   *fedv1alpha1.VolumeBackup
		restores []*fedv1alpha1.VolumeRestore
		// status and reason of Verified ("": none), a piece of its message, the restore recorded.
		status  metav1.ConditionStatus
		reason  string
		msg     string
		restore string
	}{
		{name: "no restore: no verdict", backup: b},
		{name: "passed: Verified True, the recovery time and its split recorded", backup: b, restores: []*fedv1alpha1.VolumeRestore{passed},
			status: metav1.ConditionTrue, reason: fedv1alpha1.VolumeRestoreChecksPassedReason, msg: "restore drill-1 restored it in 12m3s and its checks passed: dp1: 9 stores", restore: "drill-1"},
		{name: "a check failed: Verified False naming it", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{verifying(b, "drill-1", t1, metav1.ConditionFalse, "dp1: every TiKV store is Up: store 5 is Down")},
			status:   metav1.ConditionFalse, reason: fedv1alpha1.VolumeRestoreVerificationFailedReason, msg: "store 5 is Down", restore: "drill-1"},
		{name: "the restore failed: Verified False RestoreFailed with its reason", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(verifying(b, "drill-1", t1, "", ""), func(r *fedv1alpha1.VolumeRestore) {
				r.Status.TimeCompleted = nil
				r.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeRestoreFailedCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.MemberFailedReason,
					Message: "member in az2 failed: InvalidBackup: tampered", LastTransitionTime: metav1.NewTime(t1)}}
			})},
			status: metav1.ConditionFalse, reason: fedv1alpha1.VolumeBackupRestoreFailedReason, msg: "restore drill-1 failed: MemberFailed: member in az2 failed: InvalidBackup", restore: "drill-1"},
		{name: "the latest judged restore wins", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{verifying(b, "drill-2", t2, metav1.ConditionFalse, "x failed"), passed},
			status:   metav1.ConditionFalse, reason: fedv1alpha1.VolumeRestoreVerificationFailedReason, restore: "drill-2"},
		{name: "a restore still running does not count", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{passed, with(verifying(b, "drill-2", t2, "", ""), func(r *fedv1alpha1.VolumeRestore) { r.Status = fedv1alpha1.VolumeRestoreStatus{} })},
			status:   metav1.ConditionTrue, restore: "drill-1"},
		{name: "a restore without verify does not count", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(passed, func(r *fedv1alpha1.VolumeRestore) { r.Spec.Template.Verify = false })}},
		{name: "a restore of another storage in one plane does not vouch for this backup", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(passed, func(r *fedv1alpha1.VolumeRestore) { r.Spec.Clusters[1].Backup.S3.Prefix = "other-az2" })}},
		{name: "a restore of some planes only does not count", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(passed, func(r *fedv1alpha1.VolumeRestore) { r.Spec.Clusters = r.Spec.Clusters[:2] })}},
		{name: "a restore of another namespace does not count", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(passed, func(r *fedv1alpha1.VolumeRestore) { r.Namespace = "other" })}},
		{name: "a restore naming a plane twice does not count", backup: b,
			restores: []*fedv1alpha1.VolumeRestore{with(passed, func(r *fedv1alpha1.VolumeRestore) { r.Spec.Clusters[2] = r.Spec.Clusters[1] })}},
		{name: "an older verdict never replaces a newer one (its restore deleted since, as a drill's)",
			backup: func() *fedv1alpha1.VolumeBackup {
				b := completeBackup()
				b.Status.Verification = &fedv1alpha1.VolumeBackupVerification{Restore: "drill-9", TimeJudged: metav1.NewTime(t2)}
				b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeBackupVerifiedCondition, Status: metav1.ConditionFalse,
					Reason: fedv1alpha1.VolumeRestoreVerificationFailedReason})
				return b
			}(),
			restores: []*fedv1alpha1.VolumeRestore{passed}, status: metav1.ConditionFalse, restore: "drill-9"},
		{name: "a backup not Complete gets no verdict",
			backup: func() *fedv1alpha1.VolumeBackup {
				b := completeBackup()
				b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupFailedCondition, Status: metav1.ConditionTrue, Reason: "R"}}
				return b
			}(),
			restores: []*fedv1alpha1.VolumeRestore{passed}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Observed{Backup: tt.backup, Members: map[string]Member{}, Known: all(), Reachable: all(), Restores: tt.restores}
			st := Plan(o, t2.Add(time.Minute)).Status
			c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition)
			if tt.status == "" {
				if c != nil || st.Verification != nil {
					t.Fatalf("Verified %+v, verification %+v: want none", c, st.Verification)
				}
				return
			}
			if c == nil || c.Status != tt.status || tt.reason != "" && c.Reason != tt.reason || !strings.Contains(c.Message, tt.msg) {
				t.Fatalf("Verified %+v, want %s %s with %q", c, tt.status, tt.reason, tt.msg)
			}
			if st.Verification == nil || st.Verification.Restore != tt.restore {
				t.Fatalf("verification %+v, want restore %s", st.Verification, tt.restore)
			}
			if tt.status == metav1.ConditionTrue && (st.Verification.TimeTaken != "12m3s" || len(st.Verification.Steps) != 2 || st.Verification.Steps[1].StepName != "Verify") {
				t.Errorf("verification %+v: want the restore's time taken and steps", st.Verification)
			}
		})
	}
}
