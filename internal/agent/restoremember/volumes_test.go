package restoremember

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
)

// rebuiltFrom rebuilds record's claims as the agent does: from the backup restore-volumes
// reports (BackupReport strips the PVs to what a rebuild uses) with the restored volume ids
// and AZs of the step's result; edit changes each backed-up PV first.
func rebuiltFrom(t *testing.T, target Target, edit func(*corev1.PersistentVolume)) []Claim {
	t.Helper()
	rec := record(t)
	restored := map[string]meta.Volume{}
	for _, s := range rec.TiKV.Stores {
		for _, v := range s.Volumes {
			restored[v.ID] = v
		}
	}
	for i, raw := range rec.Kubernetes.PVs {
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(raw, pv); err != nil {
			t.Fatal(err)
		}
		edit(pv)
		b, err := json.Marshal(pv)
		if err != nil {
			t.Fatal(err)
		}
		rec.Kubernetes.PVs[i] = b
	}
	sub, err := restorevolumes.BackupReport(rec)
	if err != nil {
		t.Fatal(err)
	}
	for si := range sub.TiKV.Stores {
		for vi := range sub.TiKV.Stores[si].Volumes {
			v := &sub.TiKV.Stores[si].Volumes[vi]
			v.RestoreVolumeID, v.RestoreAZ = restored[v.ID].RestoreVolumeID, restored[v.ID].RestoreAZ
		}
	}
	claims, err := Rebuild(sub, target)
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// TestRebuildPVAsTheCSIDriverMakesIt: a rebuilt PV is one the EBS CSI driver and Kubernetes
// treat as they treat the PV it replaces: the reclaim policy and the provisioner stay (a
// Delete PV whose provisioned-by is gone is one the PV controller cannot delete on clusters
// without HonorPVReclaimPolicy), and its node affinity is met by a node that carries only the
// well-known zone label, by one that carries only the driver's old key, and by no node in
// another zone. The affinity is evaluated as the scheduler's volume binding does.
func TestRebuildPVAsTheCSIDriverMakesIt(t *testing.T) {
	const (
		wellKnown = corev1.LabelTopologyZone
		oldKey    = "topology.ebs.csi.aws.com/zone"
	)
	target := Target{TCName: "basic", Namespace: "ns", AZ: "us-west-2b", RestoreID: "r1", Member: "fed-r", MemberNamespace: "ns"}
	for _, tt := range []struct {
		name          string
		edit          func(*corev1.PersistentVolume)
		reclaim       corev1.PersistentVolumeReclaimPolicy
		provisionedBy string // "" means no annotation
	}{
		{
			name: "Delete, provisioned by the CSI driver: both stay",
			edit: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				pv.Annotations = map[string]string{annProvisionedBy: tidbcluster.EBSCSIDriver, "pv.kubernetes.io/bound-by-controller": "yes"}
			},
			reclaim: corev1.PersistentVolumeReclaimDelete, provisionedBy: tidbcluster.EBSCSIDriver,
		},
		{
			name: "Retain, provisioned by the CSI driver: both stay",
			edit: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
				pv.Annotations = map[string]string{annProvisionedBy: tidbcluster.EBSCSIDriver}
			},
			reclaim: corev1.PersistentVolumeReclaimRetain, provisionedBy: tidbcluster.EBSCSIDriver,
		},
		{
			name: "Delete, provisioned in-tree (kubernetes.io/aws-ebs): the CSI driver now serves the volume",
			edit: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				pv.Annotations = map[string]string{annProvisionedBy: "kubernetes.io/aws-ebs"}
			},
			reclaim: corev1.PersistentVolumeReclaimDelete, provisionedBy: tidbcluster.EBSCSIDriver,
		},
		{
			name: "statically made (no provisioned-by): none is invented",
			edit: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
				pv.Annotations = nil
			},
			reclaim: corev1.PersistentVolumeReclaimRetain,
		},
		{
			name: "another provisioner's name is not copied onto an EBS CSI PV",
			edit: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				pv.Annotations = map[string]string{annProvisionedBy: "example.com/other"}
			},
			reclaim: corev1.PersistentVolumeReclaimDelete,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range rebuiltFrom(t, target, tt.edit) {
				pv := c.PV
				if got := pv.Spec.PersistentVolumeReclaimPolicy; got != tt.reclaim {
					t.Errorf("PV %s: reclaim policy %s, want %s", pv.Name, got, tt.reclaim)
				}
				got, has := pv.Annotations[annProvisionedBy]
				if got != tt.provisionedBy || has != (tt.provisionedBy != "") {
					t.Errorf("PV %s: %s=%q (set %v), want %q", pv.Name, annProvisionedBy, got, has, tt.provisionedBy)
				}
				if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
					t.Fatalf("PV %s has no required node affinity", pv.Name)
				}
				for _, n := range []struct {
					labels map[string]string
					match  bool
				}{
					{map[string]string{wellKnown: "us-west-2b"}, true},
					{map[string]string{oldKey: "us-west-2b"}, true},
					{map[string]string{wellKnown: "us-west-2b", oldKey: "us-west-2b"}, true},
					{map[string]string{wellKnown: "us-west-2a", oldKey: "us-west-2a"}, false},
					{map[string]string{"kubernetes.io/hostname": "n1"}, false},
				} {
					err := volumehelpers.CheckNodeAffinity(pv, n.labels)
					if (err == nil) != n.match {
						t.Errorf("PV %s on a node labelled %v: match %v (%v), want %v", pv.Name, n.labels, err == nil, err, n.match)
					}
				}
			}
		})
	}
}
