package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func claim(size string, ann map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "ns", UID: "u1", Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("gp3"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func TestNeedsVolume(t *testing.T) {
	mine := map[string]string{AnnSelectedNode: "n1", AnnStorageProvisioner: EBSDriver}
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want bool
	}{
		{"selected for this node", claim("1Gi", mine), true},
		{"beta provisioner annotation", claim("1Gi", map[string]string{AnnSelectedNode: "n1", AnnBetaStorageProvisioner: EBSDriver}), true},
		{"another node", claim("1Gi", map[string]string{AnnSelectedNode: "n2", AnnStorageProvisioner: EBSDriver}), false},
		{"not selected yet", claim("1Gi", map[string]string{AnnStorageProvisioner: EBSDriver}), false},
		{"another provisioner", claim("1Gi", map[string]string{AnnSelectedNode: "n1", AnnStorageProvisioner: "other"}), false},
		{"bound", func() *corev1.PersistentVolumeClaim { c := claim("1Gi", mine); c.Spec.VolumeName = "pv"; return c }(), false},
		{"deleting", func() *corev1.PersistentVolumeClaim {
			c := claim("1Gi", mine)
			c.DeletionTimestamp = &metav1.Time{}
			return c
		}(), false},
	}
	for _, tt := range tests {
		if got := NeedsVolume(tt.pvc, "n1"); got != tt.want {
			t.Errorf("%s: NeedsVolume = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestVolumeSizeGiB(t *testing.T) {
	for size, want := range map[string]int32{"1Gi": 1, "1": 1, "100Mi": 1, "1025Mi": 2, "10Gi": 10, "1G": 1, "2Ti": 2048} {
		if got := VolumeSizeGiB(claim(size, nil)); got != want {
			t.Errorf("VolumeSizeGiB(%s) = %d, want %d", size, got, want)
		}
	}
	noRequest := claim("1Gi", nil)
	noRequest.Spec.Resources.Requests = nil
	if got := VolumeSizeGiB(noRequest); got != 1 {
		t.Errorf("without a request: %d GiB, want 1", got)
	}
}

func TestProvisionedPV(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: EBSDriver,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)}
	got := ProvisionedPV(claim("1500Mi", nil), class, "vol-1", "us-west-2b")
	want := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1", Annotations: map[string]string{AnnProvisionedBy: EBSDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "gp3",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "data-web-0", UID: "u1"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: EBSDriver, VolumeHandle: "vol-1", FSType: "ext4"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2b"}}},
			}}}},
		},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("PV (-want +got):\n%s", diff)
	}
	// Without a reclaim policy the class deletes, as the API server defaults it.
	class.ReclaimPolicy = nil
	if got := ProvisionedPV(claim("1Gi", nil), class, "vol-1", "z").Spec.PersistentVolumeReclaimPolicy; got != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaim policy = %s, want Delete", got)
	}
}
