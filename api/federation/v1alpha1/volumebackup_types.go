package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxClusters bounds the number of data planes of one operation. It keeps CEL rules that compare
// clusters within the API server's cost budget; real deployments use one cluster per AZ.
const MaxClusters = 32

// VolumeBackupMemberCluster names one data plane and the TidbCluster in it.
type VolumeBackupMemberCluster struct {
	// K8sClusterName is the context name of this data plane in the manager's kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	K8sClusterName string `json:"k8sClusterName"`
	// TCName is the TidbCluster's name in that data plane.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TCName string `json:"tcName"`
	// TCNamespace is the TidbCluster's namespace; the member object is created there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	TCNamespace string `json:"tcNamespace"`
}

// CleanPolicyType says what happens to a backup's snapshots when the VolumeBackup is deleted.
// +kubebuilder:validation:Enum=Retain;OnFailure;Delete
type CleanPolicyType string

const (
	// CleanPolicyRetain keeps the snapshots and metadata.
	CleanPolicyRetain CleanPolicyType = "Retain"
	// CleanPolicyOnFailure deletes them only for a failed backup.
	CleanPolicyOnFailure CleanPolicyType = "OnFailure"
	// CleanPolicyDelete always deletes them.
	CleanPolicyDelete CleanPolicyType = "Delete"
)

// CalcSizeLevel says which backup sizes are computed after the snapshots complete.
// +kubebuilder:validation:Enum=all;full;incremental;none
type CalcSizeLevel string

const (
	// CalcSizeAll computes the full and the incremental size.
	CalcSizeAll CalcSizeLevel = "all"
	// CalcSizeFull computes the full size only.
	CalcSizeFull CalcSizeLevel = "full"
	// CalcSizeIncremental computes the incremental size only.
	CalcSizeIncremental CalcSizeLevel = "incremental"
	// CalcSizeNone skips size calculation.
	CalcSizeNone CalcSizeLevel = "none"
)

