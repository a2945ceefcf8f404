package restoremember

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
)

// LabelRestore carries the restore id (the member's uid) on the PVs and PVCs the agent creates,
// the same identity the restored EBS volumes are tagged with.
const LabelRestore = meta.TagRestore

// AnnotationMember is <namespace>/<name> of the member that created a PV or PVC, so their
// deletion wakes the member's cleanup.
const AnnotationMember = "dataplane.fedbr.io/restore-member"

// Labels tidb-operator puts on TiKV claims that name their pod and store.
const (
	labelPodName = "tidb.pingcap.com/pod-name"
	labelStoreID = "tidb.pingcap.com/store-id"
)

// ErrRebuild marks restored volumes the agent cannot turn into TiKV claims.
var ErrRebuild = errors.New("rebuild TiKV volumes")

// Target is where the restored volumes go.
type Target struct {
	// TCName and Namespace are the restored TidbCluster's.
	TCName, Namespace string
	// AZ overrides every volume's zone (the member's azName); empty keeps the restored one.
	AZ string
	// RestoreID is the member's uid; Member its name and MemberNamespace its namespace.
	RestoreID, Member, MemberNamespace string
}

// Claim is one PV and the PVC bound to it.
type Claim struct {
	PV  *corev1.PersistentVolume
	PVC *corev1.PersistentVolumeClaim
	// Ordinal is the TiKV member that mounts it; Type the volume's TiKV config key
	// (meta.DataDirType for the main data volume), which decides how warm-up reads it.
	Ordinal int
	Type    string
}

// Rebuild turns a restoremeta into the PVs and PVCs the target TidbCluster's TiKV pods mount:
// every backed-up TiKV claim is recreated for the target, renamed for the target TidbCluster
// (<prefix>-<tc>-tikv-<ordinal> in its namespace, ordinals renumbered 0..n-1 in the order of the
// old ones), bound to a PV on the restored volume with the target zone's node affinity. PV
// names carry the restore id, so a claim of the same name in another namespace never collides.
func Rebuild(rec *meta.Record, t Target) ([]Claim, error) {
	list, err := backedUpClaims(rec, true)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: the restoremeta records no restored volume", ErrRebuild)
	}
	out := make([]Claim, 0, len(list))
	for _, b := range list {
		out = append(out, buildClaim(t, b.vol, b.pv, b.pvc, b.claimName(t.TCName), b.ordinal))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PVC.Name < out[j].PVC.Name })
	return out, nil
}

// ClaimNames are the TiKV claims a restore of the backup rec creates for TidbCluster tcName,
// sorted: known from the backupmeta, before any volume exists, they are the same Rebuild
// creates from the restoremeta.
func ClaimNames(rec *meta.Record, tcName string) ([]string, error) {
	list, err := backedUpClaims(rec, false)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: the backup records no TiKV volume", ErrRebuild)
	}
	names := make([]string, 0, len(list))
	for _, b := range list {
		names = append(names, b.claimName(tcName))
	}
	sort.Strings(names)
	return names, nil
}

// backedUp is one backed-up TiKV volume with its claim: the pod volume it was (prefix: tikv,
// tikv-<storage volume>), the TiKV member that mounted it (oldOrdinal) and the member it
// belongs to after renumbering (ordinal).
type backedUp struct {
	vol                 meta.StoreVolume
	pv                  *corev1.PersistentVolume
	pvc                 *corev1.PersistentVolumeClaim
	prefix              string
	oldOrdinal, ordinal int
}

// claimName is the claim's name for TidbCluster tc.
func (b backedUp) claimName(tc string) string {
	return fmt.Sprintf("%s-%s-tikv-%d", b.prefix, tc, b.ordinal)
}

