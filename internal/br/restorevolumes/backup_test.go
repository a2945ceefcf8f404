package restorevolumes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// withKubernetes gives the lab's backup a kubernetes section as a backup records it: each
// TiKV volume's PV (with what a live object carries: annotations, managed fields, status) and
// claim, a PD volume's PV and claim besides, and the whole TidbCluster.
func withKubernetes(t *testing.T, l *lab) {
	t.Helper()
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	k := &l.rec.Kubernetes
	vols := l.rec.Volumes()
	vols = append(vols, meta.StoreVolume{Volume: meta.Volume{ID: "vol-pd0"}}) // not the backup's: PD's
	for i, v := range vols {
		claim := fmt.Sprintf("tikv-src-tikv-%d", i)
		if v.ID == "vol-pd0" {
			claim = "pd-src-pd-0"
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + v.ID, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com", "pv.kubernetes.io/bound-by-controller": "yes"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}, Labels: map[string]string{"pv-label": "x"}},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "gp3", MountOptions: []string{"nodelalloc"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: v.ID, FSType: "ext4",
					VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1"}}},
				ClaimRef: &corev1.ObjectReference{Namespace: "prod", Name: claim, UID: "claim-uid"}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}
		sc := "gp3"
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "prod", Labels: map[string]string{"app.kubernetes.io/instance": "src"},
				Annotations: map[string]string{"volume.kubernetes.io/selected-node": "node-a"}},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, StorageClassName: &sc,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}},
		}
		k.PVs, k.PVCs = append(k.PVs, raw(pv)), append(k.PVCs, raw(pvc))
	}
	k.TidbCluster = raw(map[string]any{"metadata": map[string]any{"name": "src", "namespace": "prod", "annotations": map[string]string{"a": "b"}},
		"spec": map[string]any{"tikv": map[string]any{"replicas": 2}}})
	d, err := blob.NewDir(t.TempDir()) // a backupmeta is written once: a new backup's storage
	if err != nil {
		t.Fatal(err)
	}
	l.dir, l.store = d, meta.NewStore(d, nil)
	if err := l.store.PutBackupMeta(testContext(t), l.rec); err != nil {
		t.Fatal(err)
	}
}

