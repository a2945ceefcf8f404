package job

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestBuildGuardedRefusesWhatThePolicyRefuses builds real step Jobs through the agent's policy:
// the builder returns no Job for a pod the policy refuses, and says which rules it breaks.
func TestBuildGuardedRefusesWhatThePolicyRefuses(t *testing.T) {
	strict := policy.Default("fedbr:v1", ServiceAccountName)
	lenient, err := policy.New(policy.Config{AgentImage: "fedbr:v1", StepServiceAccount: ServiceAccountName, PrivilegedWarmup: true, HostPath: true})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(step string, mut func(*Spec)) Spec {
		s := Spec{Member: "fed-r1", Namespace: "tidb", Step: step, Image: "fedbr:v1", Pod: PodTemplate{ServiceAccount: ServiceAccountName}}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	privileged := func(s *Spec) { s.Pod.Privileged = true }
	for _, tt := range []struct {
		name  string
		p     *policy.Policy
		s     Spec
		rules []string
	}{
		{"a plain step", strict, spec(StepRestoreVolumes, nil), nil},
		{"a privileged warm-up, not allowed", strict, spec(StepWarmup, privileged), []string{dpv1alpha1.PrivilegedNotAllowedReason}},
		{"a privileged warm-up, allowed", lenient, spec(StepWarmup, privileged), nil},
		{"a privileged step other than a warm-up", lenient, spec(StepRestoreData, privileged), []string{dpv1alpha1.PrivilegedNotAllowedReason}},
		{"a foreign image", strict, spec(StepSnapshot, func(s *Spec) { s.Image = "evil:1" }), []string{dpv1alpha1.ImageNotAllowedReason}},
		{"no service account", strict, spec(StepPause, func(s *Spec) { s.Pod.ServiceAccount = "" }), []string{dpv1alpha1.ServiceAccountNotAllowedReason}},
		{"a hostPath volume", strict, spec(StepClean, func(s *Spec) {
			s.Pod.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), []string{dpv1alpha1.HostPathNotAllowedReason}},
		{"a hostPath volume, allowed", lenient, spec(StepClean, func(s *Spec) {
			s.Pod.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/backup"}}}}
		}), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j, vs := BuildGuarded(tt.s, tt.p.CheckPod)
			if len(tt.rules) == 0 {
				if j == nil || len(vs) != 0 {
					t.Fatalf("refused: %v", vs)
				}
				return
			}
			if j != nil {
				t.Fatalf("built a Job whose pod breaks %v", tt.rules)
			}
			if len(vs) != len(tt.rules) {
				t.Fatalf("violations %v, want rules %v", vs, tt.rules)
			}
			for i, r := range tt.rules {
				if vs[i].Rule != r {
					t.Errorf("violation %d: %s, want %s", i, vs[i], r)
				}
			}
		})
	}
	if j, vs := BuildGuarded[policy.Violation](spec(StepWarmup, privileged), nil); j == nil || vs != nil {
		t.Error("a nil check refuses nothing")
	}
}
