package volumebackupschedule

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

var created = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func schedule(mut func(*fedv1alpha1.VolumeBackupSchedule)) *fedv1alpha1.VolumeBackupSchedule {
	s := &fedv1alpha1.VolumeBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "every-6h", CreationTimestamp: metav1.NewTime(created), Generation: 1},
		Spec:       fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "0 */6 * * *"},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name       string
		sched      *fedv1alpha1.VolumeBackupSchedule
		backups    []Backup
		now        time.Time
		wantCreate string
		wantDelete string
		wantReason string
		// wantRetention is the Retention condition's reason, when the case is about it.
		wantRetention string
		// wantMessage are substrings of the Ready (or, with wantRetention, Retention) message.
		wantMessage []string
		// wantKeeps is the RetentionKeepsSnapshots condition's status, reason and message
		// substrings, when the case is about it (every case checks the condition is set).
		wantKeeps *wantCondition
	}{
		{
			name: "before the first tick nothing happens", sched: schedule(nil),
			now: created.Add(5 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason, wantRetention: fedv1alpha1.VolumeBackupScheduleNoRetentionReason,
		},
		{
			name: "first tick creates a backup named after it", sched: schedule(nil),
			now: created.Add(6*time.Hour + time.Second), wantCreate: "every-6h-2026-11-01t06-00-00", wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
		},
		{
			name: "missed ticks collapse into one backup for the latest",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				t := metav1.NewTime(created.Add(6 * time.Hour))
				s.Status.LastBackupTime = &t
			}),
			backups:    []Backup{{Name: "a", Scheduled: created.Add(6 * time.Hour), Complete: true}},
			now:        created.Add(25 * time.Hour),
			wantCreate: "every-6h-2026-11-02t00-00-00", wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
		},
		{
			name: "a tick while the previous backup runs is skipped, not stacked",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				t := metav1.NewTime(created.Add(6 * time.Hour))
				s.Status.LastBackupTime = &t
			}),
			backups: []Backup{{Name: "slow", Scheduled: created.Add(6 * time.Hour)}},
			now:     created.Add(12*time.Hour + time.Minute), wantReason: fedv1alpha1.VolumeBackupScheduleSkippedPreviousRunningReason, wantMessage: []string{"slow"},
		},
		{
			name:  "paused: no backup, but retention still deletes",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true; s.Spec.MaxReservedTime = ptr.To("1d") }),
			backups: []Backup{{Name: "old", Scheduled: created, Complete: true},
				{Name: "new", Scheduled: created.Add(47 * time.Hour), Complete: true}},
			now: created.Add(48*time.Hour + time.Minute), wantDelete: "old", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
		},
		{
			name:  "maxBackups keeps the newest complete ones, never skipGC or running ones; one deletion at a time, oldest first",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](2); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Complete: true, SkipGC: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Complete: true},
				{Name: "b4", Scheduled: created.Add(4 * time.Hour), Complete: true},
				{Name: "b5", Scheduled: created.Add(5 * time.Hour), Complete: true},
				{Name: "b6", Scheduled: created.Add(6 * time.Hour)},
			},
			now: created.Add(7 * time.Hour), wantDelete: "b1", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
			wantRetention: fedv1alpha1.VolumeBackupScheduleDeletingReason, wantMessage: []string{"deleting b1", "1 more due"},
		},
		{
			name:  "serial: while one backup is being deleted, no other is",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](1); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true, Deleting: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Complete: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Complete: true},
			},
			now: created.Add(7 * time.Hour), wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
			wantRetention: fedv1alpha1.VolumeBackupScheduleDeletingReason, wantMessage: []string{"waiting for b1"},
		},
		{
			name:  "a deletion whose clean fails holds retention and says which backup and why",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](1); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true, Deleting: true,
					CleanFailure: "member in dp1: clean gave up after 10 attempts: UnauthorizedOperation"},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Complete: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Complete: true},
			},
			now: created.Add(7 * time.Hour), wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
			wantRetention: fedv1alpha1.VolumeBackupScheduleCleanFailedReason, wantMessage: []string{"b1 cannot be cleaned", "dp1", "UnauthorizedOperation"},
		},
		{
			name:  "a backup deleted by hand also holds the next deletion",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](1); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Complete: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Complete: true, SkipGC: true, Deleting: true},
			},
			now: created.Add(7 * time.Hour), wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason, wantRetention: fedv1alpha1.VolumeBackupScheduleDeletingReason,
		},
		{
			name:  "failed backups do not count: a run of failures never costs the newest complete ones",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](2); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Complete: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Failed: true},
				{Name: "b4", Scheduled: created.Add(4 * time.Hour), Failed: true},
			},
			now: created.Add(7 * time.Hour), wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason, wantRetention: fedv1alpha1.VolumeBackupScheduleIdleReason,
		},
		{
			name:  "a failed backup goes once a newer one completed",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](2); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Failed: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Complete: true},
			},
			now: created.Add(7 * time.Hour), wantDelete: "b2", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
		},
		{
			name:  "failures in a row keep at most maxBackups of them",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](2); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Complete: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Failed: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Failed: true},
				{Name: "b4", Scheduled: created.Add(4 * time.Hour), Failed: true},
			},
			now: created.Add(7 * time.Hour), wantDelete: "b2", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
		},
		{
			name: "maxReservedTime wins over maxBackups",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.MaxBackups = ptr.To[int32](1)
				s.Spec.MaxReservedTime = ptr.To("7d")
				s.Spec.Pause = true
			}),
			backups: []Backup{{Name: "a", Scheduled: created, Complete: true}, {Name: "b", Scheduled: created.Add(24 * time.Hour), Complete: true}},
			now:     created.Add(8*24*time.Hour - time.Hour), wantDelete: "a", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
		},
		{
			name:  "maxReservedTime never deletes the newest complete backup, however old; failed ones expire",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxReservedTime = ptr.To("1d"); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "a", Scheduled: created, Complete: true},
				{Name: "b", Scheduled: created.Add(24 * time.Hour), Failed: true},
			},
			now: created.Add(30 * 24 * time.Hour), wantDelete: "b", wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason,
		},
		{
			name:  "maxReservedTime: the newest complete backup alone stays",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxReservedTime = ptr.To("1d"); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "a", Scheduled: created, Complete: true},
			},
			now: created.Add(30 * 24 * time.Hour), wantReason: fedv1alpha1.VolumeBackupSchedulePausedReason, wantRetention: fedv1alpha1.VolumeBackupScheduleIdleReason,
		},
		{
			name:  "retention with the template's cleanPolicy unset: backups clean (the schedule writes Delete into each)",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxReservedTime = ptr.To("7d") }),
			now:   created.Add(6*time.Hour + time.Second), wantCreate: "every-6h-2026-11-01t06-00-00", wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason, []string{"cleanPolicy unset", "Delete"}},
		},
		{
			name: "retention with cleanPolicy Delete: backups clean",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.MaxBackups = ptr.To[int32](3)
				s.Spec.BackupTemplate.Template.CleanPolicy = fedv1alpha1.CleanPolicyDelete
			}),
			now: created.Add(5 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason, []string{"Delete"}},
		},
		{
			name: "retention with cleanPolicy Retain: the schedule says retention leaves snapshots and how to change it",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.MaxBackups = ptr.To[int32](3)
				s.Spec.BackupTemplate.Template.CleanPolicy = fedv1alpha1.CleanPolicyRetain
			}),
			now: created.Add(6*time.Hour + time.Second), wantCreate: "every-6h-2026-11-01t06-00-00", wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleCleanPolicyRetainReason,
				[]string{"cleanPolicy Retain", "EBS snapshots", "backup metadata", "spec.backupTemplate.template.cleanPolicy", "Delete"}},
		},
		{
			name: "retention with cleanPolicy OnFailure: complete backups' snapshots are left",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.MaxReservedTime = ptr.To("1d")
				s.Spec.BackupTemplate.Template.CleanPolicy = fedv1alpha1.CleanPolicyOnFailure
			}),
			now: created.Add(5 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleCleanPolicyOnFailureReason,
				[]string{"cleanPolicy OnFailure", "complete", "EBS snapshots", "spec.backupTemplate.template.cleanPolicy"}},
		},
		{
			name: "no retention, cleanPolicy Retain: nothing is deleted, nothing is left behind by retention",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.BackupTemplate.Template.CleanPolicy = fedv1alpha1.CleanPolicyRetain
			}),
			now: created.Add(5 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleNoRetentionReason, nil},
		},
		{
			name:  "maxBackups 0 is no retention",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](0) }),
			now:   created.Add(5 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleScheduledReason,
			wantKeeps: &wantCondition{metav1.ConditionFalse, fedv1alpha1.VolumeBackupScheduleNoRetentionReason, nil},
		},
		{
			name: "an invalid schedule still says retention leaves snapshots",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.Schedule = "0 10-5 * * *"
				s.Spec.MaxBackups = ptr.To[int32](3)
				s.Spec.BackupTemplate.Template.CleanPolicy = fedv1alpha1.CleanPolicyRetain
			}),
			now: created.Add(24 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleInvalidScheduleReason,
			wantKeeps: &wantCondition{metav1.ConditionTrue, fedv1alpha1.VolumeBackupScheduleCleanPolicyRetainReason, nil},
		},
		{
			name:  "an invalid schedule is reported, nothing created or deleted",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "0 10-5 * * *" }),
			now:   created.Add(24 * time.Hour), wantReason: fedv1alpha1.VolumeBackupScheduleInvalidScheduleReason,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(Observed{Schedule: tc.sched, Backups: tc.backups}, tc.now)
			if r.Create != tc.wantCreate {
				t.Errorf("Create = %q, want %q", r.Create, tc.wantCreate)
			}
			if r.Delete != tc.wantDelete {
				t.Errorf("Delete = %q, want %q", r.Delete, tc.wantDelete)
			}
			c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeBackupScheduleReadyCondition)
			if c == nil || c.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want reason %s", c, tc.wantReason)
			}
			if tc.wantRetention != "" {
				c = meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeBackupScheduleRetentionCondition)
				if c == nil || c.Reason != tc.wantRetention {
					t.Errorf("Retention = %+v, want reason %s", c, tc.wantRetention)
				}
				if want := metav1.ConditionStatus(map[bool]string{true: "False", false: "True"}[tc.wantRetention == fedv1alpha1.VolumeBackupScheduleCleanFailedReason]); c != nil && c.Status != want {
					t.Errorf("Retention status %s, want %s", c.Status, want)
				}
			}
			for _, m := range tc.wantMessage {
				if c == nil || !strings.Contains(c.Message, m) {
					t.Errorf("message %+v, want it to contain %q", c, m)
				}
			}
			keeps := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeBackupScheduleRetentionKeepsSnapshotsCondition)
			if keeps == nil {
				t.Errorf("no %s condition: it is written on every reconcile", fedv1alpha1.VolumeBackupScheduleRetentionKeepsSnapshotsCondition)
			} else if w := tc.wantKeeps; w != nil {
				if keeps.Status != w.status || keeps.Reason != w.reason {
					t.Errorf("RetentionKeepsSnapshots = %+v, want %s %s", keeps, w.status, w.reason)
				}
				for _, m := range w.message {
					if !strings.Contains(keeps.Message, m) {
						t.Errorf("RetentionKeepsSnapshots message %q, want it to contain %q", keeps.Message, m)
					}
				}
			}
			if tc.wantCreate != "" && (r.Status.LastBackup != tc.wantCreate || !strings.HasPrefix(tc.wantCreate, tc.sched.Name)) {
				t.Errorf("LastBackup = %s", r.Status.LastBackup)
			}
		})
	}
}