// TestBackupReport: the report keeps what the agent checks and rebuilds from — the stores, their
// volumes, the resolved ts, the TiKV volumes' PVs and claims with what a rebuild reads, the
// TidbCluster's name, a PV's provisioned-by — and drops the rest: another component's PV and
// claim, other annotations, managed fields, status, CSI attributes, the TidbCluster's spec.
func TestBackupReport(t *testing.T) {
	l := newLab(t, awsdouble.Options{})
	withKubernetes(t, l)
	sub, err := restorevolumes.BackupReport(l.rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.ValidateBackup(); err != nil {
		t.Fatalf("the report is no valid backupmeta: %v", err)
	}
	if len(sub.TiKV.Stores) != 2 || len(sub.Volumes()) != 4 || sub.ClusterInfo.ResolvedTS != resolvedTS || sub.TiKV.Stores[0].InstanceID != "" {
		t.Errorf("stores %+v, cluster info %+v", sub.TiKV.Stores, sub.ClusterInfo)
	}
	k := sub.Kubernetes
	if len(k.PVs) != 4 || len(k.PVCs) != 4 {
		t.Fatalf("%d PVs, %d PVCs, want the 4 TiKV volumes'", len(k.PVs), len(k.PVCs))
	}
	all := string(mustJSON(t, k))
	for _, gone := range []string{"pd-src-pd-0", "vol-pd0", "bound-by-controller", "managedFields", "Bound", "csiProvisionerIdentity", "selected-node", "replicas", "claim-uid", "pv-label"} {
		if strings.Contains(all, gone) {
			t.Errorf("the report keeps %q: %s", gone, all)
		}
	}
	pv, pvc := &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}
	if json.Unmarshal(k.PVs[0], pv) != nil || json.Unmarshal(k.PVCs[0], pvc) != nil {
		t.Fatal("the report's PV or PVC does not read")
	}
	if pv.Spec.CSI.VolumeHandle != l.rec.Volumes()[0].ID || pv.Spec.CSI.FSType != "ext4" || pv.Spec.StorageClassName != "gp3" || pv.Spec.MountOptions[0] != "nodelalloc" ||
		pv.Spec.ClaimRef.Name != "tikv-src-tikv-0" || pv.Spec.Capacity.Storage().String() != "20Gi" ||
		len(pv.Annotations) != 1 || pv.Annotations[restorevolumes.AnnProvisionedBy] != "ebs.csi.aws.com" {
		t.Errorf("PV %+v %+v", pv.ObjectMeta, pv.Spec)
	}
	if pvc.Name != "tikv-src-tikv-0" || pvc.Labels["app.kubernetes.io/instance"] != "src" || pvc.Spec.VolumeName != pv.Name || *pvc.Spec.StorageClassName != "gp3" {
		t.Errorf("PVC %+v", pvc)
	}
	if string(k.TidbCluster) != `{"metadata":{"name":"src"}}` {
		t.Errorf("TidbCluster %s", k.TidbCluster)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNothingBeforeTheCheck: with a Check, the step reports the backup (AwaitingCheck) and
// waits; a refused check ends it with the refusal before PD is touched or any volume exists.
// A check that lets it go on restores as before, and every later status still carries the
// backup, up to Completed.
func TestNothingBeforeTheCheck(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	withKubernetes(t, l)
	before := l.volumeCount()
	pd := &fakePD{}
	var statuses []restorevolumes.Status
	var atCheck int
	refusal := errors.New("the agent refused the target: ClaimConflict: PersistentVolumeClaim dst/tikv-restored-tikv-0")
	o := restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2c",
		Report: func(s restorevolumes.Status) { statuses = append(statuses, s) },
		Check: func(context.Context) error {
			atCheck = len(statuses)
			return refusal
		}}
	_, err := restorevolumes.Run(ctx, l.p, pd, l.store, o)
	if !errors.Is(err, refusal) {
		t.Fatalf("Run = %v, want the refusal", err)
	}
	if atCheck == 0 || statuses[atCheck-1].Phase != restorevolumes.PhaseAwaitingCheck || statuses[atCheck-1].Backup == nil ||
		len(statuses[atCheck-1].Backup.Volumes()) != 4 || len(statuses[atCheck-1].Backup.Kubernetes.PVCs) != 4 {
		t.Fatalf("statuses before the check %+v", statuses[:atCheck])
	}
	if n := l.volumeCount(); n != before || len(pd.calls) != 0 {
		t.Fatalf("a refused check left %d volumes (had %d) and PD calls %v", n, before, pd.calls)
	}
	if _, err := l.store.RestoreMeta(ctx, "r1"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("restoremeta after a refused check: %v", err)
	}

	statuses = nil
	o.Check = func(context.Context) error {
		if n := l.volumeCount(); n != before || len(pd.calls) != 0 {
			t.Errorf("at the check: %d volumes (had %d), PD calls %v", n, before, pd.calls)
		}
		return nil
	}
	res, err := restorevolumes.Run(ctx, l.p, pd, l.store, o)
	if err != nil {
		t.Fatal(err)
	}
	last := statuses[len(statuses)-1]
	if len(res.Volumes) != 4 || last.Phase != restorevolumes.PhaseCompleted || last.Backup == nil || len(last.Backup.Volumes()) != 4 {
		t.Errorf("result %+v, last status %+v", res, last)
	}
}

// TestBackupReportKeepsTiKVEncryption: of the backed-up TidbCluster's spec the report keeps
// only TiKV's encryption at rest, which the agent checks the target against, in the map form
// whatever form the backup's config had; other settings (the KMS region, storage, TiFlash)
// are dropped. A config that cannot be read fails the report: the check could not be made.
func TestBackupReportKeepsTiKVEncryption(t *testing.T) {
	tc := func(config string) *meta.Record {
		return &meta.Record{Kubernetes: meta.Kubernetes{TidbCluster: json.RawMessage(`{"metadata":{"name":"src","namespace":"prod"},` +
			`"spec":{"tiflash":{"replicas":1},"tikv":{"replicas":2,"config":` + config + `}}}`)}}
	}
	const toml = `"[storage]\nreserve-space = \"0MB\"\n[security.encryption]\ndata-encryption-method = \"aes256-ctr\"\n` +
		`[security.encryption.master-key]\ntype = \"kms\"\nkey-id = \"key-a\"\nregion = \"us-west-2\"\n"`
	want := `{"metadata":{"name":"src"},"spec":{"tikv":{"config":{"security":{"encryption":{"data-encryption-method":"aes256-ctr","master-key":{"key-id":"key-a","type":"kms"}}}}}}}`
	for _, config := range []string{toml, `{"storage":{"reserve-space":"0MB"},"security":{"encryption":{"data-encryption-method":"AES256-CTR","master-key":{"type":"kms","key-id":"key-a","region":"us-west-2"}}}}`} {
		sub, err := restorevolumes.BackupReport(tc(config))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(sub.Kubernetes.TidbCluster); got != want {
			t.Errorf("config %s: the report's TidbCluster %s, want %s", config, got, want)
		}
	}
	sub, err := restorevolumes.BackupReport(tc(`"[storage]\nreserve-space = \"0MB\"\n"`))
	if err != nil || string(sub.Kubernetes.TidbCluster) != `{"metadata":{"name":"src"}}` {
		t.Errorf("no encryption: %s, %v; want the name only", sub.Kubernetes.TidbCluster, err)
	}
	if _, err := restorevolumes.BackupReport(tc(`"[security.encryption"`)); err == nil || !strings.Contains(err.Error(), "spec.tikv.config") {
		t.Errorf("an unreadable config: %v, want an error naming spec.tikv.config", err)
	}
}
