package podsecurity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
)

// TestCheck: a pod with no security settings passes baseline and fails restricted for each
// missing setting; one with them passes; a privileged one fails both.
func TestCheck(t *testing.T) {
	bare := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}
	hardened := *bare.DeepCopy()
	hardened.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	hardened.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	privileged := *hardened.DeepCopy()
	privileged.Containers[0].SecurityContext.Privileged = ptr.To(true)
	meta := &metav1.ObjectMeta{Name: "p"}

	if err := Check(Baseline, meta, &bare); err != nil {
		t.Errorf("baseline, bare pod: %v", err)
	}
	err := Check(Restricted, meta, &bare)
	for _, want := range []string{"allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true", "seccompProfile"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("restricted, bare pod: %v, want it to name %q", err, want)
		}
	}
	if err := Check(Restricted, meta, &hardened); err != nil {
		t.Errorf("restricted, hardened pod: %v", err)
	}
	for _, level := range []psaapi.Level{Baseline, Restricted} {
		if err := Check(level, meta, &privileged); err == nil || !strings.Contains(err.Error(), "privileged") {
			t.Errorf("%s, privileged pod: %v, want privileged refused", level, err)
		}
	}
}
