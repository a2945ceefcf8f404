package v1alpha1

// Reasons of the conditions the agent writes on VolumeBackupMembers and VolumeRestoreMembers,
// grouped by condition type. A reason both member kinds set with the same meaning has one
// constant without a kind prefix; the others are prefixed with their kind, as the condition
// types are. The values are API: alerts and tests match on them.

// Reasons of the Failed condition (True) of both member kinds.
const (
	// TidbClusterNotFoundReason: the member's TidbCluster does not exist in its data plane.
	TidbClusterNotFoundReason = "TidbClusterNotFound"
	// NoPDAddressReason: the TidbCluster has no PD member with a client URL in its status and no
	// spec.pdAddresses when the pause, snapshot or restore-data step is about to start.
	NoPDAddressReason = "NoPDAddress"
	// InvalidStorageReason: the storage a step needs cannot be used (the template's storage of a
	// backup, spec.backup of a restore).
	InvalidStorageReason = "InvalidStorage"
	// InvalidReportReason: a step's Job succeeded without reporting its result in the member's
	// status.steps, or the result it reported cannot be read or is out of bounds (restore-volumes'
	// backup and result: sizes, counts, names, ids).
	InvalidReportReason = "InvalidReport"
	// DeadlineExceededReason: the pause's Job was stopped at its active deadline
	// (volumeBackupInitJobMaxActiveSeconds). The other steps' deadlines fail what they belong to
	// in their own words (the size, the clean, the lift, an async warm-up); the manager times
	// the member's phases (StepTimeout).
	DeadlineExceededReason = "DeadlineExceeded"
	// ProgressStalledReason: a long step (the snapshot step's wait for its snapshots, a
	// warm-up TiKV waits for) reported no progress for stallTimeout; the message names the
	// step, its progress and since when it has not moved.
	ProgressStalledReason = "ProgressStalled"
)

// Reasons of the Failed condition (True) of both member kinds when the agent's policy refuses
// the member (package internal/agent/policy; the agent's --allow-* flags): each is the name of
// the rule the member breaks, and the message names every field and value that breaks a rule.
// The agent judges a member before it creates any pod for it, and judges every pod it builds
// again. A pod refused later (a clean, a size or lift step, an async warm-up, when the policy
// changed in between) sets the condition that step reports on instead (Cleaned, Sized,
// GCResumed, WarmUpComplete), its message naming the rule.
const (
	// NamespaceNotAllowedReason: the member's control-plane namespace (label
	// dataplane.fedbr.io/owner-namespace, which the manager sets) may not act on the member's
	// namespace or on spec.tcNamespace, or the member has no such label.
	NamespaceNotAllowedReason = "NamespaceNotAllowed"
	// StorageNotAllowedReason: the member's S3 storage (a backup's template storage, which
	// carries the member's cluster suffix; a restore's spec.backup) lies under none of the storage
	// roots the policy allows the member's control-plane namespace (by default any bucket, under
	// the prefix named like that namespace), its prefix has an empty, "." or ".." segment or a
	// leading or trailing "/", its bucket a "/" or its location a "?" (which the steps would
	// read as another location), or the member has no owner-namespace label.
	StorageNotAllowedReason = "StorageNotAllowed"
	// ImageNotAllowedReason: template toolImage or warmupImage (or a pod's image) is neither the
	// agent's own image nor matched by an allowed image pattern.
	ImageNotAllowedReason = "ImageNotAllowed"
	// HostPathNotAllowedReason: a volume (template additionalVolumes, a local storage's volume)
	// is a hostPath volume and the policy does not allow hostPath volumes.
	HostPathNotAllowedReason = "HostPathNotAllowed"
	// ServiceAccountNotAllowedReason: template serviceAccount is neither the steps' own service
	// account (fedbr-br) nor an allowed one.
	ServiceAccountNotAllowedReason = "ServiceAccountNotAllowed"
	// CredentialEnvNotAllowedReason: template env sets a variable that chooses the steps'
	// credentials or where they send them (AWS_*, KUBECONFIG, proxies, CA files, …) and the
	// policy does not allow that name.
	CredentialEnvNotAllowedReason = "CredentialEnvNotAllowed" //nolint:gosec // G101: a condition reason naming a rule, not a credential
	// EnvNotAllowedReason: template env sets a variable the policy's allowlist does not name
	// (by default only TZ and the Go runtime's GOMAXPROCS, GOMEMLIMIT and GOGC).
	EnvNotAllowedReason = "EnvNotAllowed"
	// VolumeTypeNotAllowedReason: a volume (template additionalVolumes, a local storage's
	// volume) is of a type the policy does not allow (by default only emptyDir, configMap,
	// secret and persistentVolumeClaim; hostPath has HostPathNotAllowedReason).
	VolumeTypeNotAllowedReason = "VolumeTypeNotAllowed"
	// IdentityMountNotAllowedReason: a volume mount (template additionalVolumeMounts, a local
	// storage's volumeMount) lies over the directory of the pod's Kubernetes or AWS identity
	// token, which would replace the steps' identity.
	IdentityMountNotAllowedReason = "IdentityMountNotAllowed"
	// PrivilegedNotAllowedReason: the member's warm-up reads block devices, which needs a
	// privileged container, and the policy does not allow privileged warm-ups (or a pod other
	// than a warm-up would be privileged).
	PrivilegedNotAllowedReason = "PrivilegedNotAllowed"
	// CapabilitiesNotAllowedReason: a pod's container adds Linux capabilities (allowed only for
	// warm-ups, with privileged warm-ups).
	CapabilitiesNotAllowedReason = "CapabilitiesNotAllowed"
	// HostNamespaceNotAllowedReason: a pod would share the node's network, PID or IPC
	// namespace.
	HostNamespaceNotAllowedReason = "HostNamespaceNotAllowed"
	// ForeignJobReason: a Job carries the member's selector labels (or the name the agent
	// would give a step's Job) but is not controlled by the member: the agent did not create
	// it, never adopts it, and takes nothing it says as a step's outcome.
	ForeignJobReason = "ForeignJob"
)

