package get

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
)

// TableOptions choose the table's columns.
type TableOptions struct {
	// AllNamespaces adds the NAMESPACE column.
	AllNamespaces bool
	// Wide adds the wide columns.
	Wide bool
}

// Backups writes one line per VolumeBackup, in the order given; now dates the ages.
func Backups(w io.Writer, items []fedv1alpha1.VolumeBackup, o TableOptions, now time.Time) error {
	t := newTable(o, []string{"NAME", "PHASE", "SIZE", "COMMIT-TS", "AGE"},
		[]string{"NAME", "PHASE", "SIZE", "INCREMENTAL", "COMMIT-TS", "COMMIT-TIME", "TIME-TAKEN", "SCHEDULE", "CLUSTERS", "VERIFIED", "AGE"})
	for i := range items {
		b := &items[i]
		st := b.Status
		if o.Wide {
			t.row(b.Namespace, b.Name, string(st.Phase), st.BackupSizeReadable, st.IncrementalBackupSizeReadable, st.CommitTs,
				tsoTime(st.CommitTs), st.TimeTaken, b.Labels[volumebackupschedule.ScheduleLabel], backupClusters(b),
				conditionStatus(st.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition), age(b.CreationTimestamp, now))
			continue
		}
		t.row(b.Namespace, b.Name, string(st.Phase), st.BackupSizeReadable, st.CommitTs, age(b.CreationTimestamp, now))
	}
	return t.write(w, "VolumeBackups")
}

// Restores writes one line per VolumeRestore, in the order given; now dates the ages.
func Restores(w io.Writer, items []fedv1alpha1.VolumeRestore, o TableOptions, now time.Time) error {
	t := newTable(o, []string{"NAME", "PHASE", "COMMIT-TS", "TIME-TAKEN", "AGE"},
		[]string{"NAME", "PHASE", "COMMIT-TS", "COMMIT-TIME", "TIME-TAKEN", "CLUSTERS", "CHECKED", "AGE"})
	for i := range items {
		r := &items[i]
		st := r.Status
		if o.Wide {
			t.row(r.Namespace, r.Name, string(st.Phase), st.CommitTs, tsoTime(st.CommitTs), st.TimeTaken, restoreClusters(r),
				conditionStatus(st.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition), age(r.CreationTimestamp, now))
			continue
		}
		t.row(r.Namespace, r.Name, string(st.Phase), st.CommitTs, st.TimeTaken, age(r.CreationTimestamp, now))
	}
	return t.write(w, "VolumeRestores")
}

// Schedules writes one line per VolumeBackupSchedule, in the order given; now dates the ages
// and the next run.
func Schedules(w io.Writer, items []fedv1alpha1.VolumeBackupSchedule, o TableOptions, now time.Time) error {
	t := newTable(o, []string{"NAME", "SCHEDULE", "PHASE", "LAST-BACKUP", "LAST-RUN", "NEXT-RUN", "AGE"},
		[]string{"NAME", "SCHEDULE", "PHASE", "LAST-BACKUP", "LAST-RUN", "NEXT-RUN", "NEXT-RUN-AT", "MAX-BACKUPS", "MAX-RESERVED-TIME", "CLEAN-POLICY", "AGE"})
	for i := range items {
		s := &items[i]
		st := s.Status
		lastRun := ""
		if st.LastBackupTime != nil {
			lastRun = age(*st.LastBackupTime, now)
		}
		next, at := nextRun(s, now)
		if o.Wide {
			maxBackups := ""
			if s.Spec.MaxBackups != nil {
				maxBackups = strconv.Itoa(int(*s.Spec.MaxBackups))
			}
			retention := ""
			if s.Spec.MaxReservedTime != nil {
				retention = *s.Spec.MaxReservedTime
			}
			policy := s.Spec.BackupCleanPolicy()
			if policy == "" {
				policy = fedv1alpha1.DefaultCleanPolicy
			}
			t.row(s.Namespace, s.Name, s.Spec.Schedule, schedulePhase(s), st.LastBackup, lastRun, next, at, maxBackups, retention, string(policy), age(s.CreationTimestamp, now))
			continue
		}
		t.row(s.Namespace, s.Name, s.Spec.Schedule, schedulePhase(s), st.LastBackup, lastRun, next, age(s.CreationTimestamp, now))
	}
	return t.write(w, "VolumeBackupSchedules")
}

