// Package volumebackupschedule is the manager's VolumeBackupSchedule controller. Plan decides,
// from the schedule, the backups it created and the time, which backup to create and which to
// delete; it reads no clock and no client.
//
// Differences from upstream: a tick while the previous scheduled backup still runs is skipped
// (two overlapping pauses would double the GC window) and says so in a condition; each tick's
// backup has a storage prefix of its own for every storage provider; retention accepts day
// durations (7d), never counts a failed backup toward maxBackups and never deletes the newest
// complete backup for age, so it never costs the last restorable backups; it deletes one backup
// at a time and waits for that deletion to finish, and a clean that fails is a condition naming
// the backup, not a silent stall. A schedule with retention whose backup template leaves
// cleanPolicy unset creates its backups with cleanPolicy Delete (upstream's were Retain, so
// retention deleted the VolumeBackups and left their snapshots for ever), and a template that
// keeps snapshots (Retain, OnFailure) while retention is on is a condition,
// RetentionKeepsSnapshots.
package volumebackupschedule

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Backup is what Plan needs of one VolumeBackup the schedule created.
type Backup struct {
	Name string
	// Scheduled is the tick it was created for.
	Scheduled time.Time
	SkipGC    bool
	// Complete and Failed say how it ended; neither while it runs.
	Complete, Failed bool
	// Deleting is true once its deletion started.
	Deleting bool
	// CleanFailure is why its clean fails, while it does (the VolumeBackup's Cleaned
	// condition); empty otherwise.
	CleanFailure string
	// Started and Completed are its status times (zero if unset); Size its full size in bytes
	// (0 until its members sized it).
	Started, Completed time.Time
	Size               int64
	// Verdict is its Verified condition with status.verification, once a restore judged it.
	Verdict *Verdict
}

// Verdict is a backup's verification: whether it passed, when it was judged, and the recovery
// time the restore measured (zero when it failed).
type Verdict struct {
	Passed   bool
	At       time.Time
	Recovery time.Duration
}

// done says the backup completed or failed.
func (b Backup) done() bool { return b.Complete || b.Failed }

// Observed is everything Plan decides from.
type Observed struct {
	Schedule *fedv1alpha1.VolumeBackupSchedule
	Backups  []Backup
	// Drills are the schedule's drills (VolumeRestores labelled DrillLabel), deleting ones too.
	Drills []Drill
}

// Result is Plan's decision.
type Result struct {
	// Create names the VolumeBackup to create now, if any, and the tick it is for.
	Create    string
	CreateFor time.Time
	// Delete names the backup retention deletes now, if any: one at a time, and none while an
	// earlier deletion is still going.
	Delete string
	// CreateDrill names the backup to drill now, if any; DeleteDrills the drills to delete.
	CreateDrill  string
	DeleteDrills []string
	// drillOf is the VolumeBackup CreateDrill names, found by the reconciler.
	drillOf *fedv1alpha1.VolumeBackup
	Status  fedv1alpha1.VolumeBackupScheduleStatus
	// RequeueAfter is the time until the next tick.
	RequeueAfter time.Duration
	// Last is what the schedule's metrics report.
	Last LastSuccess
	// Verified is what the schedule's verification metrics report.
	Verified LastVerified
	// Window is the start of the schedule's latest closed window: its second-latest tick at or
	// before now, counted from its creation or its latest resume. A backup of that tick should
	// have completed by the latest tick. Zero while paused, invalid, or before a window closed.
	// The "no recent backup" alert compares it with Last.At.
	Window time.Time
}

// LastSuccess describes the schedule's newest complete backup, for its metrics.
type LastSuccess struct {
	// Found is false while the schedule has no complete backup (with its times).
	Found bool
	// At is when it completed; Duration how long it took.
	At       time.Time
	Duration time.Duration
	// Size is the full size of the newest complete backup whose size is known (SizeFound).
	SizeFound bool
	Size      int64
}

