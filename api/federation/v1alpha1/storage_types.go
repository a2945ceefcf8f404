package v1alpha1

import corev1 "k8s.io/api/core/v1"

// StorageProvider says where a backup's metadata lives. Exactly one provider must be set; the
// snapshots themselves always live in EBS.
//
// +kubebuilder:validation:XValidation:rule="[has(self.s3), has(self.gcs), has(self.azblob), has(self.local)].filter(x, x).size() == 1",message="exactly one storage provider (s3, gcs, azblob or local) must be set"
type StorageProvider struct {
	// S3 is an S3-compatible bucket.
	// +optional
	S3 *S3StorageProvider `json:"s3,omitempty"`
	// Gcs is a Google Cloud Storage bucket.
	// +optional
	Gcs *GcsStorageProvider `json:"gcs,omitempty"`
	// Azblob is an Azure Blob Storage container.
	// +optional
	Azblob *AzblobStorageProvider `json:"azblob,omitempty"`
	// Local is a volume mounted into the BR Jobs (used by the lab and for tests).
	// +optional
	Local *LocalStorageProvider `json:"local,omitempty"`
}

// S3StorageProviderType names the flavour of S3 API behind an endpoint.
// +kubebuilder:validation:Enum=aws;alibaba;ceph;digitalocean;dreamhost;ibmcos;minio;netease;wasabi
type S3StorageProviderType string

// S3StorageProvider is an S3-compatible bucket.
type S3StorageProvider struct {
	// Provider is the flavour of S3 API (aws for Amazon S3).
	Provider S3StorageProviderType `json:"provider"`
	// Region is the bucket's region.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`
	// Path is the full location, s3://bucket/prefix; an alternative to bucket + prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`
	// Bucket is the bucket name.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Bucket string `json:"bucket,omitempty"`
	// Endpoint overrides the S3 endpoint URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`
	// StorageClass is the storage class of written objects.
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
	// Acl is the canned ACL of written objects.
	// +optional
	Acl string `json:"acl,omitempty"`
	// SecretName names a Secret with access_key and secret_key.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// Prefix is the key prefix under the bucket. For a VolumeBackup, each member writes under
	// <prefix>-<k8sClusterName>.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
	// SSE is the server-side encryption mode (AES256 or aws:kms).
	// +optional
	SSE string `json:"sse,omitempty"`
	// Options are extra storage flags passed through to the BR engine.
	// +optional
	Options []string `json:"options,omitempty"`
}

// GcsStorageProvider is a Google Cloud Storage bucket.
type GcsStorageProvider struct {
	// ProjectId is the GCP project.
	ProjectId string `json:"projectId"`
	// Location is the bucket location.
	// +optional
	Location string `json:"location,omitempty"`
	// Path is the full location, gcs://bucket/prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`
	// Bucket is the bucket name.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Bucket string `json:"bucket,omitempty"`
	// StorageClass is the storage class of written objects.
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
	// ObjectAcl is the ACL of written objects.
	// +optional
	ObjectAcl string `json:"objectAcl,omitempty"`
	// BucketAcl is the ACL of a created bucket.
	// +optional
	BucketAcl string `json:"bucketAcl,omitempty"`
	// SecretName names a Secret with the service-account credentials.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// Prefix is the object prefix under the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
}

// AzblobStorageProvider is an Azure Blob Storage container.
type AzblobStorageProvider struct {
	// Path is the full location, azure://container/prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`
	// Container is the container name.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Container string `json:"container,omitempty"`
	// AccessTier is the access tier of written blobs (Hot, Cool or Archive).
	// +optional
	AccessTier string `json:"accessTier,omitempty"`
	// SecretName names a Secret with the account credentials.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// StorageAccount is the storage account name.
	// +optional
	StorageAccount string `json:"storageAccount,omitempty"`
	// SasToken is a shared access signature token.
	// +optional
	SasToken string `json:"sasToken,omitempty"`
	// Prefix is the blob prefix under the container.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
}

// LocalStorageProvider is a volume mounted into the Jobs.
type LocalStorageProvider struct {
	// Volume is the volume to mount.
	// The schema of a volume source is large and is checked when the Job is created.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Volume corev1.Volume `json:"volume"`
	// VolumeMount says where to mount it.
	VolumeMount corev1.VolumeMount `json:"volumeMount"`
	// Prefix is the directory under the mount path.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
}

// BRConfig tunes the BR engine run by the data-plane Jobs.
type BRConfig struct {
	// Concurrency is the number of concurrent cloud calls per Job.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Concurrency *uint32 `json:"concurrency,omitempty"`
	// CheckRequirements makes BR check the cluster version before it starts.
	// +optional
	CheckRequirements *bool `json:"checkRequirements,omitempty"`
	// SendCredToTikv passes storage credentials to TiKV (unused by volume snapshots; kept for
	// compatibility).
	// +optional
	SendCredToTikv *bool `json:"sendCredToTikv,omitempty"`
	// Options are extra flags for the BR engine.
	// +optional
	Options []string `json:"options,omitempty"`
}
