// Package podsecurity evaluates pod specs against the Kubernetes Pod Security Standards with
// the checks of the Pod Security admission controller itself (k8s.io/pod-security-admission),
// at the latest version of each level: what a namespace labelled
// pod-security.kubernetes.io/enforce=<level> admits. fedbr's tests hold every pod it creates
// (the agent's step Jobs) and ships (the charts' Deployments) to it.
package podsecurity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Levels of the Pod Security Standards.
const (
	Restricted = psaapi.LevelRestricted
	Baseline   = psaapi.LevelBaseline
)

// evaluator runs the admission controller's default checks.
var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("pod security checks: %v", err))
	}
	return e
}()

// Check returns nil when level admits the pod, else an error that lists what it forbids, as
// the admission controller words it (e.g. `privileged (container "br" must not set
// securityContext.privileged=true)`).
func Check(level psaapi.Level, meta *metav1.ObjectMeta, spec *corev1.PodSpec) error {
	lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
	res := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, meta, spec))
	if res.Allowed {
		return nil
	}
	return fmt.Errorf("pod security %q forbids: %s", level, res.ForbiddenDetail())
}
