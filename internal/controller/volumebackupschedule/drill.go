package volumebackupschedule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Drills (spec.verify). A drill is a VolumeRestore the schedule creates and deletes: a scratch
// restore with verify of one of its complete backups into spec.verify.namespace of every plane,
// labelled DrillLabel and owned by the schedule (deleting the schedule deletes its drill, whose
// members' finalizers remove what it made). One drill at a time: the next is created only once
// the last is gone. A drill is deleted once judged (its restore Complete with Checked, or
// Failed: the backup then holds the verdict) or once older than spec.verify.timeout.

// DrillLabel on a drill's VolumeRestore names the schedule; DrillBackupAnnotation the backup.
const (
	DrillLabel            = "federation.pingcap.com/drill-of"
	DrillBackupAnnotation = "federation.pingcap.com/drill-backup"
)

// DefaultDrillTimeout is spec.verify.timeout's default.
const DefaultDrillTimeout = 24 * time.Hour

// Drill is what Plan needs of one of the schedule's drills.
type Drill struct {
	Name, Backup string
	Created      time.Time
	Deleting     bool
	// Judged says the restore is over: Complete with its Checked condition, or Failed;
	// Outcome says how, for the condition's message.
	Judged  bool
	Outcome string
}

// DrillName is the name of the drill of backup: <backup>-drill, shortened with a hash of the
// backup's name when that would pass 63 characters (a label value carries it).
func DrillName(backup string) string {
	const suffix, max = "-drill", 63
	if len(backup)+len(suffix) <= max {
		return backup + suffix
	}
	sum := sha256.Sum256([]byte(backup))
	h := hex.EncodeToString(sum[:])[:8]
	return backup[:max-len(suffix)-len(h)-1] + "-" + h + suffix
}

// planDrill decides the schedule's drills: delete a judged or timed-out one, or create the next
// when its backup is due. It sets status.lastDrill and the Drill condition.
func planDrill(o Observed, sched cron.Schedule, res *Result, now time.Time) {
	s := o.Schedule
	st := &res.Status
	v := s.Spec.Verify
	if v == nil {
		for _, d := range o.Drills {
			if !d.Deleting {
				res.DeleteDrills = append(res.DeleteDrills, d.Name)
			}
		}
		meta.RemoveStatusCondition(&st.Conditions, fedv1alpha1.VolumeBackupScheduleDrillCondition)
		return
	}
	timeout := DefaultDrillTimeout
	if v.Timeout != nil {
		timeout = v.Timeout.Duration
	}
	if planDrills(o, res, timeout, now) {
		return
	}
	if s.Spec.Pause {
		waiting(st, "the schedule is paused: no new drill", now)
		return
	}
	var due *Backup
	for i := range o.Backups {
		b := &o.Backups[i]
		if b.Complete && !b.Deleting && (due == nil || b.Scheduled.After(due.Scheduled)) {
			due = b
		}
	}
	last := st.LastDrill
	every := int32(1)
	if v.Every != nil {
		every = *v.Every
	}
	switch {
	case due == nil:
		waiting(st, "no complete backup to drill yet", now)
		return
	case last != nil && !due.Scheduled.After(last.Scheduled.Time):
		waiting(st, fmt.Sprintf("the next drill is of the backup of the %s tick after %s's", ordinal(every), last.Backup), now)
		return
	case last != nil:
		if n := ticksBetween(sched, last.Scheduled.Time, due.Scheduled, every); n < every {
			waiting(st, fmt.Sprintf("the next drill is of the backup of the %s tick after %s's (%s is the %s)", ordinal(every), last.Backup, due.Name, ordinal(n)), now)
			return
		}
	}
	considered := &fedv1alpha1.ScheduleDrill{Backup: due.Name, Scheduled: metav1.NewTime(due.Scheduled)}
	switch {
	case due.Verdict != nil:
		st.LastDrill = considered
		waiting(st, fmt.Sprintf("%s has a verdict already (another restore verified it): not drilled", due.Name), now)
		return
	case v.MaxBackupSize != nil && due.Size == 0 && s.Spec.BackupTemplate.Template.CalcSizeLevel == fedv1alpha1.CalcSizeNone:
		st.LastDrill = considered
		setDrill(st, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason,
			fmt.Sprintf("%s is not drilled: verify.maxBackupSize is %s and the backup template's calcSizeLevel none measures no size", due.Name, v.MaxBackupSize), now)
		return
	case v.MaxBackupSize != nil && due.Size == 0:
		waiting(st, fmt.Sprintf("waiting for %s's size (verify.maxBackupSize %s)", due.Name, v.MaxBackupSize), now)
		return
	case v.MaxBackupSize != nil && due.Size > v.MaxBackupSize.Value():
		st.LastDrill = considered
		setDrill(st, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason,
			fmt.Sprintf("%s is not drilled: its %d bytes are more than verify.maxBackupSize %s", due.Name, due.Size, v.MaxBackupSize), now)
		return
	}
	res.CreateDrill = due.Name
	t := metav1.NewTime(now)
	considered.Restore, considered.TimeStarted = DrillName(due.Name), &t
	st.LastDrill = considered
	setDrill(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillRunningReason,
		fmt.Sprintf("created drill %s of %s into namespace %s", considered.Restore, due.Name, v.Namespace), now)
	res.requeueBy(timeout)
}

