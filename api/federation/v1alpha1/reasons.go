package v1alpha1

// Reasons of the conditions the manager writes on VolumeBackups, VolumeRestores and
// VolumeBackupSchedules, grouped by condition type. A reason VolumeBackups and VolumeRestores
// both set with the same meaning has one constant without a kind prefix; the others are
// prefixed with their kind, as the condition types are. The values are API: alerts and tests
// match on them.

// Reasons of the Failed condition (True) of VolumeBackups and VolumeRestores; Ready is set
// False with the same reason and message.
const (
	// UnknownClusterReason: a k8sClusterName of spec.clusters has no context in the manager's
	// kubeconfig.
	UnknownClusterReason = "UnknownCluster"
	// NamespaceNotWatchedReason: a cluster's tcNamespace is not among the data-plane namespaces
	// the manager watches (its --dataplane-namespaces), where its identity may act.
	NamespaceNotWatchedReason = "NamespaceNotWatched"
	// MemberFailedReason: a member's Failed condition is True; the message names its data plane
	// and gives its reason and message.
	MemberFailedReason = "MemberFailed"
	// StepTimeoutReason: a member stayed in one phase longer than stepTimeout.
	StepTimeoutReason = "StepTimeout"
)

// Reasons of the Ready condition of VolumeBackups and VolumeRestores, beside the kinds' own.
const (
	// ClusterUnreachableReason: False while data planes (named in the message) cannot be read,
	// or a backup waits for its first one to answer before another may hold the pause.
	ClusterUnreachableReason = "ClusterUnreachable"
	// AllCompleteReason: True once the backup or restore is complete; Complete is True with the
	// same reason.
	AllCompleteReason = "AllComplete"
)

// Reasons of a VolumeBackup's Ready condition, beside the shared ones above.
const (
	// VolumeBackupWaitingForBackupReason: False while another VolumeBackup that pauses the
	// same TiDB cluster goes first; the message names it and when this one fails.
	VolumeBackupWaitingForBackupReason = "WaitingForBackup"
	// VolumeBackupInitializingReason: False while the initializer's member is created and
	// asked to pause. GCPaused is True with this reason once its pause holds.
	VolumeBackupInitializingReason = "Initializing"
	// VolumeBackupArmingReason: False while the pause waits for every member's snapshot step to
	// be armed.
	VolumeBackupArmingReason = "Arming"
	// VolumeBackupSnapshottingReason: False while the pause holds and not every member has
	// started its snapshots.
	VolumeBackupSnapshottingReason = "Snapshotting"
	// VolumeBackupDeletingReason: False while a deleted backup's members are deleted (and no
	// member's clean fails).
	VolumeBackupDeletingReason = "Deleting"
)

// Reasons of a VolumeBackup's GCPaused condition, beside VolumeBackupInitializingReason.
const (
	// VolumeBackupPauseStartingReason: Unknown once the initializer was asked to pause, until
	// its pause holds.
	VolumeBackupPauseStartingReason = "PauseStarting"
	// VolumeBackupGCResumedReason: False once the initializer's member reports GCResumed, or,
	// for a deleted backup, its member is gone.
	VolumeBackupGCResumedReason = "GCResumed"
)

// Reasons of a VolumeBackup's SnapshotsCreated condition.
const (
	// VolumeBackupAllSnapshotsStartedReason: True once every member's snapshot step reports its
	// snapshots started.
	VolumeBackupAllSnapshotsStartedReason = "AllSnapshotsStarted"
)

// Reasons of a VolumeBackup's Failed condition, beside the shared ones above.
const (
	// VolumeBackupBadBackupTSReason: the initializer's member left phase initialize, but its
	// pause step reports no backup ts it holds.
	VolumeBackupBadBackupTSReason = "BadBackupTS"
	// VolumeBackupPauseWaitTimeoutReason: another VolumeBackup that pauses the same TiDB
	// cluster did not lift its pause within pauseWaitTimeout from this backup's start.
	VolumeBackupPauseWaitTimeoutReason = "PauseWaitTimeout"
)

// Reasons of a VolumeBackup's Cleaned condition, set while it is deleted.
const (
	// VolumeBackupCleaningReason: False while the members are being deleted and clean per
	// cleanPolicy.
	VolumeBackupCleaningReason = "Cleaning"
	// VolumeBackupCleanFailedReason: False while a member's clean fails (retrying, or given
	// up); the message says which data plane and why. Ready is False with this reason too.
	VolumeBackupCleanFailedReason = "CleanFailed"
)

// Reasons of a VolumeRestore's Ready condition, beside the shared ones above.
const (
	// VolumeRestoreRestoringVolumesReason: False until every member's TiKV runs in recovery
	// mode on its restored volumes; then TikvComplete is True with this reason.
	VolumeRestoreRestoringVolumesReason = "RestoringVolumes"
	// VolumeRestoreRestoringDataReason: False while the data member runs restore-data.
	// DataComplete is True with this reason once the data is recovered.
	VolumeRestoreRestoringDataReason = "RestoringData"
	// VolumeRestoreFinishingReason: False while TiKV restarts out of recovery mode.
	VolumeRestoreFinishingReason = "Finishing"
	// VolumeRestoreWarmingUpReason: False while TiKV serves the restored data and an async
	// warm-up still reads volumes.
	VolumeRestoreWarmingUpReason = "WarmingUp"
)

// Reasons of a VolumeRestore's Failed condition, beside the shared ones above.
const (
	// VolumeRestoreBadCommitTSReason: a member reports no commit ts (its backupmeta gives no
	// resolved ts) when restore-data is to start.
	VolumeRestoreBadCommitTSReason = "BadCommitTS"
	// VolumeRestoreRestoredTSMismatchReason: the data member reports the data restored to
	// another ts than the one the manager decided (its spec.resolvedTS), or to none.
	VolumeRestoreRestoredTSMismatchReason = "RestoredTSMismatch"
)

