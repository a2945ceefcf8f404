package backupmember

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/backoff"
	"github.com/fedbr/fedbr/internal/br/clean"
)

// CleanJobName is the name of clean attempt n (1, 2, …): each retry is a new Job, so a failed
// attempt stays visible until its TTL.
func CleanJobName(member string, attempt int) string {
	return job.Name(member, job.StepClean+"-"+strconv.Itoa(attempt))
}

// planDeletion lets go of everything before the finalizer goes: the pause is lifted, a running
// snapshot step is stopped and its pod waited out (no step of the backup can then send another
// CreateSnapshots), a running size step too (nothing of it lands after the clean), and the
// snapshots are cleaned per cleanPolicy — by the one clean step, which
// also waits for what calls the stopped step sent may still make (volumesInFlight).
func (p *plan) planDeletion() {
	// A running pause sees the deletion itself (stopPause: it watches the member).
	if zj := p.o.Size; zj.Exists() && !zj.Done() && !zj.Deleting {
		p.add(Action{Kind: DeleteJob, Name: zj.Name}) // its sizes are moot once the snapshots go
	}
	if p.m.Annotations[ForceRemoveAnnotation] == "true" {
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberForceRemovedReason,
			fmt.Sprintf("annotation %s=true: the finalizer is removed without cleaning; snapshots tagged %s=%s may remain",
				ForceRemoveAnnotation, "fedbr.io/backup", p.m.UID), time.Time{})
		p.res.RemoveFinalizer = true
		return
	}
	if p.isTrue(dpv1alpha1.BackupMemberCleanedCondition) {
		p.res.RemoveFinalizer = true
		return
	}
	if sj := p.o.Snapshot; sj.Exists() && !sj.Done() && !p.snapshotsDone() {
		// The clean must not race a snapshot step that is still creating snapshots; stopping it
		// makes it delete what it started. The deletion is in the foreground (apply.DeleteJob):
		// the Job stays, Deleting, until its pod is gone, so no call is sent after the clean
		// starts.
		if !sj.Deleting {
			p.add(Action{Kind: DeleteJob, Name: sj.Name})
		}
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleaningReason,
			"waiting for the snapshot step to stop before cleaning", time.Time{})
		return
	}
	policy := p.m.Spec.Template.EffectiveCleanPolicy()
	complete := p.snapshotsDone()
	// OnFailure keeps a member's snapshots only when they completed and the backup as a whole
	// did not fail: the manager tells every member of a failed backup (spec.backupFailed), as
	// a member's completed snapshots are no backup without the other planes'.
	switch {
	case policy == fedv1alpha1.CleanPolicyRetain, policy == fedv1alpha1.CleanPolicyOnFailure && complete && !p.m.Spec.BackupFailed:
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberRetainedReason,
			fmt.Sprintf("cleanPolicy %s: snapshots and metadata are kept", policy), time.Time{})
		p.res.RemoveFinalizer = true
		return
	case !p.snapshotEverStarted():
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberNothingToCleanReason,
			"this member never started a snapshot step", time.Time{})
		p.res.RemoveFinalizer = true
		return
	}
	if zj := p.o.Size; zj.Exists() && !zj.Done() {
		// Stopped above: it may still write under the backup's storage as it exits (its saved
		// log, with --save-step-logs), and what lands after the clean would outlive the backup.
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleaningReason,
			"waiting for the size step to stop before cleaning", time.Time{})
		return
	}
	p.planClean(complete)
}

// snapshotEverStarted says a snapshot step may have created snapshots or metadata.
func (p *plan) snapshotEverStarted() bool {
	_, reported := p.o.Report.Step(job.StepSnapshot)
	return reported || p.o.Snapshot.Exists() || p.m.Status.SnapshotsTotal > 0 || p.m.Status.BackupPath != "" ||
		p.isTrue(dpv1alpha1.BackupMemberSnapshotsCreatedCondition) || p.isTrue(dpv1alpha1.BackupMemberCompleteCondition)
}

// volumesInFlight are the volumes handed the snapshot step when it may have sent CreateSnapshots
// calls whose answers it never read: it had its backup ts (only then does it start snapshots)
// and never reported every snapshot started. Its pod is gone by now (planDeletion waits for the
// foreground deletion of its Job), so it sends no more calls, but AWS runs a call whose caller
// is gone and shows what it made some time later; the clean waits for those snapshots (its
// --expect-volumes) so they are deleted with the backup, not left for the orphan sweeper. A
// step that failed settled (every call answered, every snapshot it started deleted; or no
// call sent) leaves nothing to wait for.
func (p *plan) volumesInFlight() []string {
	s, _ := p.o.Report.Step(job.StepSnapshot)
	if p.m.Spec.BackupTS == "" || p.isTrue(dpv1alpha1.BackupMemberSnapshotsCreatedCondition) || dpv1alpha1.SnapshotsStarted(s) ||
		s.Phase == dpv1alpha1.StepPhaseFailed && s.Settled {
		return nil
	}
	return p.m.Status.TiKVVolumes
}

// MaxCleanAttempts is how many clean attempts the member gets: annotation
// MaxCleanAttemptsAnnotation when it holds a positive number, else DefaultMaxCleanAttempts.
func MaxCleanAttempts(m *dpv1alpha1.VolumeBackupMember) int {
	if n, err := strconv.Atoi(m.Annotations[MaxCleanAttemptsAnnotation]); err == nil && n > 0 {
		return n
	}
	return DefaultMaxCleanAttempts
}

