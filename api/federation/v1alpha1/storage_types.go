package v1alpha1

import corev1 "k8s.io/api/core/v1"

// StorageProvider says where a backup's metadata lives. Exactly one provider must be set; the
// snapshots themselves always live in EBS.
//
// gcs and azblob are in the schema so that upstream's manifests parse, and refused at
// admission: fedbr keeps a backup's metadata in S3 or a mounted volume only.
//
// +kubebuilder:validation:XValidation:rule="[has(self.s3), has(self.gcs), has(self.azblob), has(self.local)].filter(x, x).size() == 1",message="exactly one storage provider (s3, gcs, azblob or local) must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.gcs)",message="gcs is not supported: volume-snapshot backups keep their metadata in s3 (Amazon S3) or local storage"
// +kubebuilder:validation:XValidation:rule="!has(self.azblob)",message="azblob is not supported: volume-snapshot backups keep their metadata in s3 (Amazon S3) or local storage"
type StorageProvider struct {
	// S3 is an Amazon S3 bucket.
	// +optional
	S3 *S3StorageProvider `json:"s3,omitempty"`
	// Gcs is refused at admission (accepted by upstream; not supported by fedbr).
	// +optional
	Gcs *GcsStorageProvider `json:"gcs,omitempty"`
	// Azblob is refused at admission (accepted by upstream; not supported by fedbr).
	// +optional
	Azblob *AzblobStorageProvider `json:"azblob,omitempty"`
	// Local is a volume mounted into the BR Jobs (used by the lab and for tests).
	// +optional
	Local *LocalStorageProvider `json:"local,omitempty"`
}

// S3StorageProviderType names the flavour of S3 API behind an endpoint.
// +kubebuilder:validation:Enum=aws;alibaba;ceph;digitalocean;dreamhost;ibmcos;minio;netease;wasabi
type S3StorageProviderType string

// S3StorageProvider is an Amazon S3 bucket. The fields fedbr does not honour (endpoint,
// storageClass, acl, sse, options, and providers other than aws, which need an endpoint) are
// refused at admission rather than accepted and ignored: the steps read and write metadata
// through the SDK with AWS's endpoints, the bucket's default storage class, ACL and
// encryption.
//
// +kubebuilder:validation:XValidation:rule="self.provider == 'aws'",message="s3.provider: only aws is supported (other S3 flavours need s3.endpoint, which fedbr does not honour)"
// +kubebuilder:validation:XValidation:rule="!has(self.endpoint) || size(self.endpoint) == 0",message="s3.endpoint is not honoured: fedbr calls Amazon S3's own endpoint for s3.region; remove the field"
// +kubebuilder:validation:XValidation:rule="!has(self.storageClass) || size(self.storageClass) == 0",message="s3.storageClass is not honoured: metadata objects take the bucket's default storage class; remove the field"
// +kubebuilder:validation:XValidation:rule="!has(self.acl) || size(self.acl) == 0",message="s3.acl is not honoured: metadata objects take the bucket's default ACL; remove the field"
// +kubebuilder:validation:XValidation:rule="!has(self.sse) || size(self.sse) == 0",message="s3.sse is not honoured: metadata objects take the bucket's default encryption (set SSE-S3 or SSE-KMS as the bucket's default); remove the field"
// +kubebuilder:validation:XValidation:rule="!has(self.options) || size(self.options) == 0",message="s3.options is not honoured: fedbr passes no storage flags through; remove the field"
type S3StorageProvider struct {
	// Provider is the flavour of S3 API; only aws (Amazon S3) is accepted.
	Provider S3StorageProviderType `json:"provider"`
	// Region is the bucket's region; the data plane's region (the agent's --region) when
	// empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	Region string `json:"region,omitempty"`
	// Path is the full location, s3://bucket/prefix; an alternative to bucket + prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`
	// Bucket is the bucket name.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Bucket string `json:"bucket,omitempty"`
	// Endpoint is refused at admission (not honoured).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`
	// StorageClass is refused at admission (not honoured).
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
	// Acl is refused at admission (not honoured).
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
	// SSE is refused at admission (not honoured; the bucket's default encryption applies).
	// +optional
	SSE string `json:"sse,omitempty"`
	// Options is refused at admission (not honoured).
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
