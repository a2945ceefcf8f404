package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeRestoreMemberCluster names one data plane, the TidbCluster to restore into and the
// backup member to restore from.
type VolumeRestoreMemberCluster struct {
	// K8sClusterName is the context name of this data plane in the manager's kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	K8sClusterName string `json:"k8sClusterName"`
	// TCName is the TidbCluster to restore into; it must exist with spec.recoveryMode true.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TCName string `json:"tcName"`
	// TCNamespace is the TidbCluster's namespace; the member object is created there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	TCNamespace string `json:"tcNamespace"`
	// AZName is the availability zone to create the volumes in; it also rewrites the TiKV PVs'
	// zone affinity. Empty keeps each volume in its snapshot's source AZ.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	AZName string `json:"azName,omitempty"`
	// Backup is where this member's backup metadata lives (normally the backupPath of the
	// matching VolumeBackup member).
	Backup StorageProvider `json:"backup"`
}

// RestoreWarmupMode says whether TiKV waits for warm-up before it starts.
// +kubebuilder:validation:Enum="";sync;async
type RestoreWarmupMode string

const (
	// RestoreWarmupNone skips warm-up.
	RestoreWarmupNone RestoreWarmupMode = ""
	// RestoreWarmupSync warms every volume before TiKV starts.
	RestoreWarmupSync RestoreWarmupMode = "sync"
	// RestoreWarmupAsync starts TiKV at once and warms the volumes beside it.
	RestoreWarmupAsync RestoreWarmupMode = "async"
)

// RestoreWarmupStrategy says how restored volumes are warmed.
// +kubebuilder:validation:Enum=fio;hybrid;fsr;check-wal-only;fs
type RestoreWarmupStrategy string

const (
	// RestoreWarmupStrategyFio reads every block of every volume.
	RestoreWarmupStrategyFio RestoreWarmupStrategy = "fio"
	// RestoreWarmupStrategyHybrid reads files on the data volume and blocks elsewhere.
	RestoreWarmupStrategyHybrid RestoreWarmupStrategy = "hybrid"
	// RestoreWarmupStrategyFsr enables Fast Snapshot Restore on the snapshots instead.
	RestoreWarmupStrategyFsr RestoreWarmupStrategy = "fsr"
	// RestoreWarmupStrategyCheckWALOnly verifies the RocksDB write-ahead logs and reads the
	// volumes besides the data volume; TiKV waits for it, and a failure fails the restore.
	RestoreWarmupStrategyCheckWALOnly RestoreWarmupStrategy = "check-wal-only"
	// RestoreWarmupStrategyFs reads the files of every volume (data, raft, WAL) and no block
	// device: its pods run unprivileged, so the TiDB namespace can stay at Pod Security
	// restricted. A block no file holds stays cold; TiKV never reads one.
	RestoreWarmupStrategyFs RestoreWarmupStrategy = "fs"
)

