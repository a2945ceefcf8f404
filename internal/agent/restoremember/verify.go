package restoremember

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brverify "github.com/fedbr/fedbr/internal/br/verify"
)

// verifyWait is how long the verify step lets its checks take to all pass (its --wait): once the
// data member completed, the other planes' TiKV may still be restarting out of recovery mode,
// and a cluster just out of recovery settles within a few heartbeats.
const verifyWait = "10m"

// planVerify checks the restored cluster once the data member is Complete and the template asks
// for verify: the verify step (`fedbr br verify --member`) reads PD, and its outcome becomes
// the member's Checked condition, judged once. A failed check never fails the member: the
// restore is done, and what it restored stays for the SRE to look at.
func (p *plan) planVerify() {
	if !p.m.Spec.Template.Verify || !p.m.Spec.DataMember || findCondition(p.res.Status.Conditions, dpv1alpha1.RestoreMemberCheckedCondition) != nil {
		return
	}
	done, _, msg := p.stepOutcome(job.StepVerify, p.o.Verify)
	_, reported := p.o.Report.Step(job.StepVerify)
	switch {
	case msg != "":
		p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason, msg)
		return
	case done:
		var r brverify.Result
		if _, err := p.o.Report.Result(job.StepVerify, &r); err != nil || !r.Passed || len(r.Checks) == 0 {
			p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason,
				fmt.Sprintf("the verify step succeeded, but its result is no passed checks (%v)", err))
			return
		}
		names := make([]string, 0, len(r.Checks))
		for _, c := range r.Checks {
			names = append(names, c.Name)
		}
		p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberChecksPassedReason,
			fmt.Sprintf("%d stores, %d regions: %s", r.Stores, r.Regions, strings.Join(names, "; ")))
		return
	case p.o.Verify.Exists() || reported:
		return
	case p.o.TC == nil:
		p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason,
			"the checks could not run: "+p.tcMissing())
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.set(dpv1alpha1.RestoreMemberCheckedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberVerificationFailedReason,
			"the checks could not run: "+err.Error())
		return
	}
	args := []string{"br", job.StepVerify, "--pd", strings.Join(pd, ","), "--wait", verifyWait, "--member", p.m.Name}
	if p.res.Status.RestoredTS != "" {
		args = append(args, "--commit-ts", p.res.Status.RestoredTS)
	}
	// No cloud or log flags: the step reads PD only, and saves no log (it has no storage).
	p.createJob(p.podJob(job.StepVerify, p.o.Env.ImageOr(p.m.Spec.Template.ToolImage), args, 0, nil, nil, nil))
}