// planDrills looks after the drills there are: deletes a judged one or one past timeout; it
// says whether there is one (then no other is created: one at a time).
func planDrills(o Observed, res *Result, timeout time.Duration, now time.Time) bool {
	st := &res.Status
	busy := false
	for _, d := range o.Drills {
		busy = true
		switch {
		case d.Deleting:
			if !drillFailed(st) {
				setDrill(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillRunningReason,
					fmt.Sprintf("drill %s of %s is being deleted: its agents remove what it made", d.Name, d.Backup), now)
			}
		case d.Judged:
			res.DeleteDrills = append(res.DeleteDrills, d.Name)
			setDrill(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillRunningReason,
				fmt.Sprintf("drill %s of %s %s: deleting it, which removes what it made (the backup keeps the verdict)", d.Name, d.Backup, d.Outcome), now)
		case now.Sub(d.Created) >= timeout:
			res.DeleteDrills = append(res.DeleteDrills, d.Name)
			setDrill(st, metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason,
				fmt.Sprintf("drill %s of %s was not judged within %s: deleted, which stops it and removes what it made; %s has no verdict", d.Name, d.Backup, timeout, d.Backup), now)
		default:
			setDrill(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillRunningReason,
				fmt.Sprintf("drill %s of %s running since %s (deleted if not judged within %s)", d.Name, d.Backup, d.Created.UTC().Format(time.RFC3339), timeout), now)
			res.requeueBy(d.Created.Add(timeout).Sub(now))
		}
	}
	return busy
}

// ticksBetween counts sched's ticks in (from, to], up to limit.
func ticksBetween(sched cron.Schedule, from, to time.Time, limit int32) int32 {
	n := int32(0)
	for t := sched.Next(from); !t.After(to) && n < limit; t = sched.Next(t) {
		n++
	}
	return n
}

func ordinal(n int32) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// drillFailed says the Drill condition holds a failure, which stays until the next drill starts.
func drillFailed(st *fedv1alpha1.VolumeBackupScheduleStatus) bool {
	return meta.IsStatusConditionFalse(st.Conditions, fedv1alpha1.VolumeBackupScheduleDrillCondition)
}

// waiting says no drill runs, unless the condition holds a failure, which stays until the next
// drill starts.
func waiting(st *fedv1alpha1.VolumeBackupScheduleStatus, msg string, now time.Time) {
	if drillFailed(st) {
		return
	}
	setDrill(st, metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, msg, now)
}

func setDrill(st *fedv1alpha1.VolumeBackupScheduleStatus, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	setCondition(st, fedv1alpha1.VolumeBackupScheduleDrillCondition, status, reason, msg, now)
}

// drilling names the backups an existing drill restores: retention keeps them until it is gone.
func drilling(o Observed) map[string]bool {
	out := map[string]bool{}
	for _, d := range o.Drills {
		out[d.Backup] = true
	}
	return out
}
