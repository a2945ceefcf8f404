package compat_test

// An independent reader of an EBS volume-snapshot backupmeta as upstream's restore reads it:
// BR's `restore full --type=aws-ebs` (--prepare and the data phase) and tidb-operator v1.6's
// data-plane restore. It is typed with its own structs, named after upstream's JSON members,
// and shares nothing with fedbr's internal/meta, so a field fedbr's writer renames, drops or
// fills differently shows up here even when fedbr's own reader is content.
//
// The rules and where upstream states them (pingcap/tidb: br/pkg/config/ebs.go read at 149a2b7f;
// pingcap/tidb-operator v1.6.6, the same in v1.5.5):
//
//   - br/pkg/config/ebs.go (VolSnapBackupMeta, NewMetaFromStorage, checkEBSBRMeta): the JSON
//     members; cluster_info present, cluster_version a semantic version, resolved_ts not 0, at
//     least one store.
//   - br/pkg/task/restore_ebs_meta.go and restore_data.go (ReadBackupMetaData):
//     full_backup_type "aws-ebs"; tikv.replicas is the store count the data phase waits for.
//   - br/pkg/aws/ebs.go (CreateVolumes, EnableDataFSR): a volume is made from snapshot_id in
//     volume_az (no --target-az), keyed by volume_id; FSR and --volume-scope take the volumes
//     whose type is "storage.data-dir" as the data volumes.
//   - tidb-operator pkg/backup/util/aws_ebs.go (EBSBasedBRMeta, KubernetesBackup) and util.go
//     (GetVolSnapBackupMetaData): kubernetes.pvs and pvcs are PV and PVC objects,
//     crd_tidb_cluster a TidbCluster, kubernetes.options an unstructured object.
//   - tidb-operator pkg/backup/restore/restore_manager.go (validateRestore,
//     checkTiFlashAndTiKVReplicasFromBackupMeta, checkTiKVEncryption, warm-up): the backup's
//     TidbCluster is dereferenced (spec.tikv with replicas > 0, spec.tiflash,
//     spec.tikv.storageVolumes, spec.tikv.config's security.encryption); warm-up expects
//     storageVolumes + 1 claims per TiKV ordinal.
//   - tidb-operator pkg/backup/snapshotter/snapshotter.go (collectVolumesInfo, extractVolumes,
//     ProcessCSBPVCsAndPVs, resetPVCSequence) and snapshotter_aws.go (GetVolumeID,
//     SetVolumeID): the backup annotates each PV temporary/volume-id=<volume_id>; the restore
//     finds each volume's PV by that annotation ("pv with volume id … not found"), its PVC by
//     the PV's claimRef ("claimRef is nil", "pvc … not found"), points the PV's CSI handle
//     (ebs.csi.aws.com) or in-tree awsElasticBlockStore id at the new volume, and groups the
//     claims by the name pattern <volume>-<tc>-tikv-<ordinal>, where <volume> is "tikv" for
//     the data volume and "tikv-<storageVolume name>" for an extra one. An extra volume's type
//     is the TiKV config key whose value is its mount path, "" when no key holds it.
//
// The reader holds the type to that rule with dotted keys (raft-engine.dir for
// `[raft-engine] dir = …`). Upstream's own backup looks the key up among the top-level
// members of spec.tikv.config only (GenericConfig.Inner() is the nested map), so for that
// usual config it writes "" and would fail this rule; its restore compares no type but
// "storage.data-dir", so "" and the key restore alike there.

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Upstream's constants.
const (
	upDataType       = "storage.data-dir"    // BR and tidb-operator: the data volume's type
	upFullBackupType = "aws-ebs"             // BR: the only full_backup_type restored
	upAnnVolumeID    = "temporary/volume-id" // tidb-operator: PV → backed-up volume
	upEBSCSIDriver   = "ebs.csi.aws.com"     // tidb-operator: the CSI driver it rebinds
	upDataVolumeName = "tikv"                // tidb-operator: the data volume's name in claims
)

// upMeta is the backupmeta as BR and tidb-operator decode it.
type upMeta struct {
	ClusterInfo *upClusterInfo `json:"cluster_info"`
	TiKV        *upTiKV        `json:"tikv"`
	TiDB        *upReplicas    `json:"tidb"`
	PD          *upReplicas    `json:"pd"`
	Kubernetes  *upKubernetes  `json:"kubernetes"`
	Options     map[string]any `json:"options"`
	Region      string         `json:"region"`
}