// schedulePhase is Paused (spec.pause), the Ready condition's reason when it is False (the
// schedule does not run: InvalidSchedule, …), else Active.
func schedulePhase(s *fedv1alpha1.VolumeBackupSchedule) string {
	if s.Spec.Pause {
		return "Paused"
	}
	for _, c := range s.Status.Conditions {
		if c.Type == fedv1alpha1.VolumeBackupScheduleReadyCondition && c.Status == metav1.ConditionFalse {
			if c.Reason != "" {
				return c.Reason
			}
			return "NotReady"
		}
	}
	return "Active"
}

// nextRun is when the schedule ticks next, relative ("in 2h5m") and absolute (RFC 3339, UTC):
// the next tick after now of a cron expression; for @every, the ticks count from the latest of
// the schedule's creation, last backup, last clean-out and resume, as the controller counts
// them. "paused" for a paused schedule, "-" for one that does not parse.
func nextRun(s *fedv1alpha1.VolumeBackupSchedule, now time.Time) (string, string) {
	if s.Spec.Pause {
		return "paused", "-"
	}
	sched, err := fedv1alpha1.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		return "-", "-"
	}
	var next time.Time
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		anchor := s.CreationTimestamp.Time
		for _, t := range []*metav1.Time{s.Status.LastBackupTime, s.Status.AllBackupCleanTime, s.Status.ResumeTime} {
			if t != nil && t.After(anchor) {
				anchor = t.Time
			}
		}
		next = every.Next(anchor)
		if every.Delay > 0 && !next.After(now) {
			next = next.Add((now.Sub(next)/every.Delay + 1) * every.Delay)
		}
	} else {
		next = sched.Next(now)
	}
	if next.IsZero() {
		return "-", "-"
	}
	return "in " + duration.HumanDuration(next.Sub(now)), next.UTC().Format(time.RFC3339)
}

func backupClusters(b *fedv1alpha1.VolumeBackup) string {
	names := make([]string, 0, len(b.Spec.Clusters))
	for _, c := range b.Spec.Clusters {
		names = append(names, c.K8sClusterName)
	}
	return strings.Join(names, ",")
}

func restoreClusters(r *fedv1alpha1.VolumeRestore) string {
	names := make([]string, 0, len(r.Spec.Clusters))
	for _, c := range r.Spec.Clusters {
		names = append(names, c.K8sClusterName)
	}
	return strings.Join(names, ",")
}

// tsoTime is the physical time of a TSO (milliseconds << 18 | logical) in RFC 3339, UTC; "" when
// ts is not a decimal TSO.
func tsoTime(ts string) string {
	n, err := strconv.ParseUint(ts, 10, 64)
	if err != nil || n == 0 {
		return ""
	}
	return time.UnixMilli(int64(n >> 18)).UTC().Format(time.RFC3339)
}

// age is how long ago t was, as kubectl prints it; "-" for the zero time, "0s" for a time
// after now (clock skew).
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t.Time)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

type table struct {
	o    TableOptions
	rows [][]string
}

func newTable(o TableOptions, narrow, wide []string) *table {
	cols := narrow
	if o.Wide {
		cols = wide
	}
	t := &table{o: o}
	t.rows = append(t.rows, withNamespace(o, "NAMESPACE", cols))
	return t
}

func withNamespace(o TableOptions, ns string, cols []string) []string {
	if !o.AllNamespaces {
		return cols
	}
	return append([]string{ns}, cols...)
}

// row adds one object's line: namespace, then the columns.
func (t *table) row(namespace string, cols ...string) {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = cell(c)
	}
	t.rows = append(t.rows, withNamespace(t.o, cell(namespace), out))
}

// write prints the table, or "No <what> found." for an empty one, as kubectl does.
func (t *table) write(w io.Writer, what string) error {
	if len(t.rows) == 1 {
		_, err := fmt.Fprintf(w, "No %s found.\n", what)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, r := range t.rows {
		if _, err := io.WriteString(tw, strings.Join(r, "\t")+"\n"); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// cell is a status value on one table cell: whitespace and control characters (a status is
// written by the manager, but read here as untrusted) become single spaces, so a value cannot
// break the table's lines or columns; "-" for an empty value.
func cell(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if s == "" {
		return "-"
	}
	return s
}

// conditionStatus is the status of condition t (True, False, Unknown), "" when it is absent: a
// backup's Verified, a restore's Checked.
func conditionStatus(cs []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(cs, t); c != nil {
		return string(c.Status)
	}
	return ""
}
