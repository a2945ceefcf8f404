package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// CheckPod returns every rule the pod of a step's Job (step, in namespace) breaks: the last
// line behind Check, judging what the agent is about to create rather than what the member
// asked for. It checks the pod's shape — host namespaces, service account, hostPath volumes,
// and per container the image, privilege, added capabilities and mounts over identity tokens —
// and not its environment, where the agent itself puts credentials (a storage's S3 keys).
// Privilege and capabilities are allowed to warm-up pods only, and only with
// --allow-privileged-warmup. A nil Policy finds nothing (the planners' own tests).
func (p *Policy) CheckPod(step, namespace string, pod *corev1.PodSpec) []Violation {
	if p == nil {
		return nil
	}
	var vs []Violation
	for _, h := range []struct {
		field string
		on    bool
	}{{"spec.hostNetwork", pod.HostNetwork}, {"spec.hostPID", pod.HostPID}, {"spec.hostIPC", pod.HostIPC}} {
		if h.on {
			vs = append(vs, Violation{Rule: dpv1alpha1.HostNamespaceNotAllowedReason, Field: h.field, Value: "true",
				Why: "a step pod never shares the node's namespaces; never allowed"})
		}
	}
	sa := pod.ServiceAccountName
	if sa == "" {
		sa = "default" // what Kubernetes runs a pod without one as
	}
	// A pod of the namespace's default service account that mounts no token (a user's check of
	// a restored cluster) has no Kubernetes identity to judge.
	if !p.serviceAccountAllowed(namespace, sa) && (sa != "default" || !tokenless(pod)) {
		vs = append(vs, p.serviceAccountViolation("spec.serviceAccountName", sa))
	}
	for i, v := range pod.Volumes {
		if v.HostPath != nil && !p.c.HostPath {
			vs = append(vs, hostPathViolation(fmt.Sprintf("spec.volumes[%d].hostPath.path", i), v.HostPath.Path))
		}
	}
	privileged := step == dpv1alpha1.StepWarmup && p.c.PrivilegedWarmup
	for _, group := range []struct {
		field      string
		containers []corev1.Container
	}{{"spec.initContainers", pod.InitContainers}, {"spec.containers", pod.Containers}} {
		for i, c := range group.containers {
			vs = append(vs, p.checkContainer(fmt.Sprintf("%s[%d]", group.field, i), c, privileged)...)
		}
	}
	return vs
}

func (p *Policy) checkContainer(field string, c corev1.Container, privileged bool) []Violation {
	var vs []Violation
	if !p.imageAllowed(c.Image) {
		vs = append(vs, p.imageViolation(field+".image", c.Image))
	}
	if sc := c.SecurityContext; sc != nil && !privileged {
		if sc.Privileged != nil && *sc.Privileged {
			vs = append(vs, Violation{Rule: dpv1alpha1.PrivilegedNotAllowedReason, Field: field + ".securityContext.privileged", Value: "true",
				Why: "only a warm-up pod may be privileged, and only with --allow-privileged-warmup"})
		}
		if sc.Capabilities != nil {
			for j, capability := range sc.Capabilities.Add {
				vs = append(vs, Violation{Rule: dpv1alpha1.CapabilitiesNotAllowedReason, Field: fmt.Sprintf("%s.securityContext.capabilities.add[%d]", field, j),
					Value: string(capability), Why: "only a warm-up pod may add capabilities, and only with --allow-privileged-warmup"})
			}
		}
	}
	for j, m := range c.VolumeMounts {
		if identityMount(m.MountPath) {
			vs = append(vs, identityMountViolation(fmt.Sprintf("%s.volumeMounts[%d].mountPath", field, j), m.MountPath))
		}
	}
	return vs
}

// tokenless says pod mounts no service-account token: automountServiceAccountToken false and no
// projected service-account token of its own.
func tokenless(pod *corev1.PodSpec) bool {
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		return false
	}
	for _, v := range pod.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return false
			}
		}
	}
	return true
}
