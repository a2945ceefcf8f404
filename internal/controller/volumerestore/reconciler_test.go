package volumerestore

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/metrics"
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

// TestObserveSteps: a step's time is recorded once, by the write that completed it; a step
// still running, or one an earlier write completed, is not.
func TestObserveSteps(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	count := func(step string) uint64 {
		var m dto.Metric
		if err := metrics.RestoreStepDuration.WithLabelValues(step).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	before := map[string]uint64{"RestoreVolume": count("RestoreVolume"), "StartTiKV": count("StartTiKV")}
	old, vr := restore(), restore()
	old.Status.Steps = []fedv1alpha1.VolumeRestoreStep{{StepName: "RestoreVolume", TimeStarted: at(0)}}
	vr.Status.Steps = []fedv1alpha1.VolumeRestoreStep{{StepName: "RestoreVolume", TimeStarted: at(0), TimeCompleted: at(90 * time.Second)},
		{StepName: "StartTiKV", TimeStarted: at(90 * time.Second)}}
	observeSteps(old, vr)
	observeSteps(vr, vr) // a later write: nothing new completed
	if got := count("RestoreVolume") - before["RestoreVolume"]; got != 1 {
		t.Errorf("RestoreVolume observed %d times, want once", got)
	}
	if got := count("StartTiKV") - before["StartTiKV"]; got != 0 {
		t.Errorf("StartTiKV, still running, observed %d times", got)
	}
}
