package restoremember

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brverify "github.com/fedbr/fedbr/internal/br/verify"
)

// checkTimeout is a user's check's deadline when its template gives none.
const checkTimeout = time.Hour

// verifyWait is how long the verify step lets its checks take to all pass (its --wait): once the
// data member completed, the other planes' TiKV may still be restarting out of recovery mode,
// and a cluster just out of recovery settles within a few heartbeats.
const verifyWait = "10m"

// verifyDeadline bounds the verify Job: its checks' --wait and a pod start. The restore waits
// for its verdict, so a pod that never starts must not hold it for stepTimeout.
const verifyDeadline = 30 * time.Minute

// planVerify checks the restored cluster once the data member is Complete and the template asks
// for verify: the verify step (`fedbr br verify --member`) reads PD, and its outcome becomes
// the member's Checked condition, judged once. A failed check never fails the member: the
// restore is done, and what it restored stays for the SRE to look at.
func (p *plan) planVerify() {
	// The member that ran restore-data (its restoredTS): the manager marks it spec.dataMember
	// early, or, when it planned nothing before every TiKV was up (it was down meanwhile), only
	// moves it to restore-data.
	if !p.m.Spec.Template.Verify || p.res.Status.RestoredTS == "" || findCondition(p.res.Status.Conditions, dpv1alpha1.RestoreMemberCheckedCondition) != nil {
		return
	}
	done, _, msg := p.stepOutcome(job.StepVerify, p.o.Verify, "")
	_, reported := p.o.Report.Step(job.StepVerify)
	switch {
	case msg != "":
		p.unchecked(msg)
		return
	case done && p.o.Verify.Phase != job.Succeeded:
		// A pass counts only with the agent's own Job's success: the report is written with the
		// steps' service account, which others in the namespace may act as, but only the real
		// checks make the step exit 0.
		switch {
		case !p.o.Verify.Exists():
			p.unchecked("the verify step reports a pass, but its Job is gone before its success was seen: check the restored cluster by hand (fedbr br verify)")
		case p.o.Verify.Phase == job.Failed:
			p.unchecked("the verify step reports a pass, but its Job failed: " + p.o.Verify.FailureText())
		}
		return
	case done:
		var r brverify.Result
		if _, err := p.o.Report.Result(job.StepVerify, &r); err != nil || !r.Passed || len(r.Checks) == 0 {
			p.unchecked(fmt.Sprintf("the verify step succeeded, but its result is no passed checks (%v)", err))
			return
		}
		names := make([]string, 0, len(r.Checks))
		for _, c := range r.Checks {
			names = append(names, c.Name)
		}
		passed := fmt.Sprintf("%d stores, %d regions: %s", r.Stores, r.Regions, strings.Join(names, "; "))
		if p.m.Spec.Template.Check == nil {
			p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberChecksPassedReason, passed)
			return
		}
		p.planCheck(passed)
		return
	case p.o.Verify.Exists() || reported:
		return
	case p.o.TC == nil:
		p.unchecked("the checks could not run: " + p.tcMissing())
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.unchecked("the checks could not run: " + err.Error())
		return
	}
	args := []string{"br", job.StepVerify, "--pd", strings.Join(pd, ","), "--wait", verifyWait, "--member", p.m.Name,
		"--commit-ts", p.res.Status.RestoredTS}
	// No cloud or log flags: the step reads PD only, and saves no log (it has no storage).
	spec := p.podJob(job.StepVerify, p.o.Env.ImageOr(p.m.Spec.Template.ToolImage), args, 0, nil, nil, nil)
	spec.ActiveDeadlineSeconds = int64(verifyDeadline / time.Second)
	p.createJob(spec)
}

// planCheck runs the user's check of the restored cluster (the template's check) once the
// built-in checks passed (passed says what they found), and turns its Job's exit into Checked.
// The check is the user's code: it runs in the restored cluster's namespace as the namespace's
// default service account without a token (no Kubernetes identity, never the steps'), under
// Pod Security restricted, with the restored cluster's addresses in its environment.
func (p *plan) planCheck(passed string) {
	c := p.m.Spec.Template.Check
	j := p.o.Check
	switch {
	case j.Phase == job.Succeeded:
		p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberChecksPassedReason,
			passed+"; the user's check "+j.Name+" passed")
		return
	case j.Phase == job.Failed:
		p.unchecked("the built-in checks passed, but the user's check failed: " + j.FailureText())
		return
	case j.Exists():
		return
	case p.o.TC == nil:
		p.unchecked("the user's check could not run: " + p.tcMissing())
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.unchecked("the user's check could not run: " + err.Error())
		return
	}
	timeout := checkTimeout
	if c.Timeout != nil {
		timeout = c.Timeout.Duration
	}
	t := &p.m.Spec.Template
	var envFrom []corev1.EnvFromSource
	if c.EnvFromSecret != "" {
		envFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: c.EnvFromSecret}}}}
	}
	p.createJob(job.Spec{
		Member: p.m.Name, Namespace: p.m.Namespace, Owner: ownerRef(p.m), OwnerKind: Kind, Step: job.StepCheck,
		Image: c.Image, Args: c.Args, ActiveDeadlineSeconds: int64(timeout / time.Second),
		TTLSecondsAfterFinished: p.o.Env.TTLSeconds(),
		Labels:                  p.m.Labels, Annotations: p.m.Annotations, AllowedAnnotations: p.o.Env.PodAnnotations, AllowedLabels: p.o.Env.PodLabels,
		Pod: job.PodTemplate{
			Command: c.Command, EnvFrom: envFrom, ServiceAccount: "default", NoToken: true,
			Env: []corev1.EnvVar{
				{Name: EnvCheckPD, Value: strings.Join(pd, ",")},
				{Name: EnvCheckRestoredTS, Value: p.res.Status.RestoredTS},
				{Name: EnvCheckTCName, Value: p.o.TC.Name},
				{Name: EnvCheckTCNamespace, Value: p.o.TC.Namespace},
			},
			Tolerations: t.Tolerations, PriorityClassName: t.PriorityClassName, ImagePullSecrets: t.ImagePullSecrets,
		},
	})
}

// The environment a user's check gets besides its Secret's.
const (
	// EnvCheckPD is the restored cluster's PD addresses, comma-separated.
	EnvCheckPD = "FEDBR_PD"
	// EnvCheckRestoredTS is the ts the data was restored to.
	EnvCheckRestoredTS = "FEDBR_RESTORED_TS"
	// EnvCheckTCName and EnvCheckTCNamespace are the restored TidbCluster's name and namespace.
	EnvCheckTCName      = "FEDBR_TC_NAME"
	EnvCheckTCNamespace = "FEDBR_TC_NAMESPACE"
)

// unchecked records a verification that failed, or could not run, as Checked False.
func (p *plan) unchecked(msg string) {
	p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason, msg)
}
