package meta

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PVVolumeID is the cloud volume a PV names: a CSI volume handle (of any driver: a handle that
// is not an EBS volume id matches no EBS volume) or an in-tree awsElasticBlockStore id
// (aws://ZONE/vol-… or vol-…); "" for neither. It does not validate: callers match it against
// volumes they know.
func PVVolumeID(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.CSI != nil:
		return pv.Spec.CSI.VolumeHandle
	case pv.Spec.AWSElasticBlockStore != nil:
		id := pv.Spec.AWSElasticBlockStore.VolumeID
		return id[strings.LastIndex(id, "/")+1:]
	}
	return ""
}

// AnnotationVolumeID is put on each PV a clustermeta records, naming the EBS volume behind it:
// upstream tidb-operator's restore finds a backed-up volume's PV by this annotation, not by
// the PV's volume source, so a backup without it cannot be restored by upstream.
const AnnotationVolumeID = "temporary/volume-id"