// wantCondition is a condition's expected status, reason and message substrings.
type wantCondition struct {
	status  metav1.ConditionStatus
	reason  string
	message []string
}

// randomBackups are up to 20 backups an hour apart in random states.
func randomBackups(seed uint64, count uint8) []Backup {
	r := rand.New(rand.NewPCG(seed, 1))
	var bs []Backup
	for i := range int(count % 20) {
		b := Backup{Name: "b" + string(rune('a'+i)), Scheduled: created.Add(time.Duration(i) * time.Hour),
			SkipGC: r.IntN(5) == 0, Deleting: r.IntN(7) == 0}
		switch r.IntN(6) {
		case 0: // running
		case 1, 2:
			b.Failed = true
		default:
			b.Complete = true
		}
		bs = append(bs, b)
	}
	return bs
}

// deletable is what retention may ever delete: finished, not skipGC, not already going.
func deletable(b Backup) bool { return !b.SkipGC && (b.Complete || b.Failed) && !b.Deleting }

// naiveMaxBackups is retention by maxBackups the obvious way: a deletable complete backup goes
// when at least n newer deletable complete ones exist; a deletable failed one when any newer
// backup (of any kind, not being deleted) completed or at least n newer deletable failed ones
// exist. Oldest first.
func naiveMaxBackups(bs []Backup, n int) []string {
	var out []string
	for _, b := range bs {
		if !deletable(b) {
			continue
		}
		newerSame, newerComplete := 0, false
		for _, o := range bs {
			if !o.Scheduled.After(b.Scheduled) {
				continue
			}
			if o.Complete && !o.Deleting {
				newerComplete = true
			}
			if deletable(o) && o.Complete == b.Complete {
				newerSame++
			}
		}
		if newerSame >= n || b.Failed && newerComplete {
			out = append(out, b.Name)
		}
	}
	return out
}

