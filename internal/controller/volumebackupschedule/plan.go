// Package volumebackupschedule is the manager's VolumeBackupSchedule controller. Plan decides,
// from the schedule, the backups it created and the time, which backup to create and which to
// delete; it reads no clock and no client.
//
// Differences from upstream: a tick while the previous scheduled backup still runs is skipped
// (two overlapping pauses would double the GC window) and says so in a condition; retention
// accepts day durations (7d); backups already being deleted are not deleted again, so one stuck
// clean never stalls retention.
package volumebackupschedule

import (
	"fmt"
	"slices"
	"time"

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
	// Done is true once it completed or failed.
	Done bool
	// Deleting is true once its deletion started.
	Deleting bool
}

// Observed is everything Plan decides from.
type Observed struct {
	Schedule *fedv1alpha1.VolumeBackupSchedule
	Backups  []Backup
}

// Result is Plan's decision.
type Result struct {
	// Create names the VolumeBackup to create now, if any, and the tick it is for.
	Create    string
	CreateFor time.Time
	// Delete lists the backups retention removes now.
	Delete []string
	Status fedv1alpha1.VolumeBackupScheduleStatus
	// RequeueAfter is the time until the next tick.
	RequeueAfter time.Duration
}

// Reasons of the Ready condition.
const (
	ReasonScheduled      = "Scheduled"
	ReasonPaused         = "Paused"
	ReasonInvalid        = "InvalidSchedule"
	ReasonSkippedRunning = "SkippedPreviousRunning"
)

// Plan decides what to create and delete at now.
func Plan(o Observed, now time.Time) Result {
	s := o.Schedule
	res := Result{Status: *s.Status.DeepCopy()}
	st := &res.Status
	st.ObservedGeneration = s.Generation

	sched, err := fedv1alpha1.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		setReady(st, metav1.ConditionFalse, ReasonInvalid, err.Error(), now)
		return res
	}
	res.Delete = expired(o, now)
	if len(res.Delete) > 0 && len(res.Delete) == len(o.Backups) {
		t := metav1.NewTime(now)
		st.AllBackupCleanTime = &t
	}

	anchor := s.CreationTimestamp.Time
	if st.LastBackupTime != nil {
		anchor = st.LastBackupTime.Time
	}
	if st.AllBackupCleanTime != nil && st.AllBackupCleanTime.After(anchor) {
		anchor = st.AllBackupCleanTime.Time
	}
	// The latest tick at or before now: missed ticks collapse into one backup.
	var tick time.Time
	for next := sched.Next(anchor); !next.After(now); next = sched.Next(next) {
		tick = next
	}
	res.RequeueAfter = sched.Next(now).Sub(now)

	switch {
	case s.Spec.Pause:
		setReady(st, metav1.ConditionTrue, ReasonPaused, "paused: no new backups; retention still runs", now)
	case tick.IsZero():
		setReady(st, metav1.ConditionTrue, ReasonScheduled, "next backup at "+sched.Next(now).UTC().Format(time.RFC3339), now)
	case running(o) != "":
		t := metav1.NewTime(tick)
		st.LastBackupTime = &t // the tick is consumed; the next one gets a fresh chance
		setReady(st, metav1.ConditionTrue, ReasonSkippedRunning,
			fmt.Sprintf("skipped the %s backup: %s is still running", tick.UTC().Format(time.RFC3339), running(o)), now)
	default:
		res.Create, res.CreateFor = BackupName(s.Name, tick), tick
		t := metav1.NewTime(tick)
		st.LastBackup, st.LastBackupTime = res.Create, &t
		setReady(st, metav1.ConditionTrue, ReasonScheduled, "created "+res.Create, now)
	}
	return res
}

// running names a scheduled backup that has not finished, if any.
func running(o Observed) string {
	for _, b := range o.Backups {
		if !b.Done && !b.Deleting {
			return b.Name
		}
	}
	return ""
}

// expired lists the backups retention deletes: never skipGC ones, never running or already
// deleting ones; with maxReservedTime those scheduled longer ago than it, else all but the
// maxBackups newest.
func expired(o Observed, now time.Time) []string {
	spec := o.Schedule.Spec
	var cands []Backup
	for _, b := range o.Backups {
		if !b.SkipGC && b.Done && !b.Deleting {
			cands = append(cands, b)
		}
	}
	var out []string
	switch {
	case spec.MaxReservedTime != nil:
		keep, err := fedv1alpha1.ParseRetention(*spec.MaxReservedTime)
		if err != nil {
			return nil // admission refuses this; never delete on a value we cannot read
		}
		for _, b := range cands {
			if now.Sub(b.Scheduled) > keep {
				out = append(out, b.Name)
			}
		}
	case spec.MaxBackups != nil && *spec.MaxBackups > 0:
		slices.SortFunc(cands, func(a, b Backup) int { return b.Scheduled.Compare(a.Scheduled) }) // newest first
		for i, b := range cands {
			if i >= int(*spec.MaxBackups) {
				out = append(out, b.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func setReady(st *fedv1alpha1.VolumeBackupScheduleStatus, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeBackupScheduleReadyCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now)})
}