// backedUpClaims finds the claim of every volume of rec (restoredOnly: of every volume that
// was restored) in the backup's kubernetes section. Every byte of it comes from the storage:
// a volume without its PV or claim, or a claim not named as tidb-operator names TiKV claims, is
// an error, never guessed.
func backedUpClaims(rec *meta.Record, restoredOnly bool) ([]backedUp, error) {
	oldPVs, oldPVCs, oldTC, err := oldObjects(rec)
	if err != nil {
		return nil, err
	}
	pvByVolume := map[string]*corev1.PersistentVolume{}
	for _, pv := range oldPVs {
		if id, err := tidbcluster.EBSVolumeID(pv); err == nil {
			pvByVolume[id] = pv
		}
	}
	pvcByVolumeName := map[string]*corev1.PersistentVolumeClaim{}
	for _, pvc := range oldPVCs {
		pvcByVolumeName[pvc.Spec.VolumeName] = pvc
	}
	var list []backedUp
	ordinals := map[int]bool{}
	for _, v := range rec.Volumes() {
		if restoredOnly && v.RestoreVolumeID == "" {
			continue
		}
		pv := pvByVolume[v.ID]
		if pv == nil {
			return nil, fmt.Errorf("%w: backed-up volume %s (store %d) has no PV in the backup's kubernetes section", ErrRebuild, v.ID, v.StoreID)
		}
		pvc := pvcByVolumeName[pv.Name]
		if pvc == nil && pv.Spec.ClaimRef != nil {
			for _, c := range oldPVCs {
				if c.Name == pv.Spec.ClaimRef.Name {
					pvc = c
				}
			}
		}
		if pvc == nil {
			return nil, fmt.Errorf("%w: PV %s of volume %s has no PVC in the backup's kubernetes section", ErrRebuild, pv.Name, v.ID)
		}
		prefix, ord, err := splitClaimName(pvc.Name, oldTC)
		if err != nil {
			return nil, err
		}
		ordinals[ord] = true
		list = append(list, backedUp{vol: v, pv: pv, pvc: pvc, prefix: prefix, oldOrdinal: ord})
	}
	renumber := renumbering(ordinals)
	for i := range list {
		list[i].ordinal = renumber[list[i].oldOrdinal]
	}
	return list, nil
}

// Ordinals is the number of TiKV members the rebuilt claims serve.
func Ordinals(claims []Claim) int {
	seen := map[string]bool{}
	for _, c := range claims {
		seen[c.PVC.Labels[labelPodName]] = true
	}
	return len(seen)
}

func oldObjects(rec *meta.Record) ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim, string, error) {
	k := rec.Kubernetes
	if len(k.PVs) == 0 || len(k.PVCs) == 0 {
		return nil, nil, "", fmt.Errorf("%w: the backup records no PVs/PVCs (kubernetes section); it was not taken by a Kubernetes-aware agent", ErrRebuild)
	}
	var pvs []*corev1.PersistentVolume
	for i, raw := range k.PVs {
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(raw, pv); err != nil {
			return nil, nil, "", fmt.Errorf("%w: kubernetes.pvs[%d]: %w", ErrRebuild, i, err)
		}
		pvs = append(pvs, pv)
	}
	var pvcs []*corev1.PersistentVolumeClaim
	for i, raw := range k.PVCs {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(raw, pvc); err != nil {
			return nil, nil, "", fmt.Errorf("%w: kubernetes.pvcs[%d]: %w", ErrRebuild, i, err)
		}
		pvcs = append(pvcs, pvc)
	}
	var tc struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if len(k.TidbCluster) > 0 && string(k.TidbCluster) != "null" {
		if err := json.Unmarshal(k.TidbCluster, &tc); err != nil {
			return nil, nil, "", fmt.Errorf("%w: kubernetes.crd_tidb_cluster: %w", ErrRebuild, err)
		}
	}
	name := tc.Metadata.Name
	if name == "" && len(pvcs) > 0 {
		name = pvcs[0].Labels[tidbcluster.LabelInstance]
	}
	if name == "" {
		return nil, nil, "", fmt.Errorf("%w: the backup names no TidbCluster (kubernetes.crd_tidb_cluster)", ErrRebuild)
	}
	return pvs, pvcs, name, nil
}

