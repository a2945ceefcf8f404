package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// BackupMemberPhase is the step the manager asks a backup member to be in.
// +kubebuilder:validation:Enum=initialize;execute;teardown
type BackupMemberPhase string

const (
	// BackupMemberInitialize: pin the GC safepoint, take the TiKV prepare leases and pause PD
	// scheduling, then hold all of it (only the initializer member).
	BackupMemberInitialize BackupMemberPhase = "initialize"
	// BackupMemberExecute: snapshot every TiKV instance and write backupmeta.
	BackupMemberExecute BackupMemberPhase = "execute"
	// BackupMemberTeardown: the federation is done with this member; release what it holds.
	BackupMemberTeardown BackupMemberPhase = "teardown"
)

// VolumeBackupMemberSpec is what the manager asks of one data plane.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || oldSelf.phase != 'teardown' || self.phase == 'teardown'",message="phase cannot go back from teardown"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || oldSelf.phase != 'execute' || self.phase != 'initialize'",message="phase cannot go back from execute to initialize"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.startPause) || !oldSelf.startPause || (has(self.startPause) && self.startPause)",message="startPause cannot be unset"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.backupFailed) || !oldSelf.backupFailed || (has(self.backupFailed) && self.backupFailed)",message="backupFailed cannot be unset"
type VolumeBackupMemberSpec struct {
	// VolumeBackup is the name of the VolumeBackup in the control plane this member belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumeBackup is immutable"
	VolumeBackup string `json:"volumeBackup"`
	// K8sClusterName is this data plane's name in the manager's kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="k8sClusterName is immutable"
	K8sClusterName string `json:"k8sClusterName"`
	// TCName is the TidbCluster to back up.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tcName is immutable"
	TCName string `json:"tcName"`
	// TCNamespace is the TidbCluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tcNamespace is immutable"
	TCNamespace string `json:"tcNamespace"`
	// Phase is the step the manager asks for.
	Phase BackupMemberPhase `json:"phase"`
	// StartPause tells the initializer to start the pause (GC safepoint, TiKV leases, PD
	// schedulers). The manager sets it once every member's snapshot step is armed (condition
	// Armed), so the GC pause window never holds a pod start; once set it stays set.
	// +optional
	StartPause bool `json:"startPause,omitempty"`
	// ResumeGC asks the initializer to lift the GC safepoint and PD pause now, because every
	// member has started its snapshots.
	// +optional
	ResumeGC bool `json:"resumeGC,omitempty"`
	// BackupTS is the TSO the whole federation backs up at (decimal): the initializer's pause
	// reports it and the manager hands it to every executing member, so all members snapshot
	// under one GC safepoint and one ts. Empty until the initializer is ready.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[0-9]*$`
	// +kubebuilder:validation:XValidation:rule="oldSelf == '' || self == oldSelf",message="backupTS is immutable once set"
	BackupTS string `json:"backupTS,omitempty"`
	// BackupFailed says the VolumeBackup as a whole failed (a member failed, a step timed out,
	// …), whatever this member's own snapshots did. The manager sets it on every member of a
	// failed backup, before it deletes them; once set it stays set. With cleanPolicy OnFailure
	// the agent then cleans this member's snapshots and metadata on deletion even though they
	// completed: they are part of a backup that cannot be restored.
	// +optional
	BackupFailed bool `json:"backupFailed,omitempty"`
	// Template is the VolumeBackup's template, with this member's storage prefix.
	Template fedv1alpha1.VolumeBackupMemberSpec `json:"template"`
}

