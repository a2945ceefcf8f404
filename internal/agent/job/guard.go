package job

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// BuildGuarded is Build judged by check, which says what it finds wrong with the pod of a
// step's Job (step, in namespace): the Job, or, when check finds anything, no Job and what check
// found. The agent's policy is the check (policy.Policy.CheckPod): the last line behind the
// policy's verdict on the member, so that no pod the policy refuses is ever built into a Job.
func BuildGuarded[V any](s Spec, check func(step, namespace string, pod *corev1.PodSpec) []V) (*batchv1.Job, []V) {
	j := Build(s)
	if check == nil {
		return j, nil
	}
	if found := check(s.Step, j.Namespace, &j.Spec.Template.Spec); len(found) > 0 {
		return nil, found
	}
	return j, nil
}
