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
		wantDelete []string
		wantReason string
	}{
		{
			name: "before the first tick nothing happens", sched: schedule(nil),
			now: created.Add(5 * time.Hour), wantReason: ReasonScheduled,
		},
		{
			name: "first tick creates a backup named after it", sched: schedule(nil),
			now: created.Add(6*time.Hour + time.Second), wantCreate: "every-6h-2026-11-01t06-00-00", wantReason: ReasonScheduled,
		},
		{
			name: "missed ticks collapse into one backup for the latest",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				t := metav1.NewTime(created.Add(6 * time.Hour))
				s.Status.LastBackupTime = &t
			}),
			backups:    []Backup{{Name: "a", Scheduled: created.Add(6 * time.Hour), Done: true}},
			now:        created.Add(25 * time.Hour),
			wantCreate: "every-6h-2026-11-02t00-00-00", wantReason: ReasonScheduled,
		},
		{
			name: "a tick while the previous backup runs is skipped, not stacked",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				t := metav1.NewTime(created.Add(6 * time.Hour))
				s.Status.LastBackupTime = &t
			}),
			backups: []Backup{{Name: "slow", Scheduled: created.Add(6 * time.Hour)}},
			now:     created.Add(12*time.Hour + time.Minute), wantReason: ReasonSkippedRunning,
		},
		{
			name:  "paused: no backup, but retention still deletes",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true; s.Spec.MaxReservedTime = ptr.To("1d") }),
			backups: []Backup{{Name: "old", Scheduled: created, Done: true},
				{Name: "new", Scheduled: created.Add(47 * time.Hour), Done: true}},
			now: created.Add(48*time.Hour + time.Minute), wantDelete: []string{"old"}, wantReason: ReasonPaused,
		},
		{
			name:  "maxBackups keeps the newest, never skipGC, running or deleting ones",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To[int32](2); s.Spec.Pause = true }),
			backups: []Backup{
				{Name: "b1", Scheduled: created.Add(1 * time.Hour), Done: true},
				{Name: "b2", Scheduled: created.Add(2 * time.Hour), Done: true, SkipGC: true},
				{Name: "b3", Scheduled: created.Add(3 * time.Hour), Done: true, Deleting: true},
				{Name: "b4", Scheduled: created.Add(4 * time.Hour), Done: true},
				{Name: "b5", Scheduled: created.Add(5 * time.Hour), Done: true},
				{Name: "b6", Scheduled: created.Add(6 * time.Hour)},
			},
			now: created.Add(7 * time.Hour), wantDelete: []string{"b1"}, wantReason: ReasonPaused,
		},
		{
			name: "maxReservedTime wins over maxBackups",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
				s.Spec.MaxBackups = ptr.To[int32](1)
				s.Spec.MaxReservedTime = ptr.To("7d")
				s.Spec.Pause = true
			}),
			backups: []Backup{{Name: "a", Scheduled: created, Done: true}, {Name: "b", Scheduled: created.Add(24 * time.Hour), Done: true}},
			now:     created.Add(8*24*time.Hour - time.Hour), wantDelete: []string{"a"}, wantReason: ReasonPaused,
		},
		{
			name:  "an invalid schedule is reported, nothing created or deleted",
			sched: schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Schedule = "0 10-5 * * *" }),
			now:   created.Add(24 * time.Hour), wantReason: ReasonInvalid,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(Observed{Schedule: tc.sched, Backups: tc.backups}, tc.now)
			if r.Create != tc.wantCreate {
				t.Errorf("Create = %q, want %q", r.Create, tc.wantCreate)
			}
			if !reflect.DeepEqual(r.Delete, tc.wantDelete) {
				t.Errorf("Delete = %v, want %v", r.Delete, tc.wantDelete)
			}
			c := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeBackupScheduleReadyCondition)
			if c == nil || c.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want reason %s", c, tc.wantReason)
			}
			if tc.wantCreate != "" && (r.Status.LastBackup != tc.wantCreate || !strings.HasPrefix(tc.wantCreate, tc.sched.Name)) {
				t.Errorf("LastBackup = %s", r.Status.LastBackup)
			}
		})
	}
}

// naiveKeep is retention by maxBackups the obvious way: of the deletable backups, those with
// at least N newer deletable ones go.
func naiveKeep(bs []Backup, n int) []string {
	var out []string
	for _, b := range bs {
		if b.SkipGC || !b.Done || b.Deleting {
			continue
		}
		newer := 0
		for _, o := range bs {
			if !o.SkipGC && o.Done && !o.Deleting && o.Scheduled.After(b.Scheduled) {
				newer++
			}
		}
		if newer >= n {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestMaxBackupsAgreesWithNaive(t *testing.T) {
	f := func(seed uint64, count, keep uint8) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		n := int(keep%5) + 1
		var bs []Backup
		for i := range int(count % 20) {
			bs = append(bs, Backup{Name: "b" + string(rune('a'+i)), Scheduled: created.Add(time.Duration(i) * time.Hour),
				SkipGC: r.IntN(5) == 0, Done: r.IntN(6) != 0, Deleting: r.IntN(7) == 0})
		}
		s := schedule(func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To(int32(n)); s.Spec.Pause = true })
		got := Plan(Observed{Schedule: s, Backups: bs}, created.Add(100*time.Hour)).Delete
		want := naiveKeep(bs, n)
		if len(got) == 0 && len(want) == 0 {
			return true
		}
		return reflect.DeepEqual(got, want)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}
