package volumebackup

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestNewMemberCarriesTheBackupsMetadata: the member created in every plane carries the
// VolumeBackup's labels and annotations (the agent carries them on to the pods), not fedbr's
// own controls or kubectl's manifest, and the owner labels are the manager's whatever the
// VolumeBackup says.
func TestNewMemberCarriesTheBackupsMetadata(t *testing.T) {
	b := backup()
	b.UID = "vb-uid"
	b.Labels = map[string]string{"team": "db", dpv1alpha1.LabelOwnerUID: "forged", dpv1alpha1.LabelOwnerName: "forged"}
	b.Annotations = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/br", "sidecar.istio.io/inject": "false",
		fedv1alpha1.AnnotationForceRemove: "true", corev1.LastAppliedConfigAnnotation: "{}", dpv1alpha1.AnnotationPhaseSince: "2000-01-01T00:00:00Z"}
	for _, c := range b.Spec.Clusters {
		m := newMember(b, Action{Kind: CreateMember, Cluster: c.K8sClusterName, Phase: dpv1alpha1.BackupMemberExecute}, t0)
		wantLabels := map[string]string{"team": "db", dpv1alpha1.LabelOwnerUID: "vb-uid", dpv1alpha1.LabelOwnerName: "nightly",
			dpv1alpha1.LabelOwnerNamespace: "default"}
		if !maps.Equal(m.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", c.K8sClusterName, m.Labels, wantLabels)
		}
		wantAnnotations := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/br", "sidecar.istio.io/inject": "false",
			dpv1alpha1.AnnotationPhaseSince: "2026-11-29T12:00:00Z"}
		if !maps.Equal(m.Annotations, wantAnnotations) {
			t.Errorf("%s: annotations %v, want %v", c.K8sClusterName, m.Annotations, wantAnnotations)
		}
		if m.Name != "fed-nightly" || m.Namespace != c.TCNamespace || m.Spec.K8sClusterName != c.K8sClusterName {
			t.Errorf("member %s/%s for %s", m.Namespace, m.Name, m.Spec.K8sClusterName)
		}
	}
}