// Plan decides what to create and delete at now.
func Plan(o Observed, now time.Time) Result {
	s := o.Schedule
	res := Result{Status: *s.Status.DeepCopy()}
	st := &res.Status
	st.ObservedGeneration = s.Generation
	setRetentionKeepsSnapshots(st, &s.Spec, now)

	sched, err := fedv1alpha1.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		setReady(st, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleInvalidScheduleReason, err.Error(), now)
		return res
	}
	planRetention(o, &res, now)
	res.Last = lastSuccess(o.Backups)
	res.Verified = lastVerified(o.Backups)

	res.RequeueAfter = sched.Next(now).Sub(now)
	planDrill(o, sched, &res, now)
	if s.Spec.Pause {
		setReady(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupSchedulePausedReason, "paused: no new backups; retention still runs", now)
		return res
	}
	if c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.VolumeBackupScheduleReadyCondition); c != nil && c.Reason == fedv1alpha1.VolumeBackupSchedulePausedReason {
		// Resumed: the ticks missed while paused are not caught up (upstream made a backup at
		// once for the latest of them); the next backup is at the next tick.
		t := metav1.NewTime(now)
		st.ResumeTime = &t
	}
	res.Window = closedWindow(sched, s.CreationTimestamp.Time, st.ResumeTime, now)
	anchor := s.CreationTimestamp.Time
	for _, t := range []*metav1.Time{st.LastBackupTime, st.AllBackupCleanTime, st.ResumeTime} {
		if t != nil && t.After(anchor) {
			anchor = t.Time
		}
	}
	// The latest tick after the anchor and at or before now: missed ticks collapse into one
	// backup.
	tick := latestTick(sched, anchor, now)

	switch {
	case tick.IsZero():
		setReady(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleScheduledReason, "next backup at "+sched.Next(now).UTC().Format(time.RFC3339), now)
	case running(o) != "":
		t := metav1.NewTime(tick)
		st.LastBackupTime = &t // the tick is consumed; the next one gets a fresh chance
		setReady(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleSkippedPreviousRunningReason,
			fmt.Sprintf("skipped the %s backup: %s is still running", tick.UTC().Format(time.RFC3339), running(o)), now)
	default:
		res.Create, res.CreateFor = BackupName(s.Name, tick), tick
		t := metav1.NewTime(tick)
		st.LastBackup, st.LastBackupTime = res.Create, &t
		setReady(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleScheduledReason, "created "+res.Create, now)
	}
	return res
}

// requeueBy brings the requeue forward to d (when positive and sooner).
func (r *Result) requeueBy(d time.Duration) {
	if d > 0 && (r.RequeueAfter <= 0 || d < r.RequeueAfter) {
		r.RequeueAfter = d
	}
}

// closedWindow is the second-latest tick of sched in (start, now], where start is the schedule's
// creation or, if later, its resume; zero if fewer than two ticks passed. Ticks skipped while a
// backup ran still count: a backup longer than the schedule's interval is a missed window.
func closedWindow(sched cron.Schedule, created time.Time, resumed *metav1.Time, now time.Time) time.Time {
	start := created
	if resumed != nil && resumed.After(start) {
		start = resumed.Time
	}
	latest := latestTick(sched, start, now)
	if latest.IsZero() {
		return time.Time{}
	}
	return latestTick(sched, start, latest.Add(-time.Nanosecond))
}

// latestTick is the latest tick of sched in (anchor, now], zero if none. A cron expression's
// ticks are found looking back from now over growing windows, so a schedule whose anchor is
// weeks old (a manager down that long) costs a few ticks, not one per missed tick; @every's
// ticks count from the anchor and are computed.
func latestTick(sched cron.Schedule, anchor, now time.Time) time.Time {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		first := every.Next(anchor)
		if first.After(now) || every.Delay <= 0 {
			return time.Time{}
		}
		return first.Add(now.Sub(first) / every.Delay * every.Delay)
	}
	for _, back := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 0} {
		from := now.Add(-back)
		if back == 0 || from.Before(anchor) {
			from = anchor
		}
		var tick time.Time
		for next := sched.Next(from); !next.IsZero() && !next.After(now); next = sched.Next(next) {
			tick = next
		}
		if !tick.IsZero() || from.Equal(anchor) {
			return tick
		}
	}
	return time.Time{}
}

// LastVerified describes the verdicts on the schedule's backups, for its metrics.
type LastVerified struct {
	// Judged is false while none of its backups has a verdict.
	Judged bool
	// Failed says the newest verdict (by when it was judged) is a failure.
	Failed bool
	// PassedAt is when the newest passing verdict was judged (zero: none passed), Recovery the
	// recovery time its restore measured.
	PassedAt time.Time
	Recovery time.Duration
}