type upClusterInfo struct {
	Version        string            `json:"cluster_version"`
	FullBackupType string            `json:"full_backup_type"`
	ResolvedTS     uint64            `json:"resolved_ts"`
	Replicas       map[string]uint64 `json:"replicas"`
}

type upTiKV struct {
	Replicas int        `json:"replicas"`
	Stores   []*upStore `json:"stores"`
}

type upStore struct {
	StoreID uint64      `json:"store_id"`
	Volumes []*upVolume `json:"volumes"`
}

type upVolume struct {
	VolumeID        string `json:"volume_id"`
	Type            string `json:"type"`
	SnapshotID      string `json:"snapshot_id"`
	RestoreVolumeID string `json:"restore_volume_id"`
	VolumeAZ        string `json:"volume_az"`
	Status          string `json:"status"`
}

type upReplicas struct {
	Replicas int32 `json:"replicas"`
}

type upKubernetes struct {
	PVs         []*corev1.PersistentVolume      `json:"pvs"`
	PVCs        []*corev1.PersistentVolumeClaim `json:"pvcs"`
	TidbCluster *upTidbCluster                  `json:"crd_tidb_cluster"`
	Options     *unstructured.Unstructured      `json:"options"`
}

// upTidbCluster is the part of pingcap.com/v1alpha1 TidbCluster upstream's restore reads.
type upTidbCluster struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		TiKV *struct {
			Replicas       int32 `json:"replicas"`
			StorageVolumes []struct {
				Name      string `json:"name"`
				MountPath string `json:"mountPath"`
			} `json:"storageVolumes"`
			Config json.RawMessage `json:"config"`
		} `json:"tikv"`
		TiFlash *struct {
			Replicas int32 `json:"replicas"`
		} `json:"tiflash"`
	} `json:"spec"`
}

// ruleError is one rule upstream's restore applies that the document breaks.
type ruleError struct {
	Rule, Field, Msg string
}

func (e ruleError) Error() string { return fmt.Sprintf("rule %s: %s: %s", e.Rule, e.Field, e.Msg) }

// Rule names, one per check, so a failure says which of upstream's rules broke.
const (
	ruleDecode       = "decode"              // BR and tidb-operator unmarshal the whole document
	ruleClusterInfo  = "br-cluster-info"     // cluster_info present
	ruleVersion      = "br-cluster-version"  // semantic version
	ruleResolvedTS   = "br-resolved-ts"      // not 0
	ruleBackupType   = "br-full-backup-type" // aws-ebs
	ruleStores       = "br-stores"           // at least one store, tikv.replicas covers them
	ruleVolume       = "br-volume"           // volume_id, snapshot_id, volume_az set
	ruleDataType     = "br-data-type"        // one storage.data-dir volume per store
	ruleKubernetes   = "op-kubernetes"       // kubernetes present
	ruleTidbCluster  = "op-tidb-cluster"     // crd_tidb_cluster a TidbCluster with TiKV
	ruleTiKVConfig   = "op-tikv-config"      // spec.tikv.config a TOML string or a map
	rulePVAnnotation = "op-pv-annotation"    // a PV per volume by temporary/volume-id
	rulePVSource     = "op-pv-source"        // that PV names the volume (EBS CSI or in-tree)
	ruleClaimRef     = "op-pv-claim-ref"     // that PV's claimRef names a listed PVC
	ruleClaimName    = "op-pvc-name"         // <volume>-<tc>-tikv-<ordinal>
	ruleStoreClaims  = "op-store-claims"     // a store's claims: one ordinal, data + each extra
	ruleExtraType    = "op-extra-type"       // an extra volume's type: the config key of its mount path
)

