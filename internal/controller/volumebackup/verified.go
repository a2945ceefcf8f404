package volumebackup

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Verifies says whether restore r restores backup b to check it: its template asks for verify,
// it is in b's namespace, and it restores every data plane of b, each from the storage b's member
// of that plane wrote, and nothing else. It is derived from what r restores, never from a label
// or a name, so a restore cannot vouch for a backup it did not restore.
func Verifies(b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) bool {
	if !r.Spec.Template.Verify || r.Namespace != b.Namespace || len(r.Spec.Clusters) != len(b.Spec.Clusters) || len(b.Spec.Clusters) == 0 {
		return false
	}
	want := map[string]fedv1alpha1.StorageProvider{}
	for _, c := range b.Spec.Clusters {
		want[c.K8sClusterName] = b.Spec.Template.MemberStorage(c.K8sClusterName)
	}
	for _, c := range r.Spec.Clusters {
		w, ok := want[c.K8sClusterName]
		if !ok || !equality.Semantic.DeepEqual(w, c.Backup) {
			return false
		}
		delete(want, c.K8sClusterName)
	}
	return len(want) == 0
}

// judged is when restore r was judged: when it completed (its checks judged first) or failed.
func judged(r *fedv1alpha1.VolumeRestore) (time.Time, bool) {
	if c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time, true
	}
	if meta.IsStatusConditionTrue(r.Status.Conditions, fedv1alpha1.VolumeRestoreCompleteCondition) && r.Status.TimeCompleted != nil {
		return r.Status.TimeCompleted.Time, true
	}
	return time.Time{}, false
}

// verify records, as the backup's Verified condition and status.verification, the verdict of
// the latest judged restore among o.Restores that verifies the backup. A verdict is replaced
// only by a later one: a verifying restore deleted afterwards (a drill's teardown) leaves its
// verdict standing.
func verify(o Observed, st *fedv1alpha1.VolumeBackupStatus, now time.Time) {
	var latest *fedv1alpha1.VolumeRestore
	var at time.Time
	for _, r := range o.Restores {
		if !Verifies(o.Backup, r) {
			continue
		}
		t, ok := judged(r)
		if !ok {
			continue
		}
		if latest == nil || t.After(at) || t.Equal(at) && r.Name > latest.Name {
			latest, at = r, t
		}
	}
	if latest == nil || st.Verification != nil && at.Before(st.Verification.TimeJudged.Time) {
		return
	}
	v := &fedv1alpha1.VolumeBackupVerification{Restore: latest.Name, TimeJudged: metav1.NewTime(at)}
	if n := len(latest.Status.Steps); n > 0 {
		v.Steps = append([]fedv1alpha1.VolumeRestoreStep(nil), latest.Status.Steps[:min(n, maxVerificationSteps)]...)
	}
	c := metav1.Condition{Type: fedv1alpha1.VolumeBackupVerifiedCondition, Status: metav1.ConditionFalse}
	checked := meta.FindStatusCondition(latest.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition)
	switch failed := meta.FindStatusCondition(latest.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition); {
	case failed != nil && failed.Status == metav1.ConditionTrue:
		c.Reason, c.Message = fedv1alpha1.VolumeBackupRestoreFailedReason, fmt.Sprintf("restore %s failed: %s: %s", latest.Name, failed.Reason, failed.Message)
	case checked == nil:
		c.Reason, c.Message = fedv1alpha1.VolumeRestoreVerificationFailedReason, fmt.Sprintf("restore %s completed without its checks' verdict", latest.Name)
	case checked.Status == metav1.ConditionTrue:
		v.TimeTaken = latest.Status.TimeTaken
		c.Status, c.Reason = metav1.ConditionTrue, fedv1alpha1.VolumeRestoreChecksPassedReason
		c.Message = fmt.Sprintf("restore %s restored it in %s and its checks passed: %s", latest.Name, latest.Status.TimeTaken, checked.Message)
	default:
		v.TimeTaken = latest.Status.TimeTaken
		c.Reason, c.Message = fedv1alpha1.VolumeRestoreVerificationFailedReason, fmt.Sprintf("restore %s: %s", latest.Name, checked.Message)
	}
	st.Verification = v
	setCondition(st, c, now)
}

// maxVerificationSteps bounds status.verification.steps (the CRD's MaxItems).
const maxVerificationSteps = 16