// Reasons of a VolumeBackupMember's Initialized condition.
const (
	// BackupMemberPauseReadyReason: True once the pause step reports the GC safepoint, PD
	// schedulers and TiKV leases held at its backup ts.
	BackupMemberPauseReadyReason = "PauseReady"
)

// Reasons of a VolumeBackupMember's Armed condition.
const (
	// BackupMemberSnapshotArmedReason: True once the snapshot step reports in status.steps
	// (anything but a failure).
	BackupMemberSnapshotArmedReason = "SnapshotArmed"
)

// Reasons of a VolumeBackupMember's SnapshotsCreated condition.
const (
	// BackupMemberSnapshotsStartedReason: True once the snapshot step reports every snapshot
	// started (or its final result).
	BackupMemberSnapshotsStartedReason = "SnapshotsStarted"
)

// Reasons of a VolumeBackupMember's GCResumed condition.
const (
	// BackupMemberPauseLiftedReason: True once the pause step reports it lifted what it held
	// (liftedAt, or Stopped before it pinned anything), or its Job succeeded.
	BackupMemberPauseLiftedReason = "PauseLifted"
	// BackupMemberPauseEndedReason: True when the pause (its report or its Job) failed after it
	// was asked to stop without recording anything it placed in PD (it placed nothing, or an
	// older fedbr ran it): nothing can be lifted by identity; whatever it may still hold
	// lapses within its TTL.
	BackupMemberPauseEndedReason = "PauseEnded"
	// BackupMemberLiftingReason: False once the pause Job ended without reporting that it lifted
	// what it recorded placing in PD (killed, OOM, node lost), while the lift step is started
	// or runs.
	BackupMemberLiftingReason = "Lifting"
	// BackupMemberLiftedReason: True once the lift step reports that PD holds nothing of the
	// pause's identity any more.
	BackupMemberLiftedReason = "Lifted"
	// BackupMemberLiftFailedReason: False once the lift Job failed (its retries included) or
	// cannot be started; not retried: what the pause placed lapses within its TTL.
	BackupMemberLiftFailedReason = "LiftFailed"
)

// Reasons of a VolumeBackupMember's Complete condition.
const (
	// BackupMemberSnapshotsCompletedReason: True once the snapshot step's result is read and
	// the agent found every snapshot it names completed in AWS (see
	// BackupMemberSnapshotsNotConfirmedReason for what it checks).
	BackupMemberSnapshotsCompletedReason = "SnapshotsCompleted"
)

