package volumebackupschedule

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// drilled is a schedule (every 6 h) with verify; mut changes it further.
func drilled(every int32, mut ...func(*fedv1alpha1.VolumeBackupSchedule)) *fedv1alpha1.VolumeBackupSchedule {
	return schedule(func(s *fedv1alpha1.VolumeBackupSchedule) {
		s.Spec.Verify = &fedv1alpha1.ScheduleVerify{Namespace: "tidb-drill", Every: ptr.To(every)}
		for _, f := range mut {
			f(s)
		}
	})
}

func lastDrill(backup string, tick time.Time) func(*fedv1alpha1.VolumeBackupSchedule) {
	return func(s *fedv1alpha1.VolumeBackupSchedule) {
		s.Status.LastDrill = &fedv1alpha1.ScheduleDrill{Backup: backup, Scheduled: metav1.NewTime(tick), Restore: DrillName(backup)}
	}
}

func drillCondition(reason string) func(*fedv1alpha1.VolumeBackupSchedule) {
	return func(s *fedv1alpha1.VolumeBackupSchedule) {
		status := metav1.ConditionTrue
		if reason == fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason || reason == fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason {
			status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeBackupScheduleDrillCondition, Status: status, Reason: reason})
	}
}

func tick(n int) time.Time { return created.Add(time.Duration(n) * 6 * time.Hour) }