// lastVerified reads the verdicts on the schedule's backups: the newest, and the newest pass.
func lastVerified(bs []Backup) LastVerified {
	var out LastVerified
	var newest time.Time
	for _, b := range bs {
		v := b.Verdict
		if v == nil {
			continue
		}
		if !out.Judged || v.At.After(newest) {
			out.Judged, out.Failed, newest = true, !v.Passed, v.At
		}
		if v.Passed && v.At.After(out.PassedAt) {
			out.PassedAt, out.Recovery = v.At, v.Recovery
		}
	}
	return out
}

// lastSuccess finds the newest complete backup (by tick) not being deleted, and the newest one
// whose size is known (sizes arrive after completion).
func lastSuccess(bs []Backup) LastSuccess {
	var last LastSuccess
	var at, sizedAt time.Time
	for _, b := range bs {
		if !b.Complete || b.Deleting || b.Completed.IsZero() {
			continue
		}
		if !last.Found || b.Scheduled.After(at) {
			last.Found, at, last.At = true, b.Scheduled, b.Completed
			last.Duration = 0
			if !b.Started.IsZero() {
				last.Duration = b.Completed.Sub(b.Started)
			}
		}
		if b.Size > 0 && (!last.SizeFound || b.Scheduled.After(sizedAt)) {
			last.SizeFound, sizedAt, last.Size = true, b.Scheduled, b.Size
		}
	}
	return last
}

// running names a scheduled backup that has not finished, if any.
func running(o Observed) string {
	for _, b := range o.Backups {
		if !b.done() && !b.Deleting {
			return b.Name
		}
	}
	return ""
}

// planRetention deletes the oldest expired backup, one at a time: while any of the schedule's
// backups is being deleted (by retention or by hand), nothing else is, so cleans never pile
// up against the cloud's API limits, and a clean that fails holds retention with a condition
// naming the backup and why, instead of failing unseen while retention moves on.
func planRetention(o Observed, res *Result, now time.Time) {
	st := &res.Status
	for _, b := range o.Backups {
		if !b.Deleting {
			continue
		}
		if b.CleanFailure != "" {
			setCondition(st, fedv1alpha1.VolumeBackupScheduleRetentionCondition, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanFailedReason,
				fmt.Sprintf("%s cannot be cleaned: %s; retention deletes nothing else until it is gone", b.Name, b.CleanFailure), now)
			return
		}
		setCondition(st, fedv1alpha1.VolumeBackupScheduleRetentionCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDeletingReason,
			fmt.Sprintf("waiting for %s to be deleted before deleting another", b.Name), now)
		return
	}
	if !o.Schedule.Spec.HasRetention() {
		setCondition(st, fedv1alpha1.VolumeBackupScheduleRetentionCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleNoRetentionReason,
			"neither maxBackups nor maxReservedTime is set: every backup is kept", now)
		return
	}
	due := Expired(o, now)
	if len(due) == 0 {
		setCondition(st, fedv1alpha1.VolumeBackupScheduleRetentionCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleIdleReason,
			"no backup is due for deletion", now)
		return
	}
	res.Delete = due[0]
	if len(o.Backups) == 1 {
		t := metav1.NewTime(now)
		st.AllBackupCleanTime = &t
	}
	msg := "deleting " + res.Delete
	if len(due) > 1 {
		msg += fmt.Sprintf("; %d more due after it", len(due)-1)
	}
	setCondition(st, fedv1alpha1.VolumeBackupScheduleRetentionCondition, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDeletingReason, msg, now)
}