// naiveMaxReservedTime: a deletable backup older than keep goes, unless it is the newest
// complete backup not being deleted. Oldest first.
func naiveMaxReservedTime(bs []Backup, keep time.Duration, now time.Time) []string {
	var out []string
	for _, b := range bs {
		if !deletable(b) || now.Sub(b.Scheduled) <= keep {
			continue
		}
		newest := b.Complete
		for _, o := range bs {
			if o.Complete && !o.Deleting && o.Scheduled.After(b.Scheduled) {
				newest = false
			}
		}
		if !newest {
			out = append(out, b.Name)
		}
	}
	return out
}

func TestExpiredAgreesWithNaive(t *testing.T) {
	byCount := func(seed uint64, count, keep uint8) bool {
		bs := randomBackups(seed, count)
		n := int(keep%5) + 1
		s := schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To(int32(n)) })
		got, want := Expired(Observed{Schedule: s, Backups: bs}, created.Add(100*time.Hour)), naiveMaxBackups(bs, n)
		return len(got) == 0 && len(want) == 0 || reflect.DeepEqual(got, want)
	}
	if err := quick.Check(byCount, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal("maxBackups:", err)
	}
	byAge := func(seed uint64, count, hours uint8) bool {
		bs := randomBackups(seed, count)
		keep := time.Duration(hours%24+1) * time.Hour
		s := schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxReservedTime = ptr.To(keep.String()) })
		now := created.Add(20 * time.Hour)
		got, want := Expired(Observed{Schedule: s, Backups: bs}, now), naiveMaxReservedTime(bs, keep, now)
		return len(got) == 0 && len(want) == 0 || reflect.DeepEqual(got, want)
	}
	if err := quick.Check(byAge, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal("maxReservedTime:", err)
	}
}