// VolumeBackupMemberSpec is the template copied into every data plane's member.
type VolumeBackupMemberSpec struct {
	// Resources of the BR Jobs.
	// +optional
	corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env is added to the BR Jobs' environment. The variables that tell a step which member and
	// API server it works with are refused at admission; the agent's policy refuses those that
	// choose the steps' credentials (AWS_*, proxies, …) unless it allows them.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['POD_NAMESPACE', 'POD_NAME', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']) && !e.name.startsWith('FEDBR_'))",message="env cannot set POD_NAMESPACE, POD_NAME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT or FEDBR_* variables: they tell a step which member it works for and which API server it talks to"
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`
	// BR tunes the BR engine. Optional in fedbr (upstream crashed without it).
	// +optional
	BR *BRConfig `json:"br,omitempty"`
	// StorageProvider is where each member writes its metadata; an S3 prefix becomes
	// <prefix>-<k8sClusterName> per member.
	StorageProvider `json:",inline"`
	// Tolerations of the BR Jobs.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// ToolImage is the image the Jobs run; defaults to the agent's own image. Another image runs
	// only where the agent's policy allows it (--allowed-images).
	// +optional
	ToolImage string `json:"toolImage,omitempty"`
	// ImagePullSecrets of the Jobs.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ServiceAccount the Jobs run as; defaults to the steps' own fedbr-br, which the agent
	// creates. Another runs only where the agent's policy allows it (--allowed-service-accounts).
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// AutomountServiceAccountToken is kept for compatibility; the Jobs always mount the token
	// they need.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
	// CleanPolicy says what happens to snapshots when the VolumeBackup is deleted (default Retain).
	// +optional
	CleanPolicy CleanPolicyType `json:"cleanPolicy,omitempty"`
	// PriorityClassName of the Jobs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('system-')",message="priorityClassName cannot be a system- priority class: step pods must never preempt the cluster's critical pods"
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// CalcSizeLevel says which sizes to compute (default all).
	// +optional
	CalcSizeLevel CalcSizeLevel `json:"calcSizeLevel,omitempty"`
	// AdditionalVolumes are added to the Jobs' pods.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(v, !has(v.hostPath))",message="additionalVolumes cannot be hostPath volumes: a step reads a node's directory only through a local storage, where the agent's policy allows hostPath"
	// +kubebuilder:validation:XValidation:rule="self.all(v, v.name != 'fedbr-exit')",message="additionalVolumes cannot be named fedbr-exit: the agent adds that volume to every step pod for the exit marker a sidecar waits for"
	// +kubebuilder:validation:MaxItems=64
	AdditionalVolumes []corev1.Volume `json:"additionalVolumes,omitempty"`
	// AdditionalVolumeMounts are added to the Jobs' containers.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(m, !['/var/run/secrets/kubernetes.io', '/var/run/secrets/eks.amazonaws.com', '/var/run/secrets/pods.eks.amazonaws.com', '/run/secrets/kubernetes.io', '/run/secrets/eks.amazonaws.com', '/run/secrets/pods.eks.amazonaws.com'].exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",message="additionalVolumeMounts cannot mount over /var/run/secrets/kubernetes.io, /var/run/secrets/eks.amazonaws.com or /var/run/secrets/pods.eks.amazonaws.com: those hold the identity tokens the steps run with"
	// +kubebuilder:validation:XValidation:rule="self.all(m, !['/var/run/fedbr-exit', '/run/fedbr-exit'].exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",message="additionalVolumeMounts cannot mount at or under /var/run/fedbr-exit: the step writes its exit marker there for a sidecar to see"
	// +kubebuilder:validation:MaxItems=64
	AdditionalVolumeMounts []corev1.VolumeMount `json:"additionalVolumeMounts,omitempty"`
	// VolumeBackupInitJobMaxActiveSeconds bounds how long GC and PD scheduling stay paused: the
	// pause Job is stopped after this many seconds (default 600).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="volumeBackupInitJobMaxActiveSeconds must be at least 1 second"
	// +optional
	VolumeBackupInitJobMaxActiveSeconds *int32 `json:"volumeBackupInitJobMaxActiveSeconds,omitempty"`
	// SnapshotsDeleteRatio is the snapshot deletions per second per member while cleaning,
	// between 0.1 and 2.0 (default 1). Upstream silently reset out-of-range values; fedbr refuses them.
	// +kubebuilder:validation:XValidation:rule="self >= 0.1 && self <= 2.0",message="snapshotsDeleteRatio must be between 0.1 and 2.0 deletions per second"
	// +optional
	SnapshotsDeleteRatio *float64 `json:"snapshotsDeleteRatio,omitempty"`
	// StepTimeout is the ceiling on each member phase, which the manager enforces (reason
	// StepTimeout; its teardown stops the snapshot step), and on each step no phase bounds (the
	// size, clean and lift Jobs: their activeDeadlineSeconds), so a stuck step fails the backup
	// instead of stalling it forever (fedbr extension; default 72h). The snapshot step's wait for its snapshots is bounded
	// first by StallTimeout; raise this ceiling only for a first full snapshot that takes longer.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="stepTimeout must be a positive duration such as 30m or 6h"
	// +optional
	StepTimeout *metav1.Duration `json:"stepTimeout,omitempty"`
	// StallTimeout fails the member (reason ProgressStalled) when the snapshot step's wait for
	// its snapshots reports no progress (snapshots completed, or their mean percent) for this
	// long: from its last progress, or from when every snapshot started (fedbr extension;
	// default 6h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="stallTimeout must be a positive duration such as 2h or 12h"
	// +optional
	StallTimeout *metav1.Duration `json:"stallTimeout,omitempty"`
}

// VolumeBackupSpec says which data planes to back up and how.
type VolumeBackupSpec struct {
	// Clusters are the data planes to back up, one entry per kubeconfig context.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="clusters must name at least one data-plane cluster"
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d.k8sClusterName == c.k8sClusterName))",message="k8sClusterName must be unique: each data-plane cluster may appear only once"
	// +listType=atomic
	Clusters []VolumeBackupMemberCluster `json:"clusters"`
	// Template is copied into every member.
	Template VolumeBackupMemberSpec `json:"template"`
	// PauseWaitTimeout bounds how long the backup waits, before it starts, for another
	// VolumeBackup that pauses the same TiDB cluster (a TidbCluster both name in the same data
	// plane) to lift its pause; past it the backup fails (fedbr extension; default 30m).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="pauseWaitTimeout must be a positive duration such as 30m or 2h"
	// +optional
	PauseWaitTimeout *metav1.Duration `json:"pauseWaitTimeout,omitempty"`
}

// VolumeBackupPhase is a one-word summary of a VolumeBackup, derived from the rest of its
// status (conditions first) after every reconcile; the first of these that holds is the phase.
type VolumeBackupPhase string

const (
	// VolumeBackupCleaned: Cleaned is True. The manager does not set it: a deleted backup is
	// released as soon as its members are gone.
	VolumeBackupCleaned VolumeBackupPhase = "Cleaned"
	// VolumeBackupCleanFailed: Cleaned is False with reason CleanFailed: a deleted backup's member
	// fails to clean; the condition names it and says why.
	VolumeBackupCleanFailed VolumeBackupPhase = "CleanFailed"
	// VolumeBackupCleaning: Cleaned is False with another reason: a deleted backup's members are
	// being deleted and clean per cleanPolicy.
	VolumeBackupCleaning VolumeBackupPhase = "Cleaning"
	// VolumeBackupFailed: Failed is True; the condition says why.
	VolumeBackupFailed VolumeBackupPhase = "Failed"
	// VolumeBackupComplete: Complete is True: every snapshot has completed.
	VolumeBackupComplete VolumeBackupPhase = "Complete"
	// VolumeBackupSnapshotsCreated: SnapshotsCreated is True: every member has started its
	// snapshots, and the pause is being lifted or lifted (GCPaused).
	VolumeBackupSnapshotsCreated VolumeBackupPhase = "SnapshotsCreated"
	// VolumeBackupPending: the backup has not started (no timeStarted), or waits at the pause
	// gate before choosing its initializer (no initializer, Ready False WaitingForBackup).
	VolumeBackupPending VolumeBackupPhase = "Pending"
	// VolumeBackupRunning: none of the above: the initializer is being chosen, members are
	// created and armed, the pause is taken, snapshots are started.
	VolumeBackupRunning VolumeBackupPhase = "Running"
)

// Condition types of a VolumeBackup.
const (
	// VolumeBackupReadyCondition summarises the others: True when the backup is complete.
	VolumeBackupReadyCondition = "Ready"
	// VolumeBackupGCPausedCondition is True while GC, PD scheduling and TiKV admin operations are
	// held by the pause Job.
	VolumeBackupGCPausedCondition = "GCPaused"
	// VolumeBackupSnapshotsCreatedCondition is True when every member has started all its
	// snapshots and written its backupmeta.
	VolumeBackupSnapshotsCreatedCondition = "SnapshotsCreated"
	// VolumeBackupCompleteCondition is True when every snapshot of every member has completed.
	VolumeBackupCompleteCondition = "Complete"
	// VolumeBackupFailedCondition is True when the backup failed and will not be retried.
	VolumeBackupFailedCondition = "Failed"
	// VolumeBackupCleanedCondition is True when snapshots and metadata are deleted. While a
	// deleted backup's members clean, it is False: reason VolumeBackupCleaningReason, or
	// VolumeBackupCleanFailedReason when a member's clean fails (the message names the data
	// plane and says why).
	VolumeBackupCleanedCondition = "Cleaned"
	// VolumeBackupVerifiedCondition is the verdict of the latest judged restore of the backup
	// that checked what it restored (status.verification): True (reason ChecksPassed), or False
	// (VerificationFailed: a check failed, named in the message; RestoreFailed: the restore
	// itself failed, its reason in the message). Absent until such a restore is judged.
	VolumeBackupVerifiedCondition = "Verified"
)

// VolumeBackupMemberStatus is one data plane's part of a VolumeBackup, copied from its member.
type VolumeBackupMemberStatus struct {
	// K8sClusterName is the data plane.
	K8sClusterName string `json:"k8sClusterName,omitempty"`
	// TCName is the TidbCluster's name.
	TCName string `json:"tcName,omitempty"`
	// TCNamespace is the TidbCluster's namespace.
	TCNamespace string `json:"tcNamespace,omitempty"`
	// BackupName is the member object's name.
	BackupName string `json:"backupName"`
	// Phase is the member's phase.
	Phase string `json:"phase"`
	// BackupPath is where the member's metadata is stored.
	// +optional
	BackupPath string `json:"backupPath,omitempty"`
	// BackupSize is the member's full size in bytes.
	// +optional
	BackupSize int64 `json:"backupSize,omitempty"`
	// IncrementalBackupSize is the member's size in bytes changed since its previous backup.
	// +optional
	IncrementalBackupSize int64 `json:"incrementalBackupSize,omitempty"`
	// CommitTs is the member's resolved-ts (decimal TSO).
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// Reason is the member's failure reason.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is the member's failure message.
	// +optional
	Message string `json:"message,omitempty"`
}

// VolumeBackupStatus is the observed state of a VolumeBackup.
type VolumeBackupStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Backups is one entry per data plane.
	// +optional
	Backups []VolumeBackupMemberStatus `json:"backups,omitempty"`
	// Initializer is the data plane whose member holds the GC/PD pause: the first cluster,
	// unless it was unreachable when the backup started.
	// +optional
	Initializer string `json:"initializer,omitempty"`
	// TimeStarted is when the backup started; the spec is frozen from then on.
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
	// TimeCompleted is when the backup completed or failed.
	// +optional
	TimeCompleted *metav1.Time `json:"timeCompleted,omitempty"`
	// TimeTaken is TimeCompleted - TimeStarted.
	// +optional
	TimeTaken string `json:"timeTaken,omitempty"`
	// GCPauseSeconds is how long GC and PD scheduling were paused.
	// +optional
	GCPauseSeconds string `json:"gcPauseSeconds,omitempty"`
	// BackupSize is the sum of the members' full sizes in bytes.
	// +optional
	BackupSize int64 `json:"backupSize,omitempty"`
	// BackupSizeReadable is BackupSize for humans.
	// +optional
	BackupSizeReadable string `json:"backupSizeReadable,omitempty"`
	// IncrementalBackupSize is the sum of the members' incremental sizes in bytes.
	// +optional
	IncrementalBackupSize int64 `json:"incrementalBackupSize,omitempty"`
	// IncrementalBackupSizeReadable is IncrementalBackupSize for humans.
	// +optional
	IncrementalBackupSizeReadable string `json:"incrementalBackupSizeReadable,omitempty"`
	// CommitTs is the timestamp the backup is consistent at: the minimum member resolved-ts.
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// Verification is the latest judged restore of this backup that checked what it restored
	// (its template's verify): which, when, and how long it took, step by step (fedbr
	// extension). Its verdict is the condition Verified.
	// +optional
	Verification *VolumeBackupVerification `json:"verification,omitempty"`
	// Phase is a one-word summary derived from the conditions.
	// +optional
	Phase VolumeBackupPhase `json:"phase,omitempty"`
	// Conditions are the API of progress.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VolumeBackupVerification is a restore of a backup that checked what it restored.
type VolumeBackupVerification struct {
	// Restore is the VolumeRestore's name, in the backup's namespace.
	Restore string `json:"restore"`
	// TimeJudged is when the restore completed with its checks judged, or failed.
	TimeJudged metav1.Time `json:"timeJudged"`
	// TimeTaken is the restore's time from its start to its checks judged: the recovery time
	// measured (empty for a restore that failed).
	// +optional
	TimeTaken string `json:"timeTaken,omitempty"`
	// Steps are the restore's steps and what each took: the recovery time, split.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Steps []VolumeRestoreStep `json:"steps,omitempty"`
}

// VolumeBackup is a transaction-consistent snapshot backup of one TiDB cluster spread over
// several Kubernetes clusters.
//
// The clusters and the storage location cannot change once the backup has started: members
// already hold snapshots and metadata at the old places.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vbk,categories=fedbr
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="BackupSize",type=string,JSONPath=`.status.backupSizeReadable`
// +kubebuilder:printcolumn:name="CommitTS",type=string,JSONPath=`.status.commitTs`
// +kubebuilder:printcolumn:name="TimeTaken",type=string,JSONPath=`.status.timeTaken`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.timeStarted) || (self.spec.clusters == oldSelf.spec.clusters && (has(self.spec.template.s3) == has(oldSelf.spec.template.s3) && (!has(self.spec.template.s3) || ((has(self.spec.template.s3.bucket) == has(oldSelf.spec.template.s3.bucket) && (!has(self.spec.template.s3.bucket) || self.spec.template.s3.bucket == oldSelf.spec.template.s3.bucket)) && (has(self.spec.template.s3.prefix) == has(oldSelf.spec.template.s3.prefix) && (!has(self.spec.template.s3.prefix) || self.spec.template.s3.prefix == oldSelf.spec.template.s3.prefix)) && (has(self.spec.template.s3.path) == has(oldSelf.spec.template.s3.path) && (!has(self.spec.template.s3.path) || self.spec.template.s3.path == oldSelf.spec.template.s3.path)) && (has(self.spec.template.s3.region) == has(oldSelf.spec.template.s3.region) && (!has(self.spec.template.s3.region) || self.spec.template.s3.region == oldSelf.spec.template.s3.region)) && (has(self.spec.template.s3.endpoint) == has(oldSelf.spec.template.s3.endpoint) && (!has(self.spec.template.s3.endpoint) || self.spec.template.s3.endpoint == oldSelf.spec.template.s3.endpoint))))) && (has(self.spec.template.gcs) == has(oldSelf.spec.template.gcs) && (!has(self.spec.template.gcs) || ((has(self.spec.template.gcs.bucket) == has(oldSelf.spec.template.gcs.bucket) && (!has(self.spec.template.gcs.bucket) || self.spec.template.gcs.bucket == oldSelf.spec.template.gcs.bucket)) && (has(self.spec.template.gcs.prefix) == has(oldSelf.spec.template.gcs.prefix) && (!has(self.spec.template.gcs.prefix) || self.spec.template.gcs.prefix == oldSelf.spec.template.gcs.prefix)) && (has(self.spec.template.gcs.path) == has(oldSelf.spec.template.gcs.path) && (!has(self.spec.template.gcs.path) || self.spec.template.gcs.path == oldSelf.spec.template.gcs.path))))) && (has(self.spec.template.azblob) == has(oldSelf.spec.template.azblob) && (!has(self.spec.template.azblob) || ((has(self.spec.template.azblob.container) == has(oldSelf.spec.template.azblob.container) && (!has(self.spec.template.azblob.container) || self.spec.template.azblob.container == oldSelf.spec.template.azblob.container)) && (has(self.spec.template.azblob.prefix) == has(oldSelf.spec.template.azblob.prefix) && (!has(self.spec.template.azblob.prefix) || self.spec.template.azblob.prefix == oldSelf.spec.template.azblob.prefix)) && (has(self.spec.template.azblob.path) == has(oldSelf.spec.template.azblob.path) && (!has(self.spec.template.azblob.path) || self.spec.template.azblob.path == oldSelf.spec.template.azblob.path))))) && (has(self.spec.template.local) == has(oldSelf.spec.template.local) && (!has(self.spec.template.local) || ((has(self.spec.template.local.prefix) == has(oldSelf.spec.template.local.prefix) && (!has(self.spec.template.local.prefix) || self.spec.template.local.prefix == oldSelf.spec.template.local.prefix))))))",message="spec.clusters and the storage location cannot change after the backup has started; create a new VolumeBackup instead"
type VolumeBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VolumeBackupSpec `json:"spec"`
	// SkipGC keeps this backup out of its schedule's retention GC ("GC-immune").
	// +optional
	SkipGC bool `json:"skipGC,omitempty"`
	// +optional
	Status VolumeBackupStatus `json:"status,omitempty"`
}

// VolumeBackupList is a list of VolumeBackups.
//
// +kubebuilder:object:root=true
type VolumeBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeBackup `json:"items"`
}
