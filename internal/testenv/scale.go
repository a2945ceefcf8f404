package testenv

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// ScaleTS is the commit ts of the scale measurements' members.
const ScaleTS = "470802380936708097"

// SnapshotResult is a snapshot step's result of n volumes, as long as a real one.
func SnapshotResult(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"backupID":"b","resolvedTS":` + ScaleTS + `,"snapshots":[`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"storeID":%d,"volumeID":"vol-%017x","snapshotID":"snap-%017x","device":"/dev/xvdb","sizeGiB":1000,"startedAt":"2026-12-01T10:00:00Z","completedAt":"2026-12-01T10:20:00Z"}`, i+1, i, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// CompleteBackupMemberStatus is a backup member's status as the agent and its steps leave it
// once its 10 snapshots completed and were sized, half an hour before now.
func CompleteBackupMemberStatus(backupPath string, now time.Time) dpv1alpha1.VolumeBackupMemberStatus {
	mt := metav1.NewMicroTime(now.Add(-30 * time.Minute))
	st := dpv1alpha1.VolumeBackupMemberStatus{Phase: "Complete", CommitTs: ScaleTS, BackupPath: backupPath,
		SnapshotsTotal: 10, SnapshotsCompleted: 10, BackupSize: 10 << 40, IncrementalBackupSize: 1 << 40,
		TimeStarted: &metav1.Time{Time: now.Add(-time.Hour)}, TimeCompleted: &metav1.Time{Time: now.Add(-30 * time.Minute)},
		Steps: []dpv1alpha1.StepReport{
			{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseStopped, BackupTS: 470802380936708097, GCPausedAt: &mt, LiftedAt: &mt},
			{Name: dpv1alpha1.StepSnapshot, Phase: "Completed", BackupTS: 470802380936708097, StartedAt: &mt, CompletedAt: &mt, Done: 10, Total: 10,
				Result: &runtime.RawExtension{Raw: SnapshotResult(10)}},
			{Name: dpv1alpha1.StepSize, Phase: "Completed", Sized: 10, SizedBytes: 10 << 40, Result: &runtime.RawExtension{Raw: []byte(`{"backupSize":10995116277760}`)}},
		}}
	st.Conditions = conditionsTrue(now, dpv1alpha1.BackupMemberArmedCondition, dpv1alpha1.BackupMemberInitializedCondition,
		dpv1alpha1.BackupMemberSnapshotsCreatedCondition, dpv1alpha1.BackupMemberGCResumedCondition, dpv1alpha1.BackupMemberCompleteCondition,
		dpv1alpha1.BackupMemberSizedCondition)
	return st
}

// CompleteRestoreMemberStatus is a restore member's status as the agent and its steps leave it
// once its 10 volumes were restored and TiKV restarted; the data member's with its echo of the
// restored ts and DataComplete.
func CompleteRestoreMemberStatus(data bool, now time.Time) dpv1alpha1.VolumeRestoreMemberStatus {
	st := dpv1alpha1.VolumeRestoreMemberStatus{Phase: "Complete", CommitTs: ScaleTS, VolumesTotal: 10, VolumesReady: 10,
		TimeStarted: &metav1.Time{Time: now.Add(-time.Hour)}, TimeCompleted: &metav1.Time{Time: now.Add(-30 * time.Minute)},
		Steps: []dpv1alpha1.StepReport{{Name: dpv1alpha1.StepRestoreVolumes, Phase: "Completed", Done: 10, Total: 10,
			Result: &runtime.RawExtension{Raw: SnapshotResult(10)}}}}
	conds := []string{dpv1alpha1.RestoreMemberTargetCheckedCondition, dpv1alpha1.RestoreMemberVolumeCompleteCondition,
		dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberCompleteCondition}
	if data {
		st.RestoredTS = ScaleTS
		conds = append(conds, dpv1alpha1.RestoreMemberDataCompleteCondition)
	}
	st.Conditions = conditionsTrue(now, conds...)
	return st
}

func conditionsTrue(now time.Time, types ...string) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range types {
		out = append(out, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Scale", Message: "as the agent leaves it",
			LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Minute))})
	}
	return out
}
