package backupmember

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/br/size"
)

// sizeLevel is the `fedbr br size --level` computing what calcSizeLevel asks for, and whether
// the full and the incremental size are wanted. The engine has no incremental-only level: the
// full size comes with it almost free (fullSnapshotSizeInBytes), so "incremental" runs "all"
// and reports only the incremental size.
func sizeLevel(l fedv1alpha1.CalcSizeLevel) (level size.Level, full, incremental bool) {
	switch l {
	case fedv1alpha1.CalcSizeFull:
		return size.Full, true, false
	case fedv1alpha1.CalcSizeIncremental:
		return size.All, false, true
	case fedv1alpha1.CalcSizeNone:
		return "", false, false
	}
	return size.All, true, true
}

// planSize computes the snapshots' sizes once the member is Complete, with `fedbr br size`
// (a Failed member reports what its snapshot step measured instead: sizeFailedMember),
// off the backup's critical path: the backup is Complete (and the pause long lifted) before
// the size Job starts, and a failed sizing leaves the backup Complete with Sized=False. The
// volumes' capacity is never reported as the backup's size.
func (p *plan) planSize() {
	if p.isTrue(dpv1alpha1.BackupMemberFailedCondition) {
		p.sizeFailedMember()
		return
	}
	// The size step waits for a Complete the stored status holds: the pass that completes the
	// member writes Complete without waiting for a Job to be created (the manager completes
	// the backup on it), and its own write starts the next pass, which starts the size step.
	if !condition.IsTrue(p.m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition) {
		return
	}
	if c := findCondition(p.res.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition); c != nil && c.Reason != dpv1alpha1.BackupMemberSizingReason {
		return // decided once: sized, failed or not wanted
	}
	level, full, incremental := sizeLevel(p.m.Spec.Template.EffectiveCalcSizeLevel())
	if level == "" {
		p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizeNotWantedReason,
			"calcSizeLevel none: sizes are not computed", time.Time{})
		return
	}
	zj := p.o.Size
	st, reported := p.o.Report.Step(job.StepSize)
	var sum size.Summary
	hasResult, err := p.o.Report.Result(job.StepSize, &sum)
	switch {
	case err != nil:
		p.sizeFailed(err.Error())
		return
	case hasResult:
		s := &p.res.Status
		if full {
			s.BackupSize = sum.FullBytes
		}
		if incremental {
			s.IncrementalBackupSize = sum.IncrementalBytes
		}
		p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSizedReason,
			sizeMessage(sum, full, incremental), time.Time{})
		return
	case reported && st.Phase == job.PhaseFailed:
		p.sizeFailed(st.Error)
		return
	case zj.Phase == job.Failed:
		p.sizeFailed(zj.FailureText())
		return
	case zj.Phase == job.Succeeded:
		p.sizeFailed(fmt.Sprintf("Job %s succeeded without reporting its result in the member's status.steps (%s)", zj.Name, job.StepSize))
		return
	case zj.Exists():
		p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizingReason,
			fmt.Sprintf("computing the %s of %d snapshots", sizesWanted(full, incremental), p.res.Status.SnapshotsTotal), time.Time{})
		return
	}
	storage, err := storageOf(&p.m.Spec.Template)
	if err != nil {
		p.sizeFailed("storage: " + err.Error())
		return
	}
	args := []string{"br", job.StepSize, "--storage", storage.Flag, "--level", string(level),
		"--member", p.m.Name}
	spec := p.jobSpec(job.StepSize, append(append(args, p.o.Env.CloudArgs()...), p.o.Env.LogArgs()...))
	withStorage(&spec, storage)
	if !p.createJob(spec) {
		return
	}
	p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizingReason,
		fmt.Sprintf("computing the %s of %d snapshots", sizesWanted(full, incremental), p.res.Status.SnapshotsTotal), time.Time{})
}

// sizeFailedMember gives a Failed member the full size of what its snapshot step had
// completed before it deleted it (the sized and sizedBytes of its Failed report): Sized=True
// SizedBeforeCleanup, backupSize set, no incremental size, and the Failed condition untouched.
// Nothing is said when the step sized nothing (no snapshot had completed, it was stopped, or
// it never ran) or calcSizeLevel does not ask for the full size.
func (p *plan) sizeFailedMember() {
	st, reported := p.o.Report.Step(job.StepSnapshot)
	if !reported || st.Phase != job.PhaseFailed || st.Sized <= 0 || findCondition(p.res.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition) != nil {
		return
	}
	if _, full, _ := sizeLevel(p.m.Spec.Template.EffectiveCalcSizeLevel()); !full {
		return
	}
	p.res.Status.BackupSize = st.SizedBytes
	p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSizedBeforeCleanupReason,
		fmt.Sprintf("full %s over the %d snapshots that had completed (of %d), measured before the failed snapshot step deleted them",
			size.Readable(st.SizedBytes), st.Sized, p.res.Status.SnapshotsTotal), time.Time{})
}

func sizesWanted(full, incremental bool) string {
	switch {
	case full && incremental:
		return "full and incremental sizes"
	case full:
		return "full size"
	}
	return "incremental size"
}

func (p *plan) sizeFailed(why string) {
	p.set(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizeFailedReason,
		"the sizes could not be computed (the backup itself is complete): "+why, time.Time{})
}

func sizeMessage(sum size.Summary, full, incremental bool) string {
	var what string
	switch {
	case full && incremental:
		what = fmt.Sprintf("full %s, incremental %s", sum.Full, sum.Incremental)
	case full:
		what = "full " + sum.Full
	default:
		what = "incremental " + sum.Incremental
	}
	return fmt.Sprintf("%s over %d snapshots, computed in %.1fs", what, len(sum.Volumes), sum.ElapsedSeconds)
}