// splitClaimName splits <prefix>-<tc>-tikv-<ordinal>.
func splitClaimName(name, tc string) (string, int, error) {
	marker := "-" + tc + "-tikv-"
	i := strings.LastIndex(name, marker)
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: claim %s is not named <volume>-%s-tikv-<ordinal> as tidb-operator names TiKV claims", ErrRebuild, name, tc)
	}
	ord, err := strconv.Atoi(name[i+len(marker):])
	if err != nil || ord < 0 {
		return "", 0, fmt.Errorf("%w: claim %s has no ordinal", ErrRebuild, name)
	}
	return name[:i], ord, nil
}

// renumbering maps old ordinals to 0..n-1 in their order.
func renumbering(ordinals map[int]bool) map[int]int {
	old := make([]int, 0, len(ordinals))
	for o := range ordinals {
		old = append(old, o)
	}
	sort.Ints(old)
	m := map[int]int{}
	for i, o := range old {
		m[o] = i
	}
	return m
}

// PVName is the PV of a restored claim: unique per restore, so equal claim names in two
// namespaces (or two restores of one backup) never share a PV.
func PVName(restoreID, namespace, claim string) string {
	return shortName("fedbr-"+restoreID+"-"+namespace+"-"+claim, 253)
}

func shortName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return job.LabelValue(s[:n]) // hashes the tail, keeps it a valid name
}

// annProvisionedBy names the provisioner of a dynamically provisioned PV.
const annProvisionedBy = restorevolumes.AnnProvisionedBy

// inTreeEBS is the in-tree EBS plugin's name, which provisioned-by carries on PVs made before
// CSI migration.
const inTreeEBS = "kubernetes.io/aws-ebs"

// provisionedByEBS says the backed-up PV was dynamically provisioned for EBS: provisioned-by
// names the EBS CSI driver, or the in-tree plugin it replaced.
//
// The rebuilt PV then carries provisioned-by ebs.csi.aws.com (the driver its CSI source names):
// Kubernetes' PV controller (findDeletablePlugin in pkg/controller/volume/persistentvolume)
// leaves a Released Delete PV whose provisioned-by names no in-tree plugin to the external
// provisioner, while one without the annotation goes Failed ("no deletable volume plugin
// matched") on clusters without HonorPVReclaimPolicy, and its EBS volume stays. The
// external provisioner (kubernetes-csi/external-provisioner, sig-storage-lib-external-provisioner
// controller.go isProvisionerForVolume/shouldDelete) deletes a Released Delete PV's volume
// when provisioned-by names its driver (or, annotation absent, when the PV's CSI driver is
// its own). The in-tree name is not kept: that plugin is gone since Kubernetes 1.27, and a
// kubernetes.io/ name without a plugin fails the deletion. The external provisioner adds its
// own finalizer (external-provisioner.volume.kubernetes.io/finalizer) to a bound Delete PV it
// is responsible for, and the EBS driver's DeleteVolume takes no secrets, so neither the
// finalizer nor the volume.kubernetes.io/provisioner-deletion-secret-* annotations are copied.
// A PV made statically gets none; another provisioner's name is never copied onto an EBS PV.
func provisionedByEBS(pv *corev1.PersistentVolume) bool {
	switch pv.Annotations[annProvisionedBy] {
	case tidbcluster.EBSCSIDriver, inTreeEBS:
		return true
	}
	return false
}

