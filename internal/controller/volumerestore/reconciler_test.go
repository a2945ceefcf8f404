package volumerestore

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestNewMemberCarriesTheRestoresMetadata: the member created in every plane carries the
// VolumeRestore's labels and annotations (the agent carries them on to the pods), not fedbr's
// own controls or kubectl's manifest, and the owner labels are the manager's whatever the
// VolumeRestore says.
func TestNewMemberCarriesTheRestoresMetadata(t *testing.T) {
	vr := restore()
	vr.UID = "vr-uid"
	vr.Labels = map[string]string{"team": "db", dpv1alpha1.LabelOwnerUID: "forged"}
	vr.Annotations = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/restore", "sidecar.istio.io/inject": "false",
		fedv1alpha1.AnnotationForceRemove: "true", corev1.LastAppliedConfigAnnotation: "{}"}
	for _, c := range vr.Spec.Clusters {
		m := newMember(vr, Action{Kind: CreateMember, Cluster: c.K8sClusterName, Phase: dpv1alpha1.RestoreMemberRestoreVolume}, t0)
		wantLabels := map[string]string{"team": "db", dpv1alpha1.LabelOwnerUID: "vr-uid", dpv1alpha1.LabelOwnerName: "r1",
			dpv1alpha1.LabelOwnerNamespace: "default"}
		if !maps.Equal(m.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", c.K8sClusterName, m.Labels, wantLabels)
		}
		wantAnnotations := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/restore", "sidecar.istio.io/inject": "false",
			dpv1alpha1.AnnotationPhaseSince: "2026-11-29T12:00:00Z"}
		if !maps.Equal(m.Annotations, wantAnnotations) {
			t.Errorf("%s: annotations %v, want %v", c.K8sClusterName, m.Annotations, wantAnnotations)
		}
		if m.Name != "fed-r1" || m.Namespace != c.TCNamespace || m.Spec.K8sClusterName != c.K8sClusterName {
			t.Errorf("member %s/%s for %s", m.Namespace, m.Name, m.Spec.K8sClusterName)
		}
	}
}