// readUpstream decodes raw as upstream does and returns every rule it breaks.
func readUpstream(raw []byte) (*upMeta, []error) {
	var m upMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, []error{ruleError{ruleDecode, "backupmeta", err.Error()}}
	}
	var errs []error
	fail := func(rule, field, format string, args ...any) {
		errs = append(errs, ruleError{rule, field, fmt.Sprintf(format, args...)})
	}

	// BR.
	if ci := m.ClusterInfo; ci == nil {
		fail(ruleClusterInfo, "cluster_info", "missing")
	} else {
		if !upSemver.MatchString(ci.Version) {
			fail(ruleVersion, "cluster_info.cluster_version", "%q is not a semantic version", ci.Version)
		}
		if ci.ResolvedTS == 0 {
			fail(ruleResolvedTS, "cluster_info.resolved_ts", "0")
		}
		if ci.FullBackupType != upFullBackupType {
			fail(ruleBackupType, "cluster_info.full_backup_type", "%q, want %q", ci.FullBackupType, upFullBackupType)
		}
	}
	if m.TiKV == nil || len(m.TiKV.Stores) == 0 {
		fail(ruleStores, "tikv.stores", "no store")
		return &m, errs
	}
	if m.TiKV.Replicas < len(m.TiKV.Stores) {
		fail(ruleStores, "tikv.replicas", "%d, fewer than the %d stores listed", m.TiKV.Replicas, len(m.TiKV.Stores))
	}
	for si, s := range m.TiKV.Stores {
		data := 0
		for vi, v := range s.Volumes {
			f := fmt.Sprintf("tikv.stores[%d].volumes[%d]", si, vi)
			for name, val := range map[string]string{"volume_id": v.VolumeID, "snapshot_id": v.SnapshotID, "volume_az": v.VolumeAZ} {
				if val == "" {
					fail(ruleVolume, f+"."+name, "empty")
				}
			}
			if v.Type == upDataType {
				data++
			}
		}
		if data != 1 {
			fail(ruleDataType, fmt.Sprintf("tikv.stores[%d].volumes[].type", si), "%d volumes typed %q, want 1", data, upDataType)
		}
	}

	// tidb-operator.
	k := m.Kubernetes
	if k == nil {
		fail(ruleKubernetes, "kubernetes", "missing")
		return &m, errs
	}
	tc := k.TidbCluster
	if tc == nil {
		fail(ruleTidbCluster, "kubernetes.crd_tidb_cluster", "missing")
		return &m, errs
	}
	if tc.APIVersion != "pingcap.com/v1alpha1" || tc.Kind != "TidbCluster" || tc.Metadata.Name == "" {
		fail(ruleTidbCluster, "kubernetes.crd_tidb_cluster", "apiVersion %q kind %q name %q: not a pingcap.com/v1alpha1 TidbCluster", tc.APIVersion, tc.Kind, tc.Metadata.Name)
	}
	if tc.Spec.TiKV == nil || tc.Spec.TiKV.Replicas == 0 {
		fail(ruleTidbCluster, "kubernetes.crd_tidb_cluster.spec.tikv.replicas", "no TiKV")
		return &m, errs
	}
	config, err := flatConfig(tc.Spec.TiKV.Config)
	if err != nil {
		fail(ruleTiKVConfig, "kubernetes.crd_tidb_cluster.spec.tikv.config", "%v", err)
	}
	mountOf := map[string]string{} // "tikv-<name>" → mount path
	for _, sv := range tc.Spec.TiKV.StorageVolumes {
		mountOf[upDataVolumeName+"-"+sv.Name] = sv.MountPath
	}

	pvOf := map[string]*corev1.PersistentVolume{}
	for i, pv := range k.PVs {
		id, ok := pv.Annotations[upAnnVolumeID]
		if !ok {
			continue
		}
		if prev := pvOf[id]; prev != nil {
			fail(rulePVAnnotation, fmt.Sprintf("kubernetes.pvs[%d].metadata.annotations[%s]", i, upAnnVolumeID), "%s also annotates PV %s", id, prev.Name)
		}
		pvOf[id] = pv
	}
	pvcOf := map[string]*corev1.PersistentVolumeClaim{}
	for _, pvc := range k.PVCs {
		pvcOf[pvc.Name] = pvc
	}
	claimName := regexp.MustCompile(`^(.+)-` + regexp.QuoteMeta(tc.Metadata.Name) + `-tikv-(\d+)$`)
	for si, s := range m.TiKV.Stores {
		ordinals := map[string]bool{}
		groups := map[string]bool{}
		resolved := 0 // volumes followed to their claim
		for vi, v := range s.Volumes {
			f := fmt.Sprintf("tikv.stores[%d].volumes[%d]", si, vi)
			pv := pvOf[v.VolumeID]
			if pv == nil {
				fail(rulePVAnnotation, f+".volume_id", "no PV in kubernetes.pvs has %s=%s", upAnnVolumeID, v.VolumeID)
				continue
			}
			if got := pvVolumeID(pv); got != v.VolumeID {
				fail(rulePVSource, "PV "+pv.Name, "names volume %q, want %s on the %s CSI driver or in-tree awsElasticBlockStore", got, v.VolumeID, upEBSCSIDriver)
			}
			if pv.Spec.ClaimRef == nil {
				fail(ruleClaimRef, "PV "+pv.Name+" spec.claimRef", "nil")
				continue
			}
			pvc := pvcOf[pv.Spec.ClaimRef.Name]
			if pvc == nil || pvc.Namespace != pv.Spec.ClaimRef.Namespace {
				fail(ruleClaimRef, "PV "+pv.Name+" spec.claimRef", "PVC %s/%s not in kubernetes.pvcs", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
				continue
			}
			match := claimName.FindStringSubmatch(pvc.Name)
			if match == nil {
				fail(ruleClaimName, "PVC "+pvc.Name, "does not match %s", claimName)
				continue
			}
			group := match[1]
			resolved++
			ordinals[match[2]] = true
			groups[group] = true
			if group == upDataVolumeName {
				if v.Type != upDataType {
					fail(ruleDataType, f+".type", "%q for the data volume (claim %s), want %q", v.Type, pvc.Name, upDataType)
				}
			} else {
				mount, ok := mountOf[group]
				if !ok {
					fail(ruleStoreClaims, "PVC "+pvc.Name, "volume %q is neither the data volume nor one of spec.tikv.storageVolumes", group)
					continue
				}
				switch want := keysHolding(config, mount); {
				case len(want) == 0 && v.Type != "":
					fail(ruleExtraType, f+".type", "%q for %s (mount %s): no TiKV config key holds that path, want \"\"", v.Type, group, mount)
				case len(want) > 0 && !slices.Contains(want, v.Type):
					fail(ruleExtraType, f+".type", "%q for %s (mount %s), want the TiKV config key %s", v.Type, group, mount, strings.Join(want, " or "))
				}
			}
		}
		if len(ordinals) > 1 {
			fail(ruleStoreClaims, fmt.Sprintf("tikv.stores[%d]", si), "claims of %d TiKV ordinals, want one pod's", len(ordinals))
		}
		if want := len(tc.Spec.TiKV.StorageVolumes) + 1; resolved == len(s.Volumes) && (len(groups) != want || len(s.Volumes) != want) {
			fail(ruleStoreClaims, fmt.Sprintf("tikv.stores[%d]", si), "%d volumes in %d claim groups, want %d (data + spec.tikv.storageVolumes)", len(s.Volumes), len(groups), want)
		}
	}
	return &m, errs
}

