package tidbcluster

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
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

// TiKVDataVolume is the pod volume of TiKV's data directory; tidb-operator names its claim
// tikv-<tc>-tikv-<ordinal>.
const TiKVDataVolume = ComponentTiKV

// TiKVVolumeNames are the pod volumes whose claims every TiKV pod of tc mounts, sorted: the data
// volume and tikv-<name> for each spec.tikv.storageVolumes (the names tidb-operator gives
// them; its claims are <volume>-<tc>-tikv-<ordinal>). A storage volume without a name is the data
// volume itself.
func TiKVVolumeNames(tc *pcv1alpha1.TidbCluster) []string {
	names := []string{TiKVDataVolume}
	if tc.Spec.TiKV != nil {
		for _, sv := range tc.Spec.TiKV.StorageVolumes {
			if sv.Name != "" {
				names = append(names, TiKVDataVolume+"-"+sv.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
