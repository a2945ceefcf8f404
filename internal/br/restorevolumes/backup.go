package restorevolumes

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tikvconfig"
)

// BackupReport is the part of the backupmeta rec that restore-volumes reports in its member's
// status.steps entry (Status.Backup) before it creates any volume: what the agent checks the
// target TidbCluster against (TiKV store count, the claims and their volume layout) and
// rebuilds the TiKV claims from, and nothing else. The agent reads no storage itself: this
// report (with the volume map of the step's Result) is all it learns of the backup.
//
// It keeps the resolved ts and cluster version, every TiKV store with its volumes (id, type,
// snapshot, AZ), the kubernetes section's PVs of those volumes and their PVCs, each stripped
// to what a rebuild uses (names, the claims' labels, capacity, access and volume modes,
// storage classes, reclaim policy, the PVs' provisioned-by annotation, mount options, the EBS
// source and its file system), and of the backed-up TidbCluster its name and TiKV's
// encryption at rest (reportTidbCluster). A PV, PVC or TiKV config that cannot be read is an
// error: the agent would refuse the report anyway, and could not check the encryption.
func BackupReport(rec *meta.Record) (*meta.Record, error) {
	out := &meta.Record{TiKV: meta.TiKV{Replicas: rec.TiKV.Replicas}}
	if ci := rec.ClusterInfo; ci != nil {
		out.ClusterInfo = &meta.ClusterInfo{Version: ci.Version, FullBackupType: ci.FullBackupType, ResolvedTS: ci.ResolvedTS}
	}
	volumes := map[string]bool{}
	for _, s := range rec.TiKV.Stores {
		st := meta.TiKVStore{ID: s.ID, Volumes: make([]meta.Volume, 0, len(s.Volumes))}
		for _, v := range s.Volumes {
			st.Volumes = append(st.Volumes, meta.Volume{ID: v.ID, Type: v.Type, SnapshotID: v.SnapshotID, AZ: v.AZ})
			volumes[v.ID] = true
		}
		out.TiKV.Stores = append(out.TiKV.Stores, st)
	}
	k := rec.Kubernetes
	pvNames, claimNames := map[string]bool{}, map[string]bool{}
	for i, raw := range k.PVs {
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(raw, pv); err != nil {
			return nil, fmt.Errorf("backupmeta kubernetes.pvs[%d]: %w", i, err)
		}
		if !volumes[meta.PVVolumeID(pv)] {
			continue // not a TiKV volume of this backup
		}
		pvNames[pv.Name] = true
		if pv.Spec.ClaimRef != nil {
			claimNames[pv.Spec.ClaimRef.Name] = true
		}
		b, err := json.Marshal(stripPV(pv))
		if err != nil {
			return nil, err
		}
		out.Kubernetes.PVs = append(out.Kubernetes.PVs, b)
	}
	for i, raw := range k.PVCs {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(raw, pvc); err != nil {
			return nil, fmt.Errorf("backupmeta kubernetes.pvcs[%d]: %w", i, err)
		}
		if !pvNames[pvc.Spec.VolumeName] && !claimNames[pvc.Name] {
			continue
		}
		b, err := json.Marshal(stripPVC(pvc))
		if err != nil {
			return nil, err
		}
		out.Kubernetes.PVCs = append(out.Kubernetes.PVCs, b)
	}
	if len(k.TidbCluster) > 0 && string(k.TidbCluster) != "null" {
		b, err := reportTidbCluster(k.TidbCluster)
		if err != nil {
			return nil, err
		}
		out.Kubernetes.TidbCluster = b
	}
	return out, nil
}

// reportTidbCluster is what the report keeps of the backed-up TidbCluster raw: its name, and
// TiKV's encryption at rest (spec.tikv.config's security.encryption, in the map form, without
// a previous master key), which the agent checks the target's against; nil for neither.
func reportTidbCluster(raw json.RawMessage) (json.RawMessage, error) {
	var tc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			TiKV *struct {
				Config json.RawMessage `json:"config"`
			} `json:"tikv"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, fmt.Errorf("backupmeta kubernetes.crd_tidb_cluster: %w", err)
	}
	var enc tikvconfig.Encryption
	if tc.Spec.TiKV != nil {
		var err error
		if enc, err = tikvconfig.ParseEncryption(tc.Spec.TiKV.Config); err != nil {
			return nil, fmt.Errorf("backupmeta kubernetes.crd_tidb_cluster spec.tikv.config: %w", err)
		}
		enc.PreviousMasterKey = tikvconfig.MasterKey{}
	}
	out := map[string]any{}
	if tc.Metadata.Name != "" {
		out["metadata"] = map[string]string{"name": tc.Metadata.Name}
	}
	if config := enc.Map(); config != nil {
		out["spec"] = map[string]any{"tikv": map[string]any{"config": config}}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return json.Marshal(out)
}

// AnnProvisionedBy names the provisioner of a dynamically provisioned PV (the external
// provisioner writes the driver's name). Kubernetes' PV controller and the external
// provisioner decide by it who deletes the volume of a Delete PV, so a rebuild keeps it.
const AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"

// stripPV keeps of pv what a rebuild uses: of its annotations only AnnProvisionedBy.
func stripPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	out := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: pv.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: pv.Spec.Capacity, AccessModes: pv.Spec.AccessModes, PersistentVolumeReclaimPolicy: pv.Spec.PersistentVolumeReclaimPolicy,
			StorageClassName: pv.Spec.StorageClassName, VolumeMode: pv.Spec.VolumeMode, MountOptions: pv.Spec.MountOptions,
		},
	}
	switch s := pv.Spec; {
	case s.CSI != nil:
		out.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: s.CSI.Driver, VolumeHandle: s.CSI.VolumeHandle, FSType: s.CSI.FSType}
	case s.AWSElasticBlockStore != nil:
		out.Spec.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: s.AWSElasticBlockStore.VolumeID, FSType: s.AWSElasticBlockStore.FSType}
	}
	if pv.Spec.ClaimRef != nil {
		out.Spec.ClaimRef = &corev1.ObjectReference{Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name}
	}
	if by, ok := pv.Annotations[AnnProvisionedBy]; ok {
		out.Annotations = map[string]string{AnnProvisionedBy: by}
	}
	return out
}

// stripPVC keeps of pvc what a rebuild uses.
func stripPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Labels: pvc.Labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: pvc.Spec.AccessModes, StorageClassName: pvc.Spec.StorageClassName, VolumeMode: pvc.Spec.VolumeMode,
			Resources: corev1.VolumeResourceRequirements{Requests: pvc.Spec.Resources.Requests}, VolumeName: pvc.Spec.VolumeName,
		},
	}
}