// Reasons of a VolumeBackupMember's Failed condition (True), beside the shared ones above.
const (
	// BackupMemberPauseFailedReason: the pause step reported a failure while nothing had asked
	// it to stop.
	BackupMemberPauseFailedReason = "PauseFailed"
	// BackupMemberPauseJobFailedReason: the pause Job failed (not at its deadline) without a
	// failure report, while nothing had asked it to stop.
	BackupMemberPauseJobFailedReason = "PauseJobFailed"
	// BackupMemberPauseEndedUnaskedReason: the pause stopped (its pod deleted or evicted, its
	// Job completed) while nothing had asked it to: a snapshot may have started after it
	// lifted, so the backup cannot be trusted.
	BackupMemberPauseEndedUnaskedReason = "PauseEndedUnasked"
	// BackupMemberSnapshotFailedReason: the snapshot step reported a failure.
	BackupMemberSnapshotFailedReason = "SnapshotFailed"
	// BackupMemberSnapshotJobFailedReason: the snapshot Job failed (not at its deadline) without
	// a failure report.
	BackupMemberSnapshotJobFailedReason = "SnapshotJobFailed"
	// BackupMemberTornDownReason: the member was torn down before its snapshots completed; the
	// snapshot step was stopped and deletes the snapshots it started.
	BackupMemberTornDownReason = "TornDown"
	// BackupMemberNoBackupTSReason: spec.backupTS is not a positive TSO.
	BackupMemberNoBackupTSReason = "NoBackupTS"
	// BackupMemberVolumeDiscoveryFailedReason: the TiKV volumes could not be discovered or
	// written into the snapshot step's inputs. Also False while the agent cannot discover them
	// to confirm a completion report (retried).
	BackupMemberVolumeDiscoveryFailedReason = "VolumeDiscoveryFailed"
	// BackupMemberSnapshotsNotConfirmedReason: the snapshot step reported every snapshot
	// completed, but what the agent found in AWS does not match: a snapshot missing, not owned
	// by the account, not completed, not tagged fedbr.io/backup=<member uid>, not of a TiKV
	// volume of the TidbCluster, a TiKV volume without exactly one snapshot, or a backup ts
	// that does not fit the snapshots' start times or the member's creation. The message names
	// each mismatch.
	BackupMemberSnapshotsNotConfirmedReason = "SnapshotsNotConfirmed"
	// BackupMemberCloudUnreachableReason: False while the snapshots a completion report names
	// cannot be described in AWS (to confirm them); retried.
	BackupMemberCloudUnreachableReason = "CloudUnreachable"
)

// Reasons of a VolumeBackupMember's Sized condition.
const (
	// BackupMemberSizingReason: False while the size Job is created or runs.
	BackupMemberSizingReason = "Sizing"
	// BackupMemberSizedReason: True once the size step's result is read; the message gives the
	// sizes.
	BackupMemberSizedReason = "Sized"
	// BackupMemberSizeFailedReason: False when the size step, its Job, its result or its storage
	// failed; the backup stays Complete.
	BackupMemberSizeFailedReason = "SizeFailed"
	// BackupMemberSizeNotWantedReason: False when calcSizeLevel is none.
	BackupMemberSizeNotWantedReason = "SizeNotWanted"
	// BackupMemberSizedBeforeCleanupReason: True on a Failed member whose snapshot step sized
	// the snapshots it had completed before deleting them; backupSize is their full size (no
	// incremental size), and the Failed condition keeps the failure's reason.
	BackupMemberSizedBeforeCleanupReason = "SizedBeforeCleanup"
)

// Reasons of a VolumeBackupMember's Cleaned condition, set while the member is deleted.
// BackupMemberCleanFailedReason and BackupMemberCleanGaveUpReason (False) mean the member's
// clean is failing; the message says why. The manager surfaces them on the VolumeBackup.
const (
	// BackupMemberCleaningReason: False while the snapshot step is stopped before cleaning, or
	// while a clean attempt is started or runs.
	BackupMemberCleaningReason = "Cleaning"
	// BackupMemberCleanedReason: True once a clean attempt deleted the snapshots and metadata.
	BackupMemberCleanedReason = "Cleaned"
	// BackupMemberNothingToCleanReason: True when the member never started a snapshot step.
	BackupMemberNothingToCleanReason = "NothingToClean"
	// BackupMemberRetainedReason: False when cleanPolicy keeps the snapshots and metadata
	// (Retain, or OnFailure, the snapshots completed and the VolumeBackup did not fail:
	// spec.backupFailed unset); the finalizer goes without cleaning.
	BackupMemberRetainedReason = "Retained"
	// BackupMemberForceRemovedReason: False when annotation fedbr.io/force-remove is "true"; the
	// finalizer goes without cleaning.
	BackupMemberForceRemovedReason = "ForceRemoved"
	// BackupMemberCleanFailedReason: False when a clean attempt failed (another follows after a
	// backoff) or the clean's storage cannot be used.
	BackupMemberCleanFailedReason = "CleanFailed"
	// BackupMemberCleanGaveUpReason: False once the clean failed as many times as allowed
	// (annotation fedbr.io/max-clean-attempts, default 10); retried only once that is raised.
	BackupMemberCleanGaveUpReason = "CleanGaveUp"
)