// planClean runs `fedbr br clean` until it succeeds, retrying failed attempts with backoff,
// at most MaxCleanAttempts times: a clean that cannot succeed (a permission missing, a
// backupmeta lost) then stops and says why, instead of retrying forever.
func (p *plan) planClean(complete bool) {
	cj := p.o.Clean
	st, reported := p.o.Report.Step(job.StepClean)
	_, hasResult := p.o.Report.Results[job.StepClean]
	// The attempts are counted in the status, since the Jobs go at their TTL.
	attempts := max(int(p.res.Status.CleanAttempts), p.o.CleanAttempt)
	p.res.Status.CleanAttempts = int32(min(max(attempts, 0), math.MaxInt32))
	limit := MaxCleanAttempts(p.m)
	running := cj.Exists() && !cj.Done()
	if attempts >= limit && !running && cj.Phase != job.Succeeded {
		p.giveUpClean(attempts, limit, cj, st, reported)
		return
	}
	switch {
	case cj.Phase == job.Succeeded || cj.Exists() && reported && st.Phase == job.PhaseCompleted && hasResult:
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberCleanedReason,
			"snapshots and metadata deleted", cj.Finished)
		p.res.RemoveFinalizer = true
		return
	case cj.Exists() && !cj.Done():
		msg := fmt.Sprintf("clean attempt %d of %d running", attempts, limit)
		switch {
		case reported && st.Phase == clean.PhaseSettling:
			msg += ": waiting for AWS to show the snapshots of the CreateSnapshots calls the stopped snapshot step may have sent"
		case reported && st.Total > 0:
			msg += fmt.Sprintf(": %d of %d snapshots deleted", st.Deleted, st.Total)
		}
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleaningReason, msg, time.Time{})
		return
	case cj.Phase == job.Failed:
		why := cj.FailureText()
		if reported && st.Error != "" {
			why = st.Error
		}
		wait := backoff.Doubling(cleanBackoffBase, cleanBackoffMax, attempts)
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleanFailedReason,
			fmt.Sprintf("clean attempt %d of %d failed: %s; retrying in %s (annotation %s=true removes the member without cleaning)",
				attempts, limit, why, wait, ForceRemoveAnnotation), time.Time{})
		if left := cj.Finished.Add(wait).Sub(p.now); !cj.Finished.IsZero() && left > 0 {
			p.res.RequeueAfter = left
			return
		}
	}
	storage, err := storageOf(&p.m.Spec.Template)
	if err != nil {
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleanFailedReason,
			"cannot clean: storage: "+err.Error()+fmt.Sprintf(" (annotation %s=true removes the member without cleaning)", ForceRemoveAnnotation), time.Time{})
		return
	}
	outcome := "failed"
	if complete {
		outcome = "completed"
	}
	args := []string{"br", job.StepClean, "--storage", storage.Flag, "--backup-id", string(p.m.UID),
		"--backup-outcome", outcome, "--delete-ratio", strconv.FormatFloat(p.m.Spec.Template.EffectiveSnapshotsDeleteRatio(), 'f', -1, 64),
		"--member", p.m.Name}
	if vols := p.volumesInFlight(); len(vols) > 0 {
		args = append(args, "--expect-volumes", strings.Join(vols, ","))
	}
	args = append(args, job.SourceNamespaceArgs(p.o.Policy.DataNamespaces(p.m.Labels[dpv1alpha1.LabelOwnerNamespace]))...)
	args = append(args, p.o.Env.CloudArgs()...)
	spec := p.jobSpec(job.StepClean, args)
	spec.Name = CleanJobName(p.m.Name, attempts+1) // counted once observed
	// No owner reference: a foreground deletion of the member would otherwise delete the
	// clean Job while it cleans; its TTL removes it once finished.
	spec.Owner = metav1.OwnerReference{}
	withStorage(&spec, storage)
	var reset []Action
	if reported {
		reset = append(reset, Action{Kind: ResetStep, Name: job.StepClean})
	}
	if !p.createJob(spec, reset...) {
		return
	}
	if !cj.Exists() {
		p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleaningReason,
			"deleting snapshots and metadata", time.Time{})
	}
}

// giveUpClean stops retrying a clean that failed limit times. The last attempt's error stays in
// the condition once its Job is gone.
func (p *plan) giveUpClean(attempts, limit int, cj job.State, st dpv1alpha1.StepReport, reported bool) {
	why := ""
	switch {
	case reported && st.Error != "":
		why = st.Error
	case cj.Phase == job.Failed:
		why = cj.FailureText()
	}
	if why == "" {
		if c := findCondition(p.res.Status.Conditions, dpv1alpha1.BackupMemberCleanedCondition); c != nil && c.Reason == dpv1alpha1.BackupMemberCleanGaveUpReason {
			return // the Job with the error is gone; the condition keeps it
		}
		why = "the last attempt's Job is gone"
	}
	p.set(dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleanGaveUpReason,
		fmt.Sprintf("clean failed %d times (the bound is %d), the last: %s; not retried: fix the cause and annotate %s=%d to try again, or %s=true to remove the member without cleaning",
			attempts, limit, why, MaxCleanAttemptsAnnotation, attempts+DefaultMaxCleanAttempts, ForceRemoveAnnotation), time.Time{})
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