// RestoreCheck is a user's check of a restored cluster: one container run once, to its exit code.
type RestoreCheck struct {
	// Image of the check's container. It runs only where the agent's policy allows it
	// (--allowed-images).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// Command replaces the image's entrypoint.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Command []string `json:"command,omitempty"`
	// Args are the container's arguments.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Args []string `json:"args,omitempty"`
	// EnvFromSecret names a Secret in the restored TidbCluster's namespace whose keys become the
	// container's environment (a TiDB user's password, say).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	EnvFromSecret string `json:"envFromSecret,omitempty"`
	// Timeout bounds the check's Job (its activeDeadlineSeconds; default 1h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="check.timeout must be a positive duration such as 30m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// VolumeRestoreMemberSpec is the template copied into every data plane's member.
// +kubebuilder:validation:XValidation:rule="!has(self.check) || (has(self.verify) && self.verify)",message="check runs after the built-in checks: set verify too"
type VolumeRestoreMemberSpec struct {
	// Resources of the restore Jobs.
	// +optional
	corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env is added to the restore Jobs' environment, as for a VolumeBackup's template.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['POD_NAMESPACE', 'POD_NAME', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']) && !e.name.startsWith('FEDBR_'))",message="env cannot set POD_NAMESPACE, POD_NAME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT or FEDBR_* variables: they tell a step which member it works for and which API server it talks to"
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`
	// BR tunes the BR engine. Optional in fedbr (upstream crashed without it).
	// +optional
	BR *BRConfig `json:"br,omitempty"`
	// Tolerations of the restore Jobs.
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
	// AutomountServiceAccountToken is kept for compatibility.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
	// PriorityClassName of the Jobs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('system-')",message="priorityClassName cannot be a system- priority class: step pods must never preempt the cluster's critical pods"
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Warmup is "" (none), sync or async.
	// +optional
	Warmup RestoreWarmupMode `json:"warmup,omitempty"`
	// WarmupImage is the image of the warm-up Jobs; defaults to the agent's own image. Another
	// image runs only where the agent's policy allows it (--allowed-images).
	// +optional
	WarmupImage string `json:"warmupImage,omitempty"`
	// WarmupStrategy is fio, hybrid (default), fsr or check-wal-only. Every strategy verifies
	// the RocksDB write-ahead logs of the volumes it reads; check-wal-only verifies the data
	// volume's without reading the rest of it, runs before TiKV starts (also with warmup
	// async), and fails the restore when a warm-up fails. A strategy that reads block devices
	// (fio; hybrid, fsr and check-wal-only of a TiKV with volumes besides its data volume) runs
	// privileged, which needs the agent's --allow-privileged-warmup.
	// +optional
	WarmupStrategy RestoreWarmupStrategy `json:"warmupStrategy,omitempty"`
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
	// TolerateSingleTiKVOutage lets restore-data proceed with one TiKV store down (fedbr exposes
	// what upstream kept on the data-plane Restore only).
	// +optional
	TolerateSingleTiKVOutage bool `json:"tolerateSingleTiKVOutage,omitempty"`
	// Verify checks the restored cluster from PD once TiKV left recovery mode everywhere (fedbr
	// extension; `fedbr br verify`, run by the data member's agent as the Job "verify"): PD's
	// snapshot-recovering mark lifted, every TiKV store Up, the regions tiling the whole key
	// space, each with a leader and none in flashback, PD's TSO above the restored ts. The
	// restore completes once the checks are judged; their outcome is its condition Checked
	// (False, reason VerificationFailed, names the failed checks). A failed check never fails
	// the restore: its volumes and TidbClusters stay for the SRE to look at.
	// +optional
	Verify bool `json:"verify,omitempty"`
	// Check is the user's own check of the restored cluster (fedbr extension), run once the
	// built-in checks of verify passed: a Job in the restored TidbCluster's namespace of the
	// data member's plane, whose exit code counts in the restore's Checked. Needs verify.
	// +optional
	Check *RestoreCheck `json:"check,omitempty"`
	// Scratch makes the restore create its TidbClusters and remove everything it made when it is
	// deleted (fedbr extension): a restore drill. Each plane's agent reads the TidbCluster the
	// backup saved (the tidbcluster step, with the restore's identity), creates it in recovery
	// mode in the member's namespace (named tcName, spec.cluster moved along), owned by the
	// member, and refuses to start when a TidbCluster of that name exists already
	// (TidbClusterExists). Deleting the restore, complete or not, deletes that TidbCluster, its
	// claims (the restored ones and those its operator made, whose volumes the storage class's
	// provisioner deletes), the PVs and every EBS volume tagged with the restore id. Every
	// cluster must name the same tcNamespace (the TidbClusters join each other there).
	// +optional
	Scratch bool `json:"scratch,omitempty"`
	// MaxVolumes bounds the volumes the restore creates in each plane (fedbr extension): a plane
	// whose backup has more fails (TooManyVolumes) before any volume is created. A drill's bound
	// on what it may cost. Unset: no bound.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxVolumes *int32 `json:"maxVolumes,omitempty"`
	// BackoffLimit is the retries of each restore Job.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// StepTimeout is the ceiling on each member phase until the member is Complete, which the
	// manager enforces (reason StepTimeout; it deletes the members, which stops their steps),
	// and on an async warm-up, which runs after (its Jobs' activeDeadlineSeconds) (default 72h:
	// a sync warm-up of 16 TiB at gp3's 125 MiB/s takes about 37 h). A warm-up that TiKV waits for is bounded first by StallTimeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="stepTimeout must be a positive duration such as 30m or 6h"
	// +optional
	StepTimeout *metav1.Duration `json:"stepTimeout,omitempty"`
	// StallTimeout fails the member (reason ProgressStalled) when a warm-up that TiKV waits for
	// (sync, or check-wal-only) reports no bytes read for this long: from its last progress, or
	// from its start (fedbr extension; default 6h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="stallTimeout must be a positive duration such as 2h or 12h"
	// +optional
	StallTimeout *metav1.Duration `json:"stallTimeout,omitempty"`
}

// VolumeRestoreSpec says which data planes to restore into and how.
//
// +kubebuilder:validation:XValidation:rule="!has(self.crossAZ) || !self.crossAZ || self.clusters.all(c, has(c.azName) && size(c.azName) > 0)",message="crossAZ requires azName on every cluster: name the availability zone to create each cluster's volumes in"
// +kubebuilder:validation:XValidation:rule="!has(self.template.scratch) || !self.template.scratch || self.clusters.all(c, c.tcNamespace == self.clusters[0].tcNamespace)",message="template.scratch needs one tcNamespace for every cluster: the TidbClusters it creates join each other's PD there"
type VolumeRestoreSpec struct {
	// Clusters are the data planes to restore into, one entry per kubeconfig context.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="clusters must name at least one data-plane cluster"
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d.k8sClusterName == c.k8sClusterName))",message="k8sClusterName must be unique: each data-plane cluster may appear only once"
	// +listType=atomic
	Clusters []VolumeRestoreMemberCluster `json:"clusters"`
	// CrossAZ says the volumes go to other AZs than the snapshots' sources; every cluster must
	// then name its azName (fedbr extension).
	// +optional
	CrossAZ bool `json:"crossAZ,omitempty"`
	// Template is copied into every member.
	Template VolumeRestoreMemberSpec `json:"template"`
}

// VolumeRestorePhase is a one-word summary of a VolumeRestore, derived from the rest of its
// status (conditions first) after every reconcile; the first of these that holds is the phase.
type VolumeRestorePhase string

const (
	// VolumeRestoreFailed: Failed is True; the condition says why.
	VolumeRestoreFailed VolumeRestorePhase = "Failed"
	// VolumeRestoreComplete: Complete is True: TiKV runs normally on the restored data
	// everywhere, and any warm-up finished.
	VolumeRestoreComplete VolumeRestorePhase = "Complete"
	// VolumeRestoreDataComplete: DataComplete is True: the data is recovered to the commit ts;
	// TiKV restarts out of recovery mode, or an async warm-up still reads volumes.
	VolumeRestoreDataComplete VolumeRestorePhase = "DataComplete"
	// VolumeRestoreTikvComplete: TikvComplete is True: every TiKV runs in recovery mode; the
	// data member restores data.
	VolumeRestoreTikvComplete VolumeRestorePhase = "TikvComplete"
	// VolumeRestoreVolumeComplete: VolumeComplete is True. The manager does not set that
	// condition: a restore goes from Running to TikvComplete.
	VolumeRestoreVolumeComplete VolumeRestorePhase = "VolumeComplete"
	// VolumeRestorePending: the restore has not started (no timeStarted).
	VolumeRestorePending VolumeRestorePhase = "Pending"
	// VolumeRestoreRunning: none of the above: volumes are being created and TiKV started in
	// recovery mode.
	VolumeRestoreRunning VolumeRestorePhase = "Running"
)

// Condition types of a VolumeRestore.
const (
	// VolumeRestoreReadyCondition summarises the others: True when the restore is complete.
	VolumeRestoreReadyCondition = "Ready"
	// VolumeRestoreVolumeCompleteCondition is True when every member's volumes are created. The
	// manager does not set it yet (the members report it in their own VolumeComplete).
	VolumeRestoreVolumeCompleteCondition = "VolumeComplete"
	// VolumeRestoreWarmUpCompleteCondition is True when warm-up finished (or was not asked for).
	VolumeRestoreWarmUpCompleteCondition = "WarmUpComplete"
	// VolumeRestoreTikvCompleteCondition is True when every TiKV runs in recovery mode.
	VolumeRestoreTikvCompleteCondition = "TikvComplete"
	// VolumeRestoreDataCompleteCondition is True when region recovery and flashback are done.
	VolumeRestoreDataCompleteCondition = "DataComplete"
	// VolumeRestoreCheckedCondition is the outcome of template.verify's checks: True when they
	// all passed, False (reason VerificationFailed) naming those that failed.
	VolumeRestoreCheckedCondition = "Checked"
	// VolumeRestoreCompleteCondition is True when TiKV left recovery mode everywhere.
	VolumeRestoreCompleteCondition = "Complete"
	// VolumeRestoreFailedCondition is True when the restore failed and will not be retried.
	VolumeRestoreFailedCondition = "Failed"
)

// VolumeRestoreMemberStatus is one data plane's part of a VolumeRestore.
type VolumeRestoreMemberStatus struct {
	// K8sClusterName is the data plane.
	K8sClusterName string `json:"k8sClusterName,omitempty"`
	// TCName is the TidbCluster's name.
	TCName string `json:"tcName,omitempty"`
	// TCNamespace is the TidbCluster's namespace.
	TCNamespace string `json:"tcNamespace,omitempty"`
	// RestoreName is the member object's name.
	RestoreName string `json:"restoreName"`
	// Phase is the member's phase.
	Phase string `json:"phase"`
	// CommitTs is the member backup's resolved-ts.
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// Reason is the member's failure reason.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is the member's failure message.
	// +optional
	Message string `json:"message,omitempty"`
}

// VolumeRestoreStep records one step of a restore and how long it took.
type VolumeRestoreStep struct {
	// StepName is RestoreVolume, WarmUp, RestoreData, RestartTiKV or Verify.
	StepName string `json:"stepName"`
	// TimeStarted is when the step started.
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
	// TimeCompleted is when the step completed.
	// +optional
	TimeCompleted *metav1.Time `json:"timeCompleted,omitempty"`
	// TimeTaken is TimeCompleted - TimeStarted.
	// +optional
	TimeTaken string `json:"timeTaken,omitempty"`
}

// VolumeRestoreStatus is the observed state of a VolumeRestore.
type VolumeRestoreStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Restores is one entry per data plane.
	// +optional
	Restores []VolumeRestoreMemberStatus `json:"restores,omitempty"`
	// Steps are the steps taken so far.
	// +optional
	Steps []VolumeRestoreStep `json:"steps,omitempty"`
	// TimeStarted is when the restore started; the spec is frozen from then on.
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
	// TimeCompleted is when the restore completed or failed.
	// +optional
	TimeCompleted *metav1.Time `json:"timeCompleted,omitempty"`
	// TimeTaken is TimeCompleted - TimeStarted.
	// +optional
	TimeTaken string `json:"timeTaken,omitempty"`
	// CommitTs is the timestamp the data was restored to.
	// +optional
	CommitTs string `json:"commitTs,omitempty"`
	// Phase is a one-word summary derived from the conditions.
	// +optional
	Phase VolumeRestorePhase `json:"phase,omitempty"`
	// Conditions are the API of progress.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VolumeRestore restores one TiDB cluster, spread over several Kubernetes clusters, from a
// VolumeBackup's snapshots.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vrt,categories=fedbr
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="CommitTS",type=string,JSONPath=`.status.commitTs`
// +kubebuilder:printcolumn:name="TimeTaken",type=string,JSONPath=`.status.timeTaken`
// +kubebuilder:printcolumn:name="Checked",type=string,JSONPath=`.status.conditions[?(@.type=="Checked")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.timeStarted) || (has(self.spec.crossAZ) == has(oldSelf.spec.crossAZ) && (!has(self.spec.crossAZ) || self.spec.crossAZ == oldSelf.spec.crossAZ) && self.spec.clusters.size() == oldSelf.spec.clusters.size() && self.spec.clusters.all(c, oldSelf.spec.clusters.exists(o, o.k8sClusterName == c.k8sClusterName && o.tcName == c.tcName && o.tcNamespace == c.tcNamespace && (has(o.azName) == has(c.azName) && (!has(o.azName) || o.azName == c.azName)) && (has(o.backup.s3) == has(c.backup.s3) && (!has(o.backup.s3) || ((has(o.backup.s3.bucket) == has(c.backup.s3.bucket) && (!has(o.backup.s3.bucket) || o.backup.s3.bucket == c.backup.s3.bucket)) && (has(o.backup.s3.prefix) == has(c.backup.s3.prefix) && (!has(o.backup.s3.prefix) || o.backup.s3.prefix == c.backup.s3.prefix)) && (has(o.backup.s3.path) == has(c.backup.s3.path) && (!has(o.backup.s3.path) || o.backup.s3.path == c.backup.s3.path)) && (has(o.backup.s3.region) == has(c.backup.s3.region) && (!has(o.backup.s3.region) || o.backup.s3.region == c.backup.s3.region)) && (has(o.backup.s3.endpoint) == has(c.backup.s3.endpoint) && (!has(o.backup.s3.endpoint) || o.backup.s3.endpoint == c.backup.s3.endpoint))))) && (has(o.backup.gcs) == has(c.backup.gcs) && (!has(o.backup.gcs) || ((has(o.backup.gcs.bucket) == has(c.backup.gcs.bucket) && (!has(o.backup.gcs.bucket) || o.backup.gcs.bucket == c.backup.gcs.bucket)) && (has(o.backup.gcs.prefix) == has(c.backup.gcs.prefix) && (!has(o.backup.gcs.prefix) || o.backup.gcs.prefix == c.backup.gcs.prefix)) && (has(o.backup.gcs.path) == has(c.backup.gcs.path) && (!has(o.backup.gcs.path) || o.backup.gcs.path == c.backup.gcs.path))))) && (has(o.backup.azblob) == has(c.backup.azblob) && (!has(o.backup.azblob) || ((has(o.backup.azblob.container) == has(c.backup.azblob.container) && (!has(o.backup.azblob.container) || o.backup.azblob.container == c.backup.azblob.container)) && (has(o.backup.azblob.prefix) == has(c.backup.azblob.prefix) && (!has(o.backup.azblob.prefix) || o.backup.azblob.prefix == c.backup.azblob.prefix)) && (has(o.backup.azblob.path) == has(c.backup.azblob.path) && (!has(o.backup.azblob.path) || o.backup.azblob.path == c.backup.azblob.path))))) && (has(o.backup.local) == has(c.backup.local) && (!has(o.backup.local) || ((has(o.backup.local.prefix) == has(c.backup.local.prefix) && (!has(o.backup.local.prefix) || o.backup.local.prefix == c.backup.local.prefix))))))))",message="spec.clusters cannot change after the restore has started: volumes are already being created from the old clusters' backups; create a new VolumeRestore instead"
type VolumeRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VolumeRestoreSpec `json:"spec"`
	// +optional
	Status VolumeRestoreStatus `json:"status,omitempty"`
}

// VolumeRestoreList is a list of VolumeRestores.
//
// +kubebuilder:object:root=true
type VolumeRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeRestore `json:"items"`
}