// TestPlanDrill is planDrill's table: which backup is drilled when, one drill at a time, judged
// and timed-out drills deleted, the bounds, and retention holding a drilled backup.
func TestPlanDrill(t *testing.T) {
	now := tick(4).Add(time.Minute)
	complete := func(name string, n int) Backup {
		return Backup{Name: name, Scheduled: tick(n), Complete: true, Size: 10 << 30}
	}
	for _, tt := range []struct {
		name    string
		sched   *fedv1alpha1.VolumeBackupSchedule
		backups []Backup
		drills  []Drill
		// wantCreate is the backup drilled now; wantDelete the drills deleted.
		wantCreate string
		wantDelete []string
		wantReason string
		wantMsg    string
		wantLast   string
	}{
		{name: "no complete backup yet", sched: drilled(1), backups: []Backup{{Name: "b1", Scheduled: tick(1)}},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantMsg: "no complete backup"},
		{name: "the first complete backup is drilled at once, the newest", sched: drilled(3),
			backups:    []Backup{complete("b1", 1), complete("b2", 2), {Name: "b3", Scheduled: tick(3), Failed: true}},
			wantCreate: "b2", wantReason: fedv1alpha1.VolumeBackupScheduleDrillRunningReason, wantMsg: "created drill b2-drill of b2 into namespace tidb-drill", wantLast: "b2"},
		{name: "every 3: the backup of the 2nd tick after the last drilled waits", sched: drilled(3, lastDrill("b1", tick(1))),
			backups: []Backup{complete("b1", 1), complete("b3", 3)}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantMsg: "b3 is the 2nd", wantLast: "b1"},
		{name: "every 3: the 3rd tick's is drilled, whatever retention deleted or skipped in between", sched: drilled(3, lastDrill("b1", tick(1))),
			backups: []Backup{complete("b4", 4)}, wantCreate: "b4", wantLast: "b4"},
		{name: "the newest was drilled already", sched: drilled(1, lastDrill("b4", tick(4))), backups: []Backup{complete("b4", 4)},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantLast: "b4"},
		{name: "one at a time: a running drill, no other", sched: drilled(1, lastDrill("b3", tick(3))),
			backups: []Backup{complete("b3", 3), complete("b4", 4)}, drills: []Drill{{Name: "b3-drill", Backup: "b3", Created: now.Add(-time.Hour)}},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillRunningReason, wantMsg: "running since", wantLast: "b3"},
		{name: "one at a time: a drill being deleted, no other", sched: drilled(1, lastDrill("b3", tick(3))),
			backups: []Backup{complete("b3", 3), complete("b4", 4)}, drills: []Drill{{Name: "b3-drill", Backup: "b3", Deleting: true}},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillRunningReason, wantMsg: "being deleted", wantLast: "b3"},
		{name: "a judged drill is deleted", sched: drilled(1, lastDrill("b3", tick(3))),
			backups: []Backup{complete("b3", 3)}, drills: []Drill{{Name: "b3-drill", Backup: "b3", Created: now.Add(-time.Hour), Judged: true, Outcome: "passed its checks"}},
			wantDelete: []string{"b3-drill"}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillRunningReason, wantMsg: "passed its checks: deleting it", wantLast: "b3"},
		{name: "a drill past its timeout is deleted, and says so", sched: drilled(1, lastDrill("b3", tick(3)), func(s *fedv1alpha1.VolumeBackupSchedule) {
			s.Spec.Verify.Timeout = &metav1.Duration{Duration: time.Hour}
		}), backups: []Backup{complete("b3", 3)}, drills: []Drill{{Name: "b3-drill", Backup: "b3", Created: now.Add(-time.Hour)}},
			wantDelete: []string{"b3-drill"}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason, wantMsg: "not judged within 1h0m0s", wantLast: "b3"},
		{name: "the time-out stays said until the next drill", sched: drilled(1, lastDrill("b3", tick(3)), drillCondition(fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason)),
			backups: []Backup{complete("b3", 3)}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason, wantLast: "b3"},
		{name: "the next drill replaces it", sched: drilled(1, lastDrill("b3", tick(3)), drillCondition(fedv1alpha1.VolumeBackupScheduleDrillTimedOutReason)),
			backups: []Backup{complete("b3", 3), complete("b4", 4)}, wantCreate: "b4", wantReason: fedv1alpha1.VolumeBackupScheduleDrillRunningReason, wantLast: "b4"},
		{name: "a backup another restore verified is not drilled again", sched: drilled(1),
			backups:    []Backup{{Name: "b4", Scheduled: tick(4), Complete: true, Verdict: &Verdict{Passed: true, At: now}}},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantMsg: "has a verdict already", wantLast: "b4"},
		{name: "larger than maxBackupSize: not drilled", sched: drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) {
			s.Spec.Verify.MaxBackupSize = ptr.To(resource.MustParse("1Gi"))
		}), backups: []Backup{complete("b4", 4)}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason, wantMsg: "more than verify.maxBackupSize 1Gi", wantLast: "b4"},
		{name: "maxBackupSize and no size yet: waits for it", sched: drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) {
			s.Spec.Verify.MaxBackupSize = ptr.To(resource.MustParse("1Ti"))
		}), backups: []Backup{{Name: "b4", Scheduled: tick(4), Complete: true}}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantMsg: "waiting for b4's size"},
		{name: "maxBackupSize and a size never measured: not drilled", sched: drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) {
			s.Spec.Verify.MaxBackupSize = ptr.To(resource.MustParse("1Ti"))
			s.Spec.BackupTemplate.Template.CalcSizeLevel = fedv1alpha1.CalcSizeNone
		}), backups: []Backup{{Name: "b4", Scheduled: tick(4), Complete: true}}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillTooLargeReason, wantMsg: "calcSizeLevel none", wantLast: "b4"},
		{name: "within maxBackupSize: drilled", sched: drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) {
			s.Spec.Verify.MaxBackupSize = ptr.To(resource.MustParse("1Ti"))
		}), backups: []Backup{complete("b4", 4)}, wantCreate: "b4", wantLast: "b4"},
		{name: "paused: no new drill", sched: drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.Pause = true }),
			backups: []Backup{complete("b4", 4)}, wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason, wantMsg: "paused"},
		{name: "verify removed: its drill is deleted, the condition goes", sched: schedule(drillCondition(fedv1alpha1.VolumeBackupScheduleDrillRunningReason)),
			backups: []Backup{complete("b4", 4)}, drills: []Drill{{Name: "b4-drill", Backup: "b4", Created: now}}, wantDelete: []string{"b4-drill"}},
		{name: "a deleted backup is not drilled", sched: drilled(1), backups: []Backup{{Name: "b4", Scheduled: tick(4), Complete: true, Deleting: true}},
			wantReason: fedv1alpha1.VolumeBackupScheduleDrillWaitingReason},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := Plan(Observed{Schedule: tt.sched, Backups: tt.backups, Drills: tt.drills}, now)
			if res.CreateDrill != tt.wantCreate {
				t.Errorf("CreateDrill %q, want %q", res.CreateDrill, tt.wantCreate)
			}
			if !slices.Equal(res.DeleteDrills, tt.wantDelete) {
				t.Errorf("DeleteDrills %v, want %v", res.DeleteDrills, tt.wantDelete)
			}
			c := meta.FindStatusCondition(res.Status.Conditions, fedv1alpha1.VolumeBackupScheduleDrillCondition)
			switch {
			case tt.sched.Spec.Verify == nil:
				if c != nil {
					t.Errorf("condition Drill %+v without verify", c)
				}
			case c == nil:
				t.Fatalf("no Drill condition")
			default:
				if tt.wantReason != "" && c.Reason != tt.wantReason {
					t.Errorf("Drill reason %s (%s), want %s", c.Reason, c.Message, tt.wantReason)
				}
				if !strings.Contains(c.Message, tt.wantMsg) {
					t.Errorf("Drill message %q, want %q", c.Message, tt.wantMsg)
				}
			}
			got := ""
			if l := res.Status.LastDrill; l != nil {
				got = l.Backup
			}
			if got != tt.wantLast {
				t.Errorf("lastDrill %q, want %q", got, tt.wantLast)
			}
		})
	}
}