// zoneAffinity pins a restored volume to the nodes of zone az, one term per zone key (terms
// are ORed, so a node with either label matches):
//   - topology.kubernetes.io/zone, first: the EBS CSI driver's controller writes only this key
//     on the PVs it provisions since v1.33.0 (CreateVolume's AccessibleTopology,
//     WellKnownZoneTopologyKey in pkg/driver/controller.go; CHANGELOG v1.33.0), and every node
//     carries it from the kubelet or cloud provider, also nodes whose EBS node plugin has not
//     registered yet;
//   - topology.ebs.csi.aws.com/zone: the key the driver wrote before v1.33.0 and its node
//     plugin still reports beside the well-known one (NodeGetInfo in pkg/driver/node.go
//     reports both since v1.28.0), so a node of an older driver that labels only it matches
//     too.
//
// Both keys carry the same zone on one node (NodeGetInfo takes both from the instance
// metadata), so the union never admits a node of another zone.
func zoneAffinity(az string) *corev1.VolumeNodeAffinity {
	term := func(key string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{az}}}}
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		term(corev1.LabelTopologyZone), term(tidbcluster.EBSZoneLabel),
	}}}
}

func buildClaim(t Target, v meta.StoreVolume, oldPV *corev1.PersistentVolume, oldPVC *corev1.PersistentVolumeClaim, name string, ord int) Claim {
	az := t.AZ
	if az == "" {
		az = v.RestoreAZ
	}
	if az == "" {
		az = v.AZ
	}
	pod := fmt.Sprintf("%s-tikv-%d", t.TCName, ord)
	labels := map[string]string{}
	for k, val := range oldPVC.Labels {
		labels[k] = val
	}
	labels[tidbcluster.LabelInstance] = t.TCName
	labels[labelPodName] = pod
	labels[labelStoreID] = strconv.FormatUint(v.StoreID, 10)
	labels[LabelRestore] = t.RestoreID
	for k, val := range job.Selector(t.Member) {
		labels[k] = val
	}
	pvName := PVName(t.RestoreID, t.Namespace, name)
	annotations := map[string]string{AnnotationMember: t.MemberNamespace + "/" + t.Member}
	pvAnnotations := map[string]string{AnnotationMember: annotations[AnnotationMember]}
	if provisionedByEBS(oldPV) {
		pvAnnotations[annProvisionedBy] = tidbcluster.EBSCSIDriver
	}
	fsType := ""
	switch {
	case oldPV.Spec.CSI != nil:
		fsType = oldPV.Spec.CSI.FSType
	case oldPV.Spec.AWSElasticBlockStore != nil:
		fsType = oldPV.Spec.AWSElasticBlockStore.FSType
	}
	reclaim := oldPV.Spec.PersistentVolumeReclaimPolicy
	if reclaim == "" {
		reclaim = corev1.PersistentVolumeReclaimRetain
	}
	access := oldPV.Spec.AccessModes
	if len(access) == 0 {
		access = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	capacity := oldPV.Spec.Capacity
	if len(capacity) == 0 {
		capacity = oldPVC.Spec.Resources.Requests
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: labels, Annotations: pvAnnotations},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: capacity, AccessModes: access, PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName: oldPV.Spec.StorageClassName, VolumeMode: oldPV.Spec.VolumeMode, MountOptions: oldPV.Spec.MountOptions,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: tidbcluster.EBSCSIDriver, VolumeHandle: v.RestoreVolumeID, FSType: fsType}},
			ClaimRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: t.Namespace, Name: name},
		},
	}
	if az != "" {
		pv.Spec.NodeAffinity = zoneAffinity(az)
	}
	requests := oldPVC.Spec.Resources.Requests
	if len(requests) == 0 {
		requests = capacity
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: access, StorageClassName: oldPVC.Spec.StorageClassName, VolumeMode: oldPVC.Spec.VolumeMode,
			Resources:  corev1.VolumeResourceRequirements{Requests: requests},
			VolumeName: pvName,
		},
	}
	if pvc.Spec.StorageClassName == nil && oldPV.Spec.StorageClassName != "" {
		sc := oldPV.Spec.StorageClassName
		pvc.Spec.StorageClassName = &sc
	}
	return Claim{PV: pv, PVC: pvc, Ordinal: ord, Type: v.Type}
}
