package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podState is what the pod's phase and conditions derive from.
type podState struct {
	policy corev1.RestartPolicy
	status corev1.PodStatus
	// stopping: the pod is being deleted, past its deadline, or finished; nothing restarts.
	stopping bool
	// sandbox: the pod's volumes are ready (PodReadyToStartContainers).
	sandbox bool
}

func terminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// phaseOf derives the pod phase from its container states, following the kubelet: a pod is
// terminal only once none of its processes runs.
func phaseOf(in podState) corev1.PodPhase {
	st := in.status
	anyRunning := false
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil {
				anyRunning = true
			}
		}
	}
	if st.Reason == ReasonErrImagePull {
		return corev1.PodFailed
	}
	if st.Reason == ReasonDeadlineExceeded {
		if anyRunning {
			return corev1.PodRunning
		}
		return corev1.PodFailed
	}
	for _, cs := range st.InitContainerStatuses {
		t := cs.State.Terminated
		if t != nil && t.ExitCode == 0 {
			continue
		}
		if !anyRunning && (in.stopping || (t != nil && in.policy == corev1.RestartPolicyNever)) {
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, initial, backoff, failed int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failed++
			}
		case cs.LastTerminationState.Terminated != nil:
			backoff++
		default:
			initial++
		}
	}
	switch {
	case running > 0:
		return corev1.PodRunning
	case in.stopping && (initial > 0 || backoff > 0 || failed > 0):
		return corev1.PodFailed
	case initial > 0:
		return corev1.PodPending
	case backoff > 0:
		return corev1.PodRunning
	case failed > 0:
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}

// conditionsOf computes the pod conditions the kubelet owns and keeps the others (such as
// PodScheduled, written by the scheduler).
func conditionsOf(in podState, now metav1.Time) []corev1.PodCondition {
	st := in.status
	initialized := true
	for _, cs := range st.InitContainerStatuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			initialized = false
		}
	}
	ready := len(st.ContainerStatuses) > 0
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			ready = false
		}
	}
	readyReason := "ContainersNotReady"
	if terminalPhase(st.Phase) {
		ready, readyReason = false, "PodCompleted"
	}
	mine := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, conditionStatus(in.sandbox), ""),
		cond(corev1.PodInitialized, conditionStatus(initialized), "ContainersNotInitialized"),
		cond(corev1.ContainersReady, conditionStatus(ready), readyReason),
		cond(corev1.PodReady, conditionStatus(ready), readyReason),
	}
	var out []corev1.PodCondition
	for _, c := range st.Conditions {
		owned := false
		for _, m := range mine {
			owned = owned || m.Type == c.Type
		}
		if !owned {
			out = append(out, c)
		}
	}
	for _, m := range mine {
		m.LastTransitionTime = now
		for _, old := range st.Conditions {
			if old.Type == m.Type && old.Status == m.Status {
				m.LastTransitionTime = old.LastTransitionTime
			}
		}
		out = append(out, m)
	}
	return out
}

// cond builds a condition; the reason applies only when it is False.
func cond(t corev1.PodConditionType, status corev1.ConditionStatus, reasonFalse string) corev1.PodCondition {
	if status == corev1.ConditionTrue {
		return corev1.PodCondition{Type: t, Status: status}
	}
	return corev1.PodCondition{Type: t, Status: status, Reason: reasonFalse}
}

func conditionStatus(ok bool) corev1.ConditionStatus {
	if ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}
