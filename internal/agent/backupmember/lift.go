package backupmember

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
)

// liftBackoffLimit is how often the lift Job's pod is retried, with the Job controller's own
// backoff (10 s doubling: about 2.5 minutes in all, past the pause's 2-minute TTL, after which
// a lift only has to confirm that PD holds nothing). A lift Job that failed is not retried: its
// failure is reported (GCResumed=False LiftFailed), and what the pause placed lapses within
// its TTL.
const liftBackoffLimit = 4

// liftNeeded says the pause ended without lifting what it recorded placing in PD: its Job
// failed or is gone, and its report carries an identity but no liftedAt (a pause killed,
// out of memory, or on a lost node).
func (p *plan) liftNeeded() bool {
	st, reported := p.o.Report.Step(job.StepPause)
	pj := p.o.Pause
	return reported && dpv1alpha1.HasPauseIdentity(st) && st.LiftedAt == nil && st.Phase != job.PhaseStopped &&
		(pj.Phase == job.Failed || !pj.Exists()) && !p.isTrue(dpv1alpha1.BackupMemberGCResumedCondition)
}

// planLift starts `fedbr br lift` once (one Job, deterministic name) when the pause ended
// without lifting what it recorded placing in PD, so that GC and PD scheduling run again at
// once rather than at the pause's TTL. The step reads the identity off the member's pause entry.
func (p *plan) planLift() {
	if !p.liftNeeded() || p.o.Lift.Exists() {
		return
	}
	if _, reported := p.o.Report.Step(job.StepLift); reported {
		return // its Job ran and is gone (TTL): its report decided
	}
	if p.o.TC == nil {
		p.liftFailed("cannot start the lift step: " + p.tcMissing())
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.liftFailed("cannot start the lift step: " + err.Error())
		return
	}
	spec := p.jobSpec(job.StepLift, []string{"br", job.StepLift, "--pd", strings.Join(pd, ","), "--member", p.m.Name})
	spec.BackoffLimit = liftBackoffLimit
	p.createJob(spec)
}

// observeLift sets GCResumed=False while the lift of a pause that ended without lifting is
// started or runs, and LiftFailed once its Job failed.
func (p *plan) observeLift(pause, lift dpv1alpha1.StepReport, reported bool) {
	if p.o.Pause.Exists() && !p.o.Pause.Done() {
		return // its failure report is in; its Job ends next
	}
	lj := p.o.Lift
	switch {
	case lj.Phase == job.Failed:
		why := lj.FailureText()
		if reported && lift.Error != "" {
			why = lift.Error
		}
		p.liftFailed(p.unlifted(pause) + "; lifting it failed: " + why)
	case reported && lift.Phase == job.PhaseFailed:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberLiftingReason,
			p.unlifted(pause)+"; a lift attempt failed ("+lift.Error+"), the lift Job tries again", time.Time{})
	default:
		p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberLiftingReason,
			p.unlifted(pause)+"; lifting it", time.Time{})
	}
}

// liftFailed reports a lift that failed for good.
func (p *plan) liftFailed(msg string) {
	p.set(dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberLiftFailedReason,
		msg+"; not retried: what the pause placed in PD lapses within its TTL", time.Time{})
}

// unlifted describes the pause that ended without lifting.
func (p *plan) unlifted(pause dpv1alpha1.StepReport) string {
	what := "the pause ended without lifting what it placed in PD"
	if pause.ServiceSafePoint != "" {
		what += " (service safepoint " + pause.ServiceSafePoint + ", its schedulers and schedule limits)"
	}
	return what
}