// Reasons of a VolumeRestoreMember's Failed condition, beside the shared ones above: True,
// except RestoreMemberCloudUnreachableReason (False).
const (
	// RestoreMemberNotInRecoveryModeReason: the TidbCluster's spec.recoveryMode is not true when
	// restore-volumes is about to start.
	RestoreMemberNotInRecoveryModeReason = "NotInRecoveryMode"
	// RestoreMemberInvalidBackupReason: the backup restore-volumes reported is not a valid
	// backupmeta, or its TiKV claims cannot be rebuilt for the target TidbCluster.
	RestoreMemberInvalidBackupReason = "InvalidBackup"
	// RestoreMemberTiKVCountMismatchReason: the backup's TiKV stores, or the TiKV members the
	// restored volumes serve, differ in number from the TidbCluster's spec.tikv.replicas.
	RestoreMemberTiKVCountMismatchReason = "TiKVCountMismatch"
	// RestoreMemberVolumeLayoutMismatchReason: the TidbCluster's TiKV volume layout differs from
	// the backup's.
	RestoreMemberVolumeLayoutMismatchReason = "VolumeLayoutMismatch"
	// RestoreMemberEncryptionMismatchReason: the backed-up TiKV encrypted its data at rest
	// (security.encryption.data-encryption-method other than plaintext) and the TidbCluster's
	// spec.tikv.config has another method, or another master key (type, or KMS key id) than
	// the backup's: TiKV could not read the restored data.
	RestoreMemberEncryptionMismatchReason = "EncryptionMismatch"
	// RestoreMemberClaimConflictReason: a claim the restore needs already exists and is not this
	// restore's.
	RestoreMemberClaimConflictReason = "ClaimConflict"
	// RestoreMemberInvalidOptionsReason: template.br.options holds an option restore-volumes
	// does not accept, or --kms-key-id without --volume-encrypted.
	RestoreMemberInvalidOptionsReason = "InvalidOptions"
	// RestoreMemberRestoreVolumesFailedReason: the restore-volumes step reported a failure, or
	// its Job failed (not at its deadline).
	RestoreMemberRestoreVolumesFailedReason = "RestoreVolumesFailed"
	// RestoreMemberRebuildFailedReason: the TiKV PVs and PVCs cannot be rebuilt from the
	// restoremeta (missing after restore-volumes succeeded, or its claims not rebuildable).
	RestoreMemberRebuildFailedReason = "RebuildFailed"
	// RestoreMemberWALCheckFailedReason: a warm-up Job of warmupStrategy check-wal-only failed
	// (a corrupted RocksDB log, or a volume it could not read); the message names the Job and
	// its error.
	RestoreMemberWALCheckFailedReason = "WALCheckFailed"
	// RestoreMemberVolumeNotOwnedReason: the restoremeta names a volume that is not this
	// restore's (it does not carry fedbr.io/restore=<member uid>, or does not exist); no PV is
	// created for any volume. The message names the volume and the rule.
	RestoreMemberVolumeNotOwnedReason = "VolumeNotOwned"
	// RestoreMemberCloudUnreachableReason: False while the restored volumes cannot be
	// described (to check they are this restore's); retried.
	RestoreMemberCloudUnreachableReason = "CloudUnreachable"
	// RestoreMemberRestoredVolumeMissingReason: a restored volume whose PV exists (so the agent
	// had described it as this restore's) is gone: EC2 describes it deleting or deleted, or no
	// longer describes it at all for longer than EC2's eventual consistency explains. The
	// message names the volume and its PV.
	RestoreMemberRestoredVolumeMissingReason = "RestoredVolumeMissing"
	// RestoreMemberRestoreDataFailedReason: the restore-data step reported a failure, or its Job
	// failed (not at its deadline), armed or running.
	RestoreMemberRestoreDataFailedReason = "RestoreDataFailed"
	// RestoreMemberTooManyVolumesReason: the backup restore-volumes read has more volumes in
	// this plane than template.maxVolumes; none was created.
	RestoreMemberTooManyVolumesReason = "TooManyVolumes"
	// RestoreMemberTidbClusterExistsReason: a scratch restore (template.scratch) found a
	// TidbCluster of its name already there, not one it created: a scratch restore changes no
	// TidbCluster it did not make.
	RestoreMemberTidbClusterExistsReason = "TidbClusterExists"
	// RestoreMemberSavedTidbClusterFailedReason: a scratch restore's tidbcluster step failed, or
	// the TidbCluster it reported from the backup cannot be created (the message says why).
	RestoreMemberSavedTidbClusterFailedReason = "SavedTidbClusterFailed"
)