// upSemver admits what BR's semver.NewVersion (Masterminds) takes: an optional v, one to
// three numbers, a pre-release and build metadata.
var upSemver = regexp.MustCompile(`^v?\d+(\.\d+)?(\.\d+)?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// pvVolumeID is the EBS volume a PV names, as upstream's GetVolumeID reads it.
func pvVolumeID(pv *corev1.PersistentVolume) string {
	vol := regexp.MustCompile(`vol-[0-9a-zA-Z]+`)
	switch {
	case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == upEBSCSIDriver:
		return vol.FindString(pv.Spec.CSI.VolumeHandle)
	case pv.Spec.AWSElasticBlockStore != nil:
		return vol.FindString(pv.Spec.AWSElasticBlockStore.VolumeID)
	}
	return ""
}

// flatConfig reads spec.tikv.config as tidb-operator's GenericConfig takes it (a TOML string
// or a map, absent allowed) into dotted keys → string values.
func flatConfig(raw json.RawMessage) (map[string]string, error) {
	out := map[string]string{}
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return out, nil
	}
	var tree map[string]any
	switch s[0] {
	case '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, err
		}
		if _, err := toml.Decode(text, &tree); err != nil {
			return nil, fmt.Errorf("TOML: %w", err)
		}
	case '{':
		if err := json.Unmarshal(raw, &tree); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("neither a TOML string nor a map")
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case string:
				out[prefix+k] = v
			}
		}
	}
	walk("", tree)
	return out, nil
}

// keysHolding lists the config keys whose value is path, sorted.
func keysHolding(config map[string]string, path string) []string {
	var keys []string
	for k, v := range config {
		if v == path {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