// Condition types of a VolumeBackupMember, written by the agent.
const (
	// BackupMemberInitializedCondition is True while the pause (GC safepoint, TiKV leases, PD
	// schedulers) is held and ready.
	BackupMemberInitializedCondition = "Initialized"
	// BackupMemberArmedCondition is True once the snapshot step runs and waits for nothing
	// but the backup ts (or already has it).
	BackupMemberArmedCondition = "Armed"
	// BackupMemberSnapshotsCreatedCondition is True once every snapshot has started: the pause
	// may be lifted (backupmeta is written right after).
	BackupMemberSnapshotsCreatedCondition = "SnapshotsCreated"
	// BackupMemberGCResumedCondition is True once the initializer's pause reports it lifted
	// what it held, or, when the pause died without lifting, once the lift step reports that PD
	// holds nothing of the pause's identity (False while that lift runs or after it failed).
	BackupMemberGCResumedCondition = "GCResumed"
	// BackupMemberCompleteCondition is True once every snapshot has completed.
	BackupMemberCompleteCondition = "Complete"
	// BackupMemberFailedCondition is True when the member failed; its reason and message say why.
	BackupMemberFailedCondition = "Failed"
	// BackupMemberSizedCondition is True once the snapshots' full and incremental sizes are
	// computed (after Complete, off the backup's critical path), False when that failed: the
	// backup stays Complete, only its sizes are missing.
	BackupMemberSizedCondition = "Sized"
	// BackupMemberCleanedCondition is True once snapshots and metadata are deleted.
	BackupMemberCleanedCondition = "Cleaned"
)

// VolumeBackupMemberStatus is what the agent reports to the manager.
type VolumeBackupMemberStatus struct {
	// ObservedGeneration is the spec generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is a one-word summary for print columns.
	// +optional
	Phase string `json:"phase,omitempty"`
	// BackupPath is where this member's metadata is stored.
	// +optional
	BackupPath string `json:"backupPath,omitempty"`
	// CommitTs is the resolved-ts the snapshots are consistent at (decimal TSO).
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// SnapshotsTotal is the number of snapshots this member started.
	// +optional
	SnapshotsTotal int32 `json:"snapshotsTotal,omitempty"`
	// SnapshotsCompleted is the number of those that completed.
	// +optional
	SnapshotsCompleted int32 `json:"snapshotsCompleted,omitempty"`
	// BackupSize is the full size in bytes: the data the snapshots hold (not the volumes'
	// capacity), computed after Complete unless calcSizeLevel is none or incremental.
	// +optional
	BackupSize int64 `json:"backupSize,omitempty"`
	// IncrementalBackupSize is the size in bytes changed since the previous snapshot of each
	// volume (the full size for a volume's first), computed after Complete unless
	// calcSizeLevel is none or full.
	// +optional
	IncrementalBackupSize int64 `json:"incrementalBackupSize,omitempty"`
	// TimeStarted is when the member started.
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
	// TimeCompleted is when the member completed or failed.
	// +optional
	TimeCompleted *metav1.Time `json:"timeCompleted,omitempty"`
	// CleanAttempts is how many clean Jobs the agent started for this member (after its
	// deletion). It numbers them and bounds the retries; it outlives the Jobs' TTL.
	// +optional
	CleanAttempts int32 `json:"cleanAttempts,omitempty"`
	// TiKVVolumes are the EBS volumes of the TidbCluster's TiKV the agent discovered and handed
	// the snapshot step, recorded when it started that step: the set the step's completion
	// report is confirmed against, whatever TiKV became since (a scale-out, a store replaced).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20000
	// +kubebuilder:validation:items:MaxLength=64
	TiKVVolumes []string `json:"tikvVolumes,omitempty"`
	// Conditions are the API of progress.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Steps are the step Jobs' own reports (pause, snapshot, clean, size, lift), each written only by
	// its step.
	// +listType=map
	// +listMapKey=name
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	Steps []StepReport `json:"steps,omitempty"`
}

// VolumeBackupMember is one data plane's part of a VolumeBackup.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vbm,categories=fedbr
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.volumeBackup`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.spec.phase`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="CommitTS",type=string,JSONPath=`.status.commitTs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeBackupMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VolumeBackupMemberSpec `json:"spec"`
	// +optional
	Status VolumeBackupMemberStatus `json:"status,omitempty"`
}

// VolumeBackupMemberList is a list of VolumeBackupMembers.
//
// +kubebuilder:object:root=true
type VolumeBackupMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeBackupMember `json:"items"`
}
