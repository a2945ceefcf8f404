package job

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// ErrUnsupportedStorage marks a storage provider the BR engine cannot use (GCS, Azure Blob):
// EBS snapshots are AWS-only, and so is the engine's metadata store.
var ErrUnsupportedStorage = errors.New("unsupported storage provider")

// Storage is a storage provider as the steps see it.
type Storage struct {
	// Flag is the value of --storage: s3://BUCKET/PREFIX or a directory in the pod (relative to
	// the pod's working directory "/", see Build).
	Flag string
	// Volumes and VolumeMounts make a local storage visible in the pod.
	Volumes      []corev1.Volume
	VolumeMounts []corev1.VolumeMount
	// Env carries S3 credentials from the provider's Secret.
	Env []corev1.EnvVar
	// HostDir is the directory on the node for a local storage backed by a hostPath volume
	// (the agent reads metadata there); empty otherwise.
	HostDir string
	// Bucket, Prefix and Region (empty: the agent's region) locate an S3 storage for the
	// agent's own reads.
	Bucket, Prefix, Region string
}

// StorageFor turns a template's storage provider into the step's --storage flag, the volumes
// it needs mounted and the credentials it needs in its environment.
func StorageFor(sp fedv1alpha1.StorageProvider) (Storage, error) {
	switch {
	case sp.S3 != nil:
		return s3Storage(sp.S3)
	case sp.Local != nil:
		l := sp.Local
		if l.VolumeMount.MountPath == "" {
			return Storage{}, errors.New("local storage: volumeMount.mountPath is empty")
		}
		vol := *l.Volume.DeepCopy()
		mount := *l.VolumeMount.DeepCopy()
		if vol.Name == "" {
			vol.Name = "storage"
		}
		mount.Name = vol.Name
		st := Storage{
			Flag:    InPod(path.Join(mount.MountPath, l.Prefix)),
			Volumes: []corev1.Volume{vol}, VolumeMounts: []corev1.VolumeMount{mount},
		}
		if vol.HostPath != nil {
			st.HostDir = path.Join(vol.HostPath.Path, strings.TrimPrefix(mount.SubPath, "/"), l.Prefix)
		}
		return st, nil
	case sp.Gcs != nil:
		return Storage{}, fmt.Errorf("%w: gcs (volume-snapshot backups keep their metadata in S3 or a mounted volume)", ErrUnsupportedStorage)
	case sp.Azblob != nil:
		return Storage{}, fmt.Errorf("%w: azblob (volume-snapshot backups keep their metadata in S3 or a mounted volume)", ErrUnsupportedStorage)
	}
	return Storage{}, errors.New("no storage provider is set")
}

func s3Storage(s *fedv1alpha1.S3StorageProvider) (Storage, error) {
	bucket, prefix := s.Bucket, s.Prefix
	if bucket == "" {
		p := strings.TrimPrefix(s.Path, "s3://")
		b, rest, _ := strings.Cut(p, "/")
		if b == "" {
			return Storage{}, errors.New("s3 storage: neither bucket nor path s3://BUCKET/PREFIX is set")
		}
		bucket, prefix = b, path.Join(rest, prefix)
	}
	prefix = strings.Trim(prefix, "/")
	st := Storage{Flag: "s3://" + bucket + "/" + prefix, Bucket: bucket, Prefix: prefix, Region: s.Region}
	if prefix == "" {
		st.Flag = "s3://" + bucket
	}
	if s.Region != "" {
		// The bucket's region travels with its location; the steps' --region stays the
		// data plane's (EC2 and EBS).
		st.Flag += "?region=" + url.QueryEscape(s.Region)
	}
	if s.SecretName != "" {
		key := func(env, k string) corev1.EnvVar {
			return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.SecretName}, Key: k}}}
		}
		st.Env = []corev1.EnvVar{key("AWS_ACCESS_KEY_ID", "access_key"), key("AWS_SECRET_ACCESS_KEY", "secret_key")}
	}
	return st, nil
}
