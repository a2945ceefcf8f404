package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// RestoreMemberPhase is the step the manager asks a restore member to be in.
// +kubebuilder:validation:Enum=restore-volume;restore-data;restore-finish
type RestoreMemberPhase string

const (
	// RestoreMemberRestoreVolume: create volumes from snapshots, bind them to the TiKV PVCs, warm
	// them up as asked, and start TiKV in recovery mode.
	RestoreMemberRestoreVolume RestoreMemberPhase = "restore-volume"
	// RestoreMemberRestoreData: recover regions and flash the whole key space back to the
	// commit ts (one member only; it acts on the whole cluster).
	RestoreMemberRestoreData RestoreMemberPhase = "restore-data"
	// RestoreMemberRestoreFinish: restart TiKV and leave recovery mode.
	RestoreMemberRestoreFinish RestoreMemberPhase = "restore-finish"
)

// VolumeRestoreMemberSpec is what the manager asks of one data plane.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || oldSelf.phase != 'restore-finish' || self.phase == 'restore-finish'",message="phase cannot go back from restore-finish"
// +kubebuilder:validation:XValidation:rule="!(has(self.dataMember) && self.dataMember) && self.phase != 'restore-data' || has(self.resolvedTS)",message="dataMember and phase restore-data come with resolvedTS, the ts the manager decided to restore to"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resolvedTS) || has(self.resolvedTS)",message="resolvedTS cannot be unset"
type VolumeRestoreMemberSpec struct {
	// VolumeRestore is the name of the VolumeRestore in the control plane this member belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumeRestore is immutable"
	VolumeRestore string `json:"volumeRestore"`
	// K8sClusterName is this data plane's name in the manager's kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="k8sClusterName is immutable"
	K8sClusterName string `json:"k8sClusterName"`
	// TCName is the TidbCluster to restore into.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tcName is immutable"
	TCName string `json:"tcName"`
	// TCNamespace is the TidbCluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tcNamespace is immutable"
	TCNamespace string `json:"tcNamespace"`
	// AZName is the availability zone to create volumes in; empty keeps the source AZ.
	// +optional
	AZName string `json:"azName,omitempty"`
	// Backup is where this member's backup metadata lives.
	Backup fedv1alpha1.StorageProvider `json:"backup"`
	// Phase is the step the manager asks for.
	Phase RestoreMemberPhase `json:"phase"`
	// DataMember is set by the manager on the one member that will run restore-data, as soon
	// as every member reported its backup's resolved ts (the smallest wins). The agent then
	// starts that member's restore-data step armed once its volumes are restored: the step
	// connects and waits for phase restore-data, so its pod start happens while TiKV starts.
	// Once set, it stays set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self || !oldSelf",message="dataMember cannot be unset"
	DataMember bool `json:"dataMember,omitempty"`
	// ResolvedTS is the ts the manager decided the whole cluster is flashed back to (decimal
	// TSO): the smallest of the members' backups' resolved ts. It comes with dataMember and
	// with phase restore-data, and never changes. The data member's restore-data step is given
	// it (--resolved-ts), refuses a backupmeta that says otherwise, and reports the ts it
	// restored to, which the agent puts in status.restoredTS for the manager to check.
	// +optional
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]{0,19}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resolvedTS is immutable"
	ResolvedTS string `json:"resolvedTS,omitempty"`
	// Template is the VolumeRestore's template.
	Template fedv1alpha1.VolumeRestoreMemberSpec `json:"template"`
}

// Condition types of a VolumeRestoreMember, written by the agent.
const (
	// RestoreMemberTargetCheckedCondition is True once the agent checked the target TidbCluster
	// against the backup as the restore-volumes step reported it (its status.steps entry's
	// backup): TiKV count, volume layout, claims. The step creates no volume before it sees
	// it True, and exits when the member's Failed is True instead.
	RestoreMemberTargetCheckedCondition = "TargetChecked"
	// RestoreMemberVolumeCompleteCondition is True once every volume is created and bound.
	RestoreMemberVolumeCompleteCondition = "VolumeComplete"
	// RestoreMemberWarmUpStartedCondition is True once warm-up Jobs run.
	RestoreMemberWarmUpStartedCondition = "WarmUpStarted"
	// RestoreMemberWarmUpCompleteCondition is True once warm-up finished or was not asked for.
	RestoreMemberWarmUpCompleteCondition = "WarmUpComplete"
	// RestoreMemberTikvCompleteCondition is True once TiKV runs in recovery mode.
	RestoreMemberTikvCompleteCondition = "TikvComplete"
	// RestoreMemberDataCompleteCondition is True once region recovery and flashback are done.
	RestoreMemberDataCompleteCondition = "DataComplete"
	// RestoreMemberCompleteCondition is True once TiKV left recovery mode.
	RestoreMemberCompleteCondition = "Complete"
	// RestoreMemberCheckedCondition is the outcome of the template's verify checks, which the
	// data member runs once it is Complete: True (ChecksPassed) or False (VerificationFailed).
	RestoreMemberCheckedCondition = "Checked"
	// RestoreMemberFailedCondition is True when the member failed; its reason and message say why.
	RestoreMemberFailedCondition = "Failed"
	// RestoreMemberVolumesCleanedCondition is True once the volumes of a failed restore (of any
	// scratch restore) are deleted.
	RestoreMemberVolumesCleanedCondition = "VolumesCleaned"
	// RestoreMemberTidbClusterCreatedCondition is True once the agent created a scratch
	// restore's TidbCluster (template.scratch) from the TidbCluster the backup saved, and saw it.
	RestoreMemberTidbClusterCreatedCondition = "TidbClusterCreated"
)

// VolumeRestoreMemberStatus is what the agent reports to the manager.
type VolumeRestoreMemberStatus struct {
	// ObservedGeneration is the spec generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is a one-word summary for print columns.
	// +optional
	Phase string `json:"phase,omitempty"`
	// CommitTs is the resolved-ts of the backup this member restores (decimal TSO).
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// RestoredTS is the ts the data member's restore-data step reports it flashed the whole
	// cluster back to (from its result); the manager completes the restore only when it is the
	// member's spec.resolvedTS.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	RestoredTS string `json:"restoredTS,omitempty"`
	// VolumesTotal is the number of volumes this member creates.
	// +optional
	VolumesTotal int32 `json:"volumesTotal,omitempty"`
	// VolumesReady is the number of those that are available.
	// +optional
	VolumesReady int32 `json:"volumesReady,omitempty"`
	// TimeStarted is when the member started.
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
	// TimeCompleted is when the member completed or failed.
	// +optional
	TimeCompleted *metav1.Time `json:"timeCompleted,omitempty"`
	// Conditions are the API of progress.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Steps are the step Jobs' own reports (restore-volumes, restore-data, warmup-<ordinal>),
	// each written only by its step.
	// +listType=map
	// +listMapKey=name
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	Steps []StepReport `json:"steps,omitempty"`
}

// VolumeRestoreMember is one data plane's part of a VolumeRestore.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vrm,categories=fedbr
// +kubebuilder:printcolumn:name="Restore",type=string,JSONPath=`.spec.volumeRestore`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.spec.phase`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeRestoreMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VolumeRestoreMemberSpec `json:"spec"`
	// +optional
	Status VolumeRestoreMemberStatus `json:"status,omitempty"`
}

// VolumeRestoreMemberList is a list of VolumeRestoreMembers.
//
// +kubebuilder:object:root=true
type VolumeRestoreMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeRestoreMember `json:"items"`
}