// TestRetentionKeepsADrilledBackup: a backup a drill restores is not expired until the drill is
// gone (its snapshots would vanish under the restore).
func TestRetentionKeepsADrilledBackup(t *testing.T) {
	s := drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) { s.Spec.MaxBackups = ptr.To(int32(1)) })
	bs := []Backup{{Name: "old", Scheduled: tick(1), Complete: true}, {Name: "new", Scheduled: tick(2), Complete: true}}
	if got := Expired(Observed{Schedule: s, Backups: bs}, tick(3)); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("without a drill: %v", got)
	}
	if got := Expired(Observed{Schedule: s, Backups: bs, Drills: []Drill{{Name: "old-drill", Backup: "old", Deleting: true}}}, tick(3)); len(got) != 0 {
		t.Errorf("a drilled backup expired: %v", got)
	}
}

// TestDrillName: within 63 characters, distinct for distinct long backups.
func TestDrillName(t *testing.T) {
	if n := DrillName("nightly-2026-12-07t00-00-00"); n != "nightly-2026-12-07t00-00-00-drill" {
		t.Errorf("%s", n)
	}
	long := strings.Repeat("a", 60)
	a, b := DrillName(long+"-2026-12-07t00-00-00"), DrillName(long+"-2026-12-08t00-00-00")
	if len(a) > 63 || a == b || !strings.HasSuffix(a, "-drill") {
		t.Errorf("%s %s", a, b)
	}
}

// TestNewDrill: a scratch restore with verify of every plane of the backup into verify.namespace,
// the schedule's template otherwise, labelled, annotated with the backup, owned by the schedule.
func TestNewDrill(t *testing.T) {
	s := drilled(1, func(s *fedv1alpha1.VolumeBackupSchedule) {
		s.Namespace, s.UID = "tidb", "sched-uid"
		s.Spec.Verify.Template.Warmup = fedv1alpha1.RestoreWarmupAsync
		s.Spec.Verify.Template.Check = &fedv1alpha1.RestoreCheck{Image: "example.com/check:1"}
	})
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "every-6h-2026-11-01t06-00-00", Namespace: "tidb"}}
	b.Spec.Clusters = []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: "az1", TCName: "basic", TCNamespace: "tidb"}, {K8sClusterName: "az2", TCName: "basic", TCNamespace: "tidb"}}
	b.Spec.Template.S3 = &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "tidb/x"}
	r := NewDrill(s, b)
	if r.Name != "every-6h-2026-11-01t06-00-00-drill" || r.Namespace != "tidb" || r.Labels[DrillLabel] != "every-6h" || r.Annotations[DrillBackupAnnotation] != b.Name {
		t.Errorf("metadata %+v", r.ObjectMeta)
	}
	if refs := r.OwnerReferences; len(refs) != 1 || refs[0].UID != "sched-uid" || refs[0].Kind != "VolumeBackupSchedule" {
		t.Errorf("owner %+v", refs)
	}
	tpl := r.Spec.Template
	if !tpl.Scratch || !tpl.Verify || tpl.Warmup != fedv1alpha1.RestoreWarmupAsync || tpl.Check == nil {
		t.Errorf("template %+v", tpl)
	}
	if len(r.Spec.Clusters) != 2 || r.Spec.Clusters[1].TCNamespace != "tidb-drill" || r.Spec.Clusters[1].TCName != "basic" || r.Spec.Clusters[1].Backup.S3.Prefix != "tidb/x-az2" {
		t.Errorf("clusters %+v", r.Spec.Clusters)
	}
	if s.Spec.Verify.Template.Scratch {
		t.Error("the schedule's template was changed")
	}
}
