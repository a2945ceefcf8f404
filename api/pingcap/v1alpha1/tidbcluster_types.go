package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TiKVVolumesReadyAnnotation gates TiKV start in recovery mode: tidb-operator starts TiKV only once
// the restore sets it to <restoreNamespace>/<restoreName>.
const TiKVVolumesReadyAnnotation = "tidb.pingcap.com/tikv-volumes-ready"

// ComponentSpec is what fedbr reads of a PD, TiKV or TiDB component.
//
// +kubebuilder:pruning:PreserveUnknownFields
type ComponentSpec struct {
	// Replicas is the number of members.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// BaseImage is the image without tag.
	// +optional
	BaseImage string `json:"baseImage,omitempty"`
	// Version overrides the cluster version for this component.
	// +optional
	Version string `json:"version,omitempty"`
	// StorageClassName of the component's PVCs.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// Requests holds the storage request of the data volume, and the cpu and memory requests
	// of the component's container (warm-up pods take TiKV's).
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits holds the cpu and memory limits of the component's container (warm-up pods take
	// TiKV's).
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// NodeSelector is added to the TidbCluster's for the component's pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the component's pods, instead of the TidbCluster's.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the component's pods, instead of the TidbCluster's.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// StorageVolumes are the component's volumes besides its data volume. tidb-operator mounts
	// storageVolumes[i] as pod volume <component>-<name>, so TiKV's claims are
	// tikv-<name>-<tc>-tikv-<ordinal>; a restore checks them against the backup's.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	StorageVolumes []StorageVolume `json:"storageVolumes,omitempty"`
	// Config is the component's configuration as tidb-operator holds it: a TOML string or a
	// map of the same keys (its GenericConfig). A restore reads TiKV's encryption at rest
	// (security.encryption) from it and checks it against the backup's.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
}

// StorageVolume is what fedbr reads of one of a component's extra volumes.
//
// +kubebuilder:pruning:PreserveUnknownFields
type StorageVolume struct {
	// Name makes the pod volume <component>-<name>; empty names the data volume itself.
	// tidb-operator's CRD requires the key (an empty name is written as "").
	Name string `json:"name"`
	// StorageSize is the claim's size; tidb-operator's CRD requires it.
	StorageSize string `json:"storageSize"`
	// MountPath is where the component mounts the volume.
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// TLSCluster is tidb-operator's spec.tlsCluster.
type TLSCluster struct {
	// Enabled turns TLS between the components on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// TidbClusterSpec is what fedbr reads and writes of a TidbCluster's spec.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TidbClusterSpec struct {
	// Version is the TiDB version of all components.
	// +optional
	Version string `json:"version,omitempty"`
	// ClusterDomain is the Kubernetes cluster domain used in cross-cluster addresses.
	// +optional
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// AcrossK8s says this TidbCluster is one part of a cluster spread over Kubernetes clusters;
	// volume-snapshot backup and restore require it.
	// +optional
	AcrossK8s bool `json:"acrossK8s,omitempty"`
	// PDAddresses are the client URLs (http://host:port) of a PD that runs elsewhere, typically
	// in another Kubernetes cluster of the same federated TiDB cluster: this TidbCluster's TiKV
	// stores join that PD. With pd.replicas 0 (or no pd) it runs no PD of its own.
	// +optional
	PDAddresses []string `json:"pdAddresses,omitempty"`
	// Cluster references the TidbCluster (in another Kubernetes cluster of a federated TiDB
	// cluster) whose PD this one joins, by name, namespace and cluster domain.
	// +optional
	Cluster *TidbClusterRef `json:"cluster,omitempty"`
	// TLSCluster turns on TLS between the cluster's components: PD and TiKV then take only
	// mutual TLS, and a client such as a BR step presents the cluster client certificate of the
	// Secret <name>-cluster-client-secret (keys ca.crt, tls.crt and tls.key).
	// +optional
	TLSCluster *TLSCluster `json:"tlsCluster,omitempty"`
	// RecoveryMode makes tidb-operator start PD with the snapshot-recovering marker and TiKV only
	// once the volumes are ready; restore-finish sets it back to false.
	// +optional
	RecoveryMode bool `json:"recoveryMode,omitempty"`
	// NodeSelector, Tolerations and Affinity are every component's, unless the component sets
	// its own (NodeSelector: merged, the component's keys winning).
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// PD is the PD component.
	// +optional
	PD *ComponentSpec `json:"pd,omitempty"`
	// TiKV is the TiKV component.
	// +optional
	TiKV *ComponentSpec `json:"tikv,omitempty"`
	// TiDB is the TiDB component.
	// +optional
	TiDB *ComponentSpec `json:"tidb,omitempty"`
}

// TidbClusterRef names a TidbCluster, possibly in another Kubernetes cluster.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TidbClusterRef struct {
	// Name of the TidbCluster.
	Name string `json:"name"`
	// Namespace of the TidbCluster; default the referring TidbCluster's.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// ClusterDomain is the referenced cluster's Kubernetes cluster domain.
	// +optional
	ClusterDomain string `json:"clusterDomain,omitempty"`
}