// Reasons of a VolumeRestoreMember's TidbClusterCreated condition (template.scratch).
const (
	// RestoreMemberFromBackupReason: True once the TidbCluster the backup saved was created, in
	// recovery mode, by this restore.
	RestoreMemberFromBackupReason = "FromBackup"
)

// Reasons of a VolumeRestoreMember's TargetChecked condition.
const (
	// RestoreMemberTargetMatchesReason: True once the target TidbCluster matches the backup
	// restore-volumes reported (TiKV count, volume layout, no conflicting claim).
	RestoreMemberTargetMatchesReason = "TargetMatches"
)

// Reasons of a VolumeRestoreMember's VolumeComplete condition.
const (
	// RestoreMemberVolumesRestoredReason: True once restore-volumes succeeded and the TiKV PVs
	// and PVCs rebuilt from its restoremeta are created.
	RestoreMemberVolumesRestoredReason = "VolumesRestored"
)

// Reasons of a VolumeRestoreMember's WarmUpStarted condition.
const (
	// RestoreMemberWarmingUpReason: True while warm-up Jobs run.
	RestoreMemberWarmingUpReason = "WarmingUp"
)

// Reasons of a VolumeRestoreMember's WarmUpComplete condition.
const (
	// RestoreMemberNotRequestedReason: True when template.warmup is not set.
	RestoreMemberNotRequestedReason = "NotRequested"
	// RestoreMemberWarmedUpReason: True once every warm-up Job succeeded (or none had anything
	// to read).
	RestoreMemberWarmedUpReason = "WarmedUp"
	// RestoreMemberWarmUpFailedReason: True once every warm-up Job finished and some failed
	// (the message names them); the restore goes on.
	RestoreMemberWarmUpFailedReason = "WarmUpFailed"
	// RestoreMemberWALCorruptedReason: True once every warm-up Job finished and some found
	// corrupted RocksDB logs (the message names the Jobs, files and offsets); the restore goes
	// on (not under check-wal-only, where such a Job fails the member).
	RestoreMemberWALCorruptedReason = "WALCorrupted"
)

// Reasons of a VolumeRestoreMember's TikvComplete condition.
const (
	// RestoreMemberTiKVStartedReason: True once the TidbCluster reports as many TiKV stores up
	// as spec.tikv.replicas, in recovery mode on the restored volumes.
	RestoreMemberTiKVStartedReason = "TiKVStarted"
)

// Reasons of a VolumeRestoreMember's DataComplete condition.
const (
	// RestoreMemberDataRestoredReason: True once the restore-data step reported its result.
	RestoreMemberDataRestoredReason = "DataRestored"
)

// Reasons of a VolumeRestoreMember's Checked condition (the template's verify).
const (
	// RestoreMemberChecksPassedReason: True once the verify step reported every check passed.
	RestoreMemberChecksPassedReason = "ChecksPassed"
	// RestoreMemberVerificationFailedReason: False once the verify step failed: a check failed
	// (the message names it) or the step could not run.
	RestoreMemberVerificationFailedReason = "VerificationFailed"
)

// Reasons of a VolumeRestoreMember's Complete condition.
const (
	// RestoreMemberRecoveryModeOffReason: True once spec.recoveryMode is off, the TiKV pods that
	// ran in recovery mode were restarted and every store is up.
	RestoreMemberRecoveryModeOffReason = "RecoveryModeOff"
)

// Reasons of a VolumeRestoreMember's VolumesCleaned condition, set while an unfinished
// restore's member is deleted.
const (
	// RestoreMemberCleaningReason: False while the restore's Jobs and TiKV pods are stopped and
	// its claims, PVs and volumes tagged with the restore id deleted (a scratch restore's
	// TidbCluster and its other claims first).
	RestoreMemberCleaningReason = "Cleaning"
	// RestoreMemberCleanedReason: True once no volume tagged with the restore id is left (and,
	// for a scratch restore, its TidbCluster and that TidbCluster's claims are gone).
	RestoreMemberCleanedReason = "Cleaned"
	// RestoreMemberCleanFailedReason: False while the volumes tagged with the restore id cannot
	// be listed; the listing is retried.
	RestoreMemberCleanFailedReason = "CleanFailed"
	// RestoreMemberForceRemovedReason: False when annotation fedbr.io/force-remove is "true";
	// the finalizer goes without cleaning.
	RestoreMemberForceRemovedReason = "ForceRemoved"
)
