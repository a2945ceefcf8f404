package backupmember

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/controller/federation"
)

// userLabels and userAnnotations are what a user put on the VolumeBackup (the labels those the
// agent's --pod-labels, podLabels here, allows); fedbr's own keys, kubectl's bookkeeping, a
// sidecar injector's annotation (not on the agent's default --pod-annotations) and its label
// (not on podLabels) ride along and must stop at the manager or the agent.
var (
	podLabels       = []string{"team", "cost-center"}
	userLabels      = map[string]string{"team": "db", "cost-center": "42"}
	injectorLabels  = map[string]string{"istio.io/rev": "canary"}
	userAnnotations = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/fedbr-br"}
	injectorAnnots  = map[string]string{"sidecar.istio.io/inject": "true", "vault.hashicorp.com/agent-inject": "true"}
	ownedLabels     = map[string]string{job.LabelManagedBy: "helm", job.LabelMember: "fed-other", dpv1alpha1.LabelOwnerUID: "forged"}
	ownedAnnots     = map[string]string{fedv1alpha1.AnnotationForceRemove: "true", corev1.LastAppliedConfigAnnotation: `{"kind":"VolumeBackup"}`}
)

// TestEveryStepPodCarriesTheBackupsMetadata: an annotation and a label on the VolumeBackup reach
// the pod template of every kind of Job a backup member runs (pause, snapshot, size, lift,
// clean), through the manager's member (federation.NewMeta) and the agent's Jobs; fedbr's own
// keys, kubectl's last-applied-configuration and a label or annotation the agent's
// --pod-labels or --pod-annotations does not name do not, and the agent's selector labels are
// its own.
func TestEveryStepPodCarriesTheBackupsMetadata(t *testing.T) {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ops", UID: "vb-uid",
		Labels: union(userLabels, injectorLabels, ownedLabels), Annotations: union(userAnnotations, injectorAnnots, ownedAnnots)}}
	withBackupsMeta := func(m *dpv1alpha1.VolumeBackupMember) {
		meta := federation.NewMeta(b, m.Name, m.Namespace, t0)
		m.Labels, m.Annotations = meta.Labels, meta.Annotations
	}
	for _, j := range jobsOfEveryKind(t, withBackupsMeta) {
		checkPodMeta(t, j.Labels[job.LabelStep], "fed-b1", j.Spec.Template.ObjectMeta)
	}
}

// checkPodMeta checks one pod template's labels and annotations.
func checkPodMeta(t *testing.T, step, member string, pod metav1.ObjectMeta) {
	t.Helper()
	for k, v := range userLabels {
		if pod.Labels[k] != v {
			t.Errorf("%s pod: label %s=%q, want %q", step, k, pod.Labels[k], v)
		}
	}
	for k, v := range userAnnotations {
		if pod.Annotations[k] != v {
			t.Errorf("%s pod: annotation %s=%q, want %q", step, k, pod.Annotations[k], v)
		}
	}
	for k, v := range job.Selector(member) {
		if pod.Labels[k] != v {
			t.Errorf("%s pod: selector label %s=%q, want %q", step, k, pod.Labels[k], v)
		}
	}
	for k := range pod.Labels {
		if dpv1alpha1.OwnedKey(k) && k != job.LabelMember && k != job.LabelStep || injectorLabels[k] != "" {
			t.Errorf("%s pod: fedbr's label %s travelled to the pod", step, k)
		}
	}
	for k := range pod.Annotations {
		if dpv1alpha1.OwnedKey(k) || k == corev1.LastAppliedConfigAnnotation || injectorAnnots[k] != "" {
			t.Errorf("%s pod: annotation %s travelled to the pod", step, k)
		}
	}
}

func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