// TestRetentionNeverCostsTheNewestCompleteBackups: whatever the states, retention by
// maxBackups n never deletes any of the n newest complete backups, and retention by age never
// the newest complete one.
func TestRetentionNeverCostsTheNewestCompleteBackups(t *testing.T) {
	f := func(seed uint64, count, keep uint8) bool {
		bs := randomBackups(seed, count)
		n := int(keep%5) + 1
		var complete []string // newest first, not being deleted
		for i := len(bs) - 1; i >= 0; i-- {
			if bs[i].Complete && !bs[i].Deleting {
				complete = append(complete, bs[i].Name)
			}
		}
		byCount := Expired(Observed{Schedule: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To(int32(n)) }), Backups: bs}, created.Add(100*time.Hour))
		byAge := Expired(Observed{Schedule: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxReservedTime = ptr.To("1m") }), Backups: bs}, created.Add(100*time.Hour))
		for i, name := range complete {
			if i < n && slices.Contains(byCount, name) || i == 0 && slices.Contains(byAge, name) {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

// TestPausedForDaysThenResumedMakesOneBackupAtTheNextTick walks a clock through a schedule
// paused for five days, reconciling at every requeue and on the resume (a spec change), and
// applying each plan's status: the resume makes no backup at once, the next tick makes exactly
// one, named after it (upstream made one at once for the latest missed tick).
func TestPausedForDaysThenResumedMakesOneBackupAtTheNextTick(t *testing.T) {
	s := schedule(nil) // every 6 hours
	var backups []Backup
	var made []string
	reconcile := func(now time.Time) Result {
		t.Helper()
		r := Plan(Observed{Schedule: s, Backups: backups}, now)
		s.Status = r.Status
		if r.Create != "" {
			made = append(made, r.Create)
			backups = append(backups, Backup{Name: r.Create, Scheduled: r.CreateFor, Complete: true}) // done at once
		}
		return r
	}
	now := created.Add(6*time.Hour + time.Second)
	reconcile(now)
	if len(made) != 1 {
		t.Fatalf("first tick: %v", made)
	}
	s.Spec.Pause = true
	now = now.Add(time.Hour)
	r := reconcile(now)
	for end := now.Add(5 * 24 * time.Hour); now.Before(end); {
		now = now.Add(r.RequeueAfter)
		r = reconcile(now)
	}
	if len(made) != 1 {
		t.Fatalf("backups made while paused: %v", made)
	}
	s.Spec.Pause = false
	now = now.Add(3 * time.Hour) // resumed between two ticks
	r = reconcile(now)
	if len(made) != 1 {
		t.Fatalf("the resume made %v at once", made[1:])
	}
	if s.Status.ResumeTime == nil || !s.Status.ResumeTime.Time.Equal(now) {
		t.Fatalf("resumeTime %v, want %v", s.Status.ResumeTime, now)
	}
	next := now.Add(r.RequeueAfter)
	if next.Sub(now) > 6*time.Hour || next.Minute() != 0 || next.Hour()%6 != 0 {
		t.Fatalf("next reconcile at %v, want the next tick", next)
	}
	r = reconcile(next.Add(-time.Second))
	if len(made) != 1 {
		t.Fatalf("a backup before the tick: %v", made)
	}
	reconcile(next)
	reconcile(next.Add(time.Second)) // a second event at the same tick
	if len(made) != 2 || made[1] != BackupName(s.Name, next) {
		t.Fatalf("after the next tick: %v, want one backup for %v", made, next)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, fedv1alpha1.VolumeBackupScheduleReadyCondition); c.Reason != fedv1alpha1.VolumeBackupScheduleScheduledReason {
		t.Fatalf("Ready = %+v", c)
	}
}

// TestLatestTickAgreesWithWalkingEveryTick: the look-back from now finds the tick that walking
// every tick from the anchor finds, for schedules dense and sparse.
func TestLatestTickAgreesWithWalkingEveryTick(t *testing.T) {
	schedules := []struct {
		expr string
		span time.Duration // the longest anchor-to-now span tried; the walk costs one step a tick
	}{
		{"* * * * *", 10 * 24 * time.Hour}, {"*/7 * * * *", 40 * 24 * time.Hour}, {"@every 13s", 3 * 24 * time.Hour},
		{"0 */6 * * *", 3 * 366 * 24 * time.Hour}, {"30 2 * * 1-5", 3 * 366 * 24 * time.Hour},
		{"0 0 29 2 *", 9 * 366 * 24 * time.Hour}, {"0 0 1 1 *", 3 * 366 * 24 * time.Hour},
	}
	f := func(which uint8, anchorMin, spanMin uint32) bool {
		sc := schedules[int(which)%len(schedules)]
		sched, err := fedv1alpha1.ParseSchedule(sc.expr)
		if err != nil {
			t.Fatal(err)
		}
		anchor := created.Add(time.Duration(anchorMin%100000) * time.Minute).Add(17 * time.Second)
		now := anchor.Add(time.Duration(uint64(spanMin)%uint64(sc.span/time.Minute)) * time.Minute)
		var want time.Time
		for next := sched.Next(anchor); !next.After(now); next = sched.Next(next) {
			want = next
		}
		return latestTick(sched, anchor, now).Equal(want)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 300}); err != nil {
		t.Fatal(err)
	}
}

// TestLastSuccess: the schedule's metrics describe its newest complete backup (by tick), never
// a running, failed or deleting one; the size is the newest known one.
func TestLastSuccess(t *testing.T) {
	h := func(n int) time.Time { return created.Add(time.Duration(n) * time.Hour) }
	done := func(name string, tick, started, completed int, size int64) Backup {
		return Backup{Name: name, Scheduled: h(tick), Complete: true, Started: h(started), Completed: h(completed), Size: size}
	}
	tests := []struct {
		name    string
		backups []Backup
		want    LastSuccess
	}{
		{name: "no backup"},
		{name: "only running and failed ones", backups: []Backup{{Name: "r", Scheduled: h(1)}, {Name: "f", Scheduled: h(2), Failed: true, Completed: h(3)}}},
		{name: "the newest complete one", backups: []Backup{done("a", 1, 1, 2, 100), done("b", 6, 6, 8, 300), done("c", 3, 3, 4, 200),
			{Name: "f", Scheduled: h(9), Failed: true, Started: h(9), Completed: h(10), Size: 5}},
			want: LastSuccess{Found: true, At: h(8), Duration: 2 * time.Hour, SizeFound: true, Size: 300}},
		{name: "a deleting one does not count", backups: []Backup{done("a", 1, 1, 2, 100), func() Backup { b := done("b", 6, 6, 8, 300); b.Deleting = true; return b }()},
			want: LastSuccess{Found: true, At: h(2), Duration: time.Hour, SizeFound: true, Size: 100}},
		{name: "the newest not sized yet: the last known size", backups: []Backup{done("a", 1, 1, 2, 100), done("b", 6, 6, 7, 0)},
			want: LastSuccess{Found: true, At: h(7), Duration: time.Hour, SizeFound: true, Size: 100}},
		{name: "never sized", backups: []Backup{done("a", 1, 1, 3, 0)},
			want: LastSuccess{Found: true, At: h(3), Duration: 2 * time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true })
			if got := Plan(Observed{Schedule: s, Backups: tc.backups}, h(20)).Last; got != tc.want {
				t.Errorf("Last = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWindow: the window the "no recent backup" alert checks is the schedule's second-latest
// tick since its creation or resume; none while paused or invalid.
func TestWindow(t *testing.T) {
	resumedAt := func(at time.Time) func(*fedv1alpha1.VolumeBackupSchedule) {
		return func(s *fedv1alpha1.VolumeBackupSchedule) {
			r := metav1.NewTime(at)
			s.Status.ResumeTime = &r
		}
	}
	friday := time.Date(2026, 11, 6, 0, 0, 0, 0, time.UTC) // 2026-11-06 is a Friday
	tests := []struct {
		name  string
		sched *fedv1alpha1.VolumeBackupSchedule
		now   time.Time
		want  time.Time
	}{
		{name: "before the first tick", sched: schedule(nil), now: created.Add(5 * time.Hour)},
		{name: "one tick passed: its window is still open", sched: schedule(nil), now: created.Add(6*time.Hour + time.Minute)},
		{name: "at the second tick the first window closes", sched: schedule(nil), now: created.Add(12 * time.Hour), want: created.Add(6 * time.Hour)},
		{name: "days later: the tick before the latest", sched: schedule(nil), now: created.Add(73 * time.Hour), want: created.Add(66 * time.Hour)},
		{name: "paused: no window", sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true }), now: created.Add(73 * time.Hour)},
		{name: "invalid: no window", sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "0 10-5 * * *" }), now: created.Add(73 * time.Hour)},
		{name: "resumed: ticks count from the resume", sched: schedule(resumedAt(created.Add(63 * time.Hour))), now: created.Add(70 * time.Hour)},
		{name: "resumed: two ticks after it", sched: schedule(resumedAt(created.Add(63 * time.Hour))), now: created.Add(73 * time.Hour), want: created.Add(66 * time.Hour)},
		{
			name: "weekdays only: on Monday the window is Friday's", now: friday.Add(3*24*time.Hour + 3*time.Hour), want: friday.Add(2 * time.Hour),
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "0 2 * * 1-5" }),
		},
		{
			name: "weekdays only: over the weekend Thursday's", now: friday.Add(2*24*time.Hour + 12*time.Hour), want: friday.Add(-22 * time.Hour),
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "0 2 * * 1-5" }),
		},
		{name: "@every counts from the creation", sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "@every 90m" }), now: created.Add(5 * time.Hour), want: created.Add(3 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plan(Observed{Schedule: tc.sched}, tc.now).Window; !got.Equal(tc.want) {
				t.Errorf("Window = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLastVerified: the verification metrics read the newest verdict on the schedule's backups
// (failed or not) and the newest pass with its recovery time; nothing before a verdict.
func TestLastVerified(t *testing.T) {
	h := func(n int) time.Time { return created.Add(time.Duration(n) * time.Hour) }
	judged := func(name string, passed bool, at int, recovery time.Duration) Backup {
		return Backup{Name: name, Scheduled: h(at - 1), Complete: true, Verdict: &Verdict{Passed: passed, At: h(at), Recovery: recovery}}
	}
	for _, tc := range []struct {
		name    string
		backups []Backup
		want    LastVerified
	}{
		{name: "no verdict", backups: []Backup{{Name: "a", Complete: true}}},
		{name: "a pass", backups: []Backup{judged("a", true, 3, 10*time.Minute)},
			want: LastVerified{Judged: true, PassedAt: h(3), Recovery: 10 * time.Minute}},
		{name: "the newest verdict failed: failed, the last pass still reported",
			backups: []Backup{judged("a", true, 3, 10*time.Minute), judged("b", false, 5, 0), judged("c", true, 2, time.Minute)},
			want:    LastVerified{Judged: true, Failed: true, PassedAt: h(3), Recovery: 10 * time.Minute}},
		{name: "a failure then a pass: not failed", backups: []Backup{judged("a", false, 3, 0), judged("b", true, 4, 2*time.Minute)},
			want: LastVerified{Judged: true, PassedAt: h(4), Recovery: 2 * time.Minute}},
		{name: "only failures", backups: []Backup{judged("a", false, 3, 0)}, want: LastVerified{Judged: true, Failed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true })
			if got := Plan(Observed{Schedule: s, Backups: tc.backups}, h(20)).Verified; got != tc.want {
				t.Errorf("Verified = %+v, want %+v", got, tc.want)
			}
		})
	}
}
