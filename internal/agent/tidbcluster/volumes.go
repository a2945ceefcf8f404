package tidbcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// EBSCSIDriver is the AWS EBS CSI driver's name.
const EBSCSIDriver = "ebs.csi.aws.com"

// EBSVolumeID is the EBS volume id behind a PV: the CSI volume handle of ebs.csi.aws.com, or
// the in-tree awsElasticBlockStore volume id (aws://ZONE/vol-… or vol-…).
func EBSVolumeID(pv *corev1.PersistentVolume) (string, error) {
	switch {
	case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == EBSCSIDriver:
		if pv.Spec.CSI.VolumeHandle == "" {
			return "", fmt.Errorf("volume %s: empty CSI volume handle", pv.Name)
		}
		return pv.Spec.CSI.VolumeHandle, nil
	case pv.Spec.CSI != nil:
		return "", fmt.Errorf("volume %s is served by CSI driver %s, not %s: only EBS volumes can be snapshotted", pv.Name, pv.Spec.CSI.Driver, EBSCSIDriver)
	case pv.Spec.AWSElasticBlockStore != nil:
		id := pv.Spec.AWSElasticBlockStore.VolumeID
		if i := strings.LastIndex(id, "/"); i >= 0 {
			id = id[i+1:]
		}
		if !strings.HasPrefix(id, "vol-") {
			return "", fmt.Errorf("volume %s: in-tree EBS volume id %q is not vol-…", pv.Name, pv.Spec.AWSElasticBlockStore.VolumeID)
		}
		return id, nil
	}
	return "", fmt.Errorf("volume %s is not an EBS volume (neither CSI %s nor awsElasticBlockStore): only EBS volumes can be snapshotted", pv.Name, EBSCSIDriver)
}

// InstanceID is the EC2 instance id in a node's providerID (aws:///ZONE/i-…).
func InstanceID(providerID string) (string, error) {
	if !strings.HasPrefix(providerID, "aws://") {
		return "", fmt.Errorf("providerID %q is not an AWS instance (want aws:///ZONE/i-…)", providerID)
	}
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("providerID %q names no instance (want aws:///ZONE/i-…)", providerID)
	}
	return id, nil
}