// Reasons of a VolumeRestore's WarmUpComplete condition.
const (
	// VolumeRestoreWarmedUpReason: True once every member's warm-up finished and none failed.
	VolumeRestoreWarmedUpReason = "WarmedUp"
	// VolumeRestoreWarmUpFailedReason: True once every member's warm-up finished and some
	// failed (the message names the data planes); the restore goes on.
	VolumeRestoreWarmUpFailedReason = "WarmUpFailed"
)

// Reasons of a VolumeRestore's Checked condition (template.verify), as its data member's.
const (
	// VolumeRestoreChecksPassedReason: True once every check of the restored cluster passed.
	VolumeRestoreChecksPassedReason = "ChecksPassed"
	// VolumeRestoreVerificationFailedReason: False once a check failed (the message names it)
	// or the checks could not run.
	VolumeRestoreVerificationFailedReason = "VerificationFailed"
	// VolumeRestoreCheckingReason: False while the checks run, in the restore's Ready condition.
	VolumeRestoreCheckingReason = "Checking"
)

// Reasons of a VolumeBackup's Verified condition (besides VolumeRestoreChecksPassedReason and
// VolumeRestoreVerificationFailedReason, which it takes from the verifying restore's Checked).
const (
	// VolumeBackupRestoreFailedReason: False when the restore meant to verify the backup failed.
	VolumeBackupRestoreFailedReason = "RestoreFailed"
)

// Reasons of a VolumeBackupSchedule's Ready condition.
const (
	// VolumeBackupScheduleScheduledReason: True when no tick is due (the message gives the
	// next) or a backup was created for the latest tick.
	VolumeBackupScheduleScheduledReason = "Scheduled"
	// VolumeBackupSchedulePausedReason: True while spec.pause is set: no new backups;
	// retention still runs.
	VolumeBackupSchedulePausedReason = "Paused"
	// VolumeBackupScheduleInvalidScheduleReason: False when spec.schedule cannot be parsed.
	VolumeBackupScheduleInvalidScheduleReason = "InvalidSchedule"
	// VolumeBackupScheduleSkippedPreviousRunningReason: True when a tick passed while a
	// scheduled backup was still running; that tick's backup is skipped.
	VolumeBackupScheduleSkippedPreviousRunningReason = "SkippedPreviousRunning"
)

// Reasons of a VolumeBackupSchedule's Drill condition (spec.verify).
const (
	// VolumeBackupScheduleDrillRunningReason: True while a drill runs or is torn down (the
	// message names its VolumeRestore and backup).
	VolumeBackupScheduleDrillRunningReason = "DrillRunning"
	// VolumeBackupScheduleDrillWaitingReason: True while no drill runs: the message says which
	// backup the next one drills, or what it waits for.
	VolumeBackupScheduleDrillWaitingReason = "DrillWaiting"
	// VolumeBackupScheduleDrillTimedOutReason: False once a drill was not judged within
	// spec.verify.timeout and was deleted; until the next drill starts.
	VolumeBackupScheduleDrillTimedOutReason = "DrillTimedOut"
	// VolumeBackupScheduleDrillTooLargeReason: False when the backup due for a drill is larger
	// than spec.verify.maxBackupSize, or its size is never measured; until the next drill.
	VolumeBackupScheduleDrillTooLargeReason = "DrillTooLarge"
)

// Reasons of a VolumeBackupSchedule's Retention condition.
const (
	// VolumeBackupScheduleNoRetentionReason: True when neither maxBackups nor maxReservedTime
	// is set; every backup is kept.
	VolumeBackupScheduleNoRetentionReason = "NoRetention"
	// VolumeBackupScheduleIdleReason: True when no backup is due for deletion.
	VolumeBackupScheduleIdleReason = "Idle"
	// VolumeBackupScheduleDeletingReason: True while one of the schedule's backups is being
	// deleted (by retention or by hand); the next deletion waits for it.
	VolumeBackupScheduleDeletingReason = "Deleting"
	// VolumeBackupScheduleCleanFailedReason: False while a backup being deleted cannot be
	// cleaned; retention waits for it (the message names it and says why).
	VolumeBackupScheduleCleanFailedReason = "CleanFailed"
)

// Reasons of a VolumeBackupSchedule's RetentionKeepsSnapshots condition, beside
// VolumeBackupScheduleNoRetentionReason (False: no retention, nothing is deleted).
const (
	// VolumeBackupScheduleCleanPolicyRetainReason: True when retention is on and the backup
	// template says cleanPolicy Retain: each backup retention deletes leaves its snapshots and
	// backup metadata behind. The message says how to change it.
	VolumeBackupScheduleCleanPolicyRetainReason = "CleanPolicyRetain"
	// VolumeBackupScheduleCleanPolicyOnFailureReason: True when retention is on and the backup
	// template says cleanPolicy OnFailure: each complete backup retention deletes leaves its
	// snapshots and backup metadata behind (failed ones are cleaned).
	VolumeBackupScheduleCleanPolicyOnFailureReason = "CleanPolicyOnFailure"
	// VolumeBackupScheduleCleanPolicyDeleteReason: False when retention is on and the scheduled
	// backups have cleanPolicy Delete, the template's or, when the template leaves it unset, the
	// one the schedule writes into each backup it creates.
	VolumeBackupScheduleCleanPolicyDeleteReason = "CleanPolicyDelete"
)