// Expired lists the backups retention deletes, oldest first. It never lists skipGC, running
// or deleting ones, nor one a drill restores (it waits until the drill is gone).
//
// With maxReservedTime, a finished backup scheduled longer ago than that is expired, except the
// newest complete backup (skipGC or not), which stays until a newer one completes: age alone
// never leaves the schedule without a restorable backup.
//
// Otherwise, with maxBackups N, failed backups do not count (upstream counted every backup, so
// a run of failures deleted the complete ones): all but the N newest complete backups are
// expired, and a failed backup is expired once a newer backup of the schedule completed or N
// newer failed ones exist.
func Expired(o Observed, now time.Time) []string {
	spec := o.Schedule.Spec
	var cands []Backup
	var newestComplete time.Time
	drilled := drilling(o)
	for _, b := range o.Backups {
		if b.Complete && !b.Deleting && b.Scheduled.After(newestComplete) {
			newestComplete = b.Scheduled
		}
		if !b.SkipGC && b.done() && !b.Deleting && !drilled[b.Name] {
			cands = append(cands, b)
		}
	}
	slices.SortFunc(cands, func(a, b Backup) int { // newest first
		if c := b.Scheduled.Compare(a.Scheduled); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	var out []Backup
	switch {
	case spec.MaxReservedTime != nil:
		keep, err := fedv1alpha1.ParseRetention(*spec.MaxReservedTime)
		if err != nil {
			return nil // admission refuses this; never delete on a value we cannot read
		}
		for _, b := range cands {
			lastRestorable := b.Complete && b.Scheduled.Equal(newestComplete)
			if now.Sub(b.Scheduled) > keep && !lastRestorable {
				out = append(out, b)
			}
		}
	case spec.MaxBackups != nil && *spec.MaxBackups > 0:
		n := int(*spec.MaxBackups)
		complete, failed := 0, 0
		for _, b := range cands {
			switch {
			case b.Complete:
				if complete >= n {
					out = append(out, b)
				}
				complete++
			default:
				if failed >= n || b.Scheduled.Before(newestComplete) {
					out = append(out, b)
				}
				failed++
			}
		}
	}
	slices.Reverse(out) // oldest first
	names := make([]string, len(out))
	for i, b := range out {
		names[i] = b.Name
	}
	return names
}

// setRetentionKeepsSnapshots says whether the backups retention deletes leave their snapshots
// and metadata behind: True while retention is on and the template's cleanPolicy keeps them
// (Retain, or OnFailure for complete backups), with what to change; False otherwise.
func setRetentionKeepsSnapshots(st *fedv1alpha1.VolumeBackupScheduleStatus, spec *fedv1alpha1.VolumeBackupScheduleSpec, now time.Time) {
	const typ = fedv1alpha1.VolumeBackupScheduleRetentionKeepsSnapshotsCondition
	const fix = "; to have retention delete them, set spec.backupTemplate.template.cleanPolicy to Delete (or remove it: a schedule with retention then writes Delete into each backup it creates); " +
		"backups created before keep their own cleanPolicy"
	switch policy := spec.BackupCleanPolicy(); {
	case !spec.HasRetention():
		setCondition(st, typ, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleNoRetentionReason,
			"neither maxBackups nor maxReservedTime is set: retention deletes no backup", now)
	case policy == fedv1alpha1.CleanPolicyRetain:
		setCondition(st, typ, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleCleanPolicyRetainReason,
			"the backup template says cleanPolicy Retain: each backup retention deletes leaves its EBS snapshots and backup metadata (S3) in every data plane, never deleted"+fix, now)
	case policy == fedv1alpha1.CleanPolicyOnFailure:
		setCondition(st, typ, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleCleanPolicyOnFailureReason,
			"the backup template says cleanPolicy OnFailure: each complete backup retention deletes leaves its EBS snapshots and backup metadata (S3) in every data plane, never deleted (failed ones are cleaned)"+fix, now)
	case spec.BackupTemplate.Template.CleanPolicy == "":
		setCondition(st, typ, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason,
			"the backup template leaves cleanPolicy unset and the schedule has retention: each backup is created with cleanPolicy Delete, so retention deletes its snapshots and metadata", now)
	default:
		setCondition(st, typ, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason,
			"the backup template says cleanPolicy Delete: retention deletes each backup's snapshots and metadata", now)
	}
}

func setReady(st *fedv1alpha1.VolumeBackupScheduleStatus, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	setCondition(st, fedv1alpha1.VolumeBackupScheduleReadyCondition, status, reason, msg, now)
}

// setCondition sets a condition; its LastTransitionTime moves to now only when its status
// changes.
func setCondition(st *fedv1alpha1.VolumeBackupScheduleStatus, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now)})
}