// PDMember is one PD member as tidb-operator publishes it.
//
// +kubebuilder:pruning:PreserveUnknownFields
type PDMember struct {
	// Name is the member name.
	Name string `json:"name"`
	// ID is PD's member id.
	ID string `json:"id"`
	// ClientURL is the member's client address.
	ClientURL string `json:"clientURL"`
	// Health is whether the member is healthy.
	Health bool `json:"health"`
}

// TiKVStore is one TiKV store as tidb-operator publishes it.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TiKVStore struct {
	// ID is PD's store id.
	ID string `json:"id"`
	// PodName is the TiKV pod.
	PodName string `json:"podName"`
	// IP is the address TiKV serves on.
	IP string `json:"ip"`
	// LeaderCount is how many region leaders the store holds.
	LeaderCount int32 `json:"leaderCount"`
	// State is Up, Down, Offline or Tombstone.
	State string `json:"state"`
}

// PDStatus is what fedbr reads of PD's status.
//
// +kubebuilder:pruning:PreserveUnknownFields
type PDStatus struct {
	// Members by name.
	// +optional
	Members map[string]PDMember `json:"members,omitempty"`
}

// TiKVStatus is what fedbr reads of TiKV's status.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TiKVStatus struct {
	// Phase is the TiKV phase.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Stores by store id.
	// +optional
	Stores map[string]TiKVStore `json:"stores,omitempty"`
	// FailureStores are the stores tidb-operator failed over, by store id: for each it runs one
	// TiKV pod beyond spec.tikv.replicas, and keeps it until the failover is recovered
	// (spec.tikv.recoverFailover).
	// +optional
	FailureStores map[string]TiKVFailureStore `json:"failureStores,omitempty"`
}

// TiKVFailureStore is one TiKV store tidb-operator failed over: it was Down longer than the
// operator's TiKV failover period.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TiKVFailureStore struct {
	// PodName is the failed store's pod.
	// +optional
	PodName string `json:"podName,omitempty"`
	// StoreID is PD's store id.
	// +optional
	StoreID string `json:"storeID,omitempty"`
	// StoreDeleted says the operator deleted the store from PD, and the pod's claims, so that
	// the pod starts again as a new store.
	// +optional
	StoreDeleted bool `json:"storeDeleted,omitempty"`
}

// TidbClusterStatus is what fedbr reads of a TidbCluster's status.
//
// +kubebuilder:pruning:PreserveUnknownFields
type TidbClusterStatus struct {
	// ClusterID is PD's cluster id.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// PD is PD's status.
	// +optional
	PD PDStatus `json:"pd,omitempty"`
	// TiKV is TiKV's status.
	// +optional
	TiKV TiKVStatus `json:"tikv,omitempty"`
}

// TidbCluster is tidb-operator's TiDB cluster, reduced to what fedbr uses.
//
// tidb-operator's CRD declares no subresources (manifests/crd/v1/pingcap.com_tidbclusters.yaml:
// `subresources: {}`): its status is written through the resource itself, and every change to
// the object but its metadata bumps metadata.generation.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tc
// +kubebuilder:printcolumn:name="Recovery",type=boolean,JSONPath=`.spec.recoveryMode`
// +kubebuilder:printcolumn:name="TiKV",type=integer,JSONPath=`.spec.tikv.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TidbCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TidbClusterSpec `json:"spec"`
	// +optional
	Status TidbClusterStatus `json:"status,omitempty"`
}

// TidbClusterList is a list of TidbClusters.
//
// +kubebuilder:object:root=true
type TidbClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TidbCluster `json:"items"`
}
