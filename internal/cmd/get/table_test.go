package get

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// tso is the TSO of physical time t, logical 0.
func tso(t time.Time) string { return strconv.FormatUint(uint64(t.UnixMilli())<<18, 10) }

func backup(ns, name string, created time.Duration, st fedv1alpha1.VolumeBackupStatus, clusters ...string) fedv1alpha1.VolumeBackup {
	b := fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: at(created)}, Status: st}
	for _, c := range clusters {
		b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: c})
	}
	return b
}

func TestBackups(t *testing.T) {
	commit := time.Date(2026, 12, 6, 4, 0, 1, 0, time.UTC)
	scheduled := backup("tidb", "nightly-20261206", 8*time.Hour, fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupComplete,
		BackupSizeReadable: "1.2 TiB", IncrementalBackupSizeReadable: "40 GiB", CommitTs: tso(commit), TimeTaken: "12m3s",
		Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupVerifiedCondition, Status: metav1.ConditionFalse}}}, "dp-a", "dp-b", "dp-c")
	scheduled.Labels = map[string]string{volumebackupschedule.ScheduleLabel: "nightly"}
	items := []fedv1alpha1.VolumeBackup{
		scheduled,
		backup("tidb", "adhoc", 90*time.Second, fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupRunning}, "dp-a"),
		// A status value cannot break the table's lines or columns.
		backup("other", "odd", 3*24*time.Hour, fedv1alpha1.VolumeBackupStatus{Phase: "Fail\ned", BackupSizeReadable: "1\tGiB", CommitTs: "not-a-ts"}),
	}
	for _, c := range []struct {
		name string
		o    TableOptions
		want string
	}{
		{"one namespace", TableOptions{}, `` +
			"NAME               PHASE      SIZE      COMMIT-TS            AGE\n" +
			"nightly-20261206   Complete   1.2 TiB   " + tso(commit) + "   8h\n" +
			"adhoc              Running    -         -                    90s\n" +
			"odd                Fail ed    1 GiB     not-a-ts             3d\n"},
		{"all namespaces", TableOptions{AllNamespaces: true}, `` +
			"NAMESPACE   NAME               PHASE      SIZE      COMMIT-TS            AGE\n" +
			"tidb        nightly-20261206   Complete   1.2 TiB   " + tso(commit) + "   8h\n" +
			"tidb        adhoc              Running    -         -                    90s\n" +
			"other       odd                Fail ed    1 GiB     not-a-ts             3d\n"},
		{"wide", TableOptions{Wide: true}, `` +
			"NAME               PHASE      SIZE      INCREMENTAL   COMMIT-TS            COMMIT-TIME            TIME-TAKEN   SCHEDULE   CLUSTERS         VERIFIED   AGE\n" +
			"nightly-20261206   Complete   1.2 TiB   40 GiB        " + tso(commit) + "   2026-12-06T04:00:01Z   12m3s        nightly    dp-a,dp-b,dp-c   False      8h\n" +
			"adhoc              Running    -         -             -                    -                      -            -          dp-a             -          90s\n" +
			"odd                Fail ed    1 GiB     -             not-a-ts             -                      -            -          -                -          3d\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Backups(&b, items, c.o, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
	var b bytes.Buffer
	if err := Backups(&b, nil, TableOptions{}, now); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "No VolumeBackups found.\n"; got != want {
		t.Errorf("empty list: %q, want %q", got, want)
	}
}

func TestRestores(t *testing.T) {
	commit := time.Date(2026, 12, 6, 4, 0, 1, 0, time.UTC)
	items := []fedv1alpha1.VolumeRestore{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "dr", Name: "into-dr", CreationTimestamp: at(25 * time.Hour)},
			Spec: fedv1alpha1.VolumeRestoreSpec{Clusters: []fedv1alpha1.VolumeRestoreMemberCluster{{K8sClusterName: "dp-a"}, {K8sClusterName: "dp-b"}}},
			Status: fedv1alpha1.VolumeRestoreStatus{Phase: fedv1alpha1.VolumeRestoreComplete, CommitTs: tso(commit), TimeTaken: "31m",
				Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeRestoreCheckedCondition, Status: metav1.ConditionTrue}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "dr", Name: "second", CreationTimestamp: at(5 * time.Second)}},
	}
	for _, c := range []struct {
		name string
		o    TableOptions
		want string
	}{
		{"one namespace", TableOptions{}, `` +
			"NAME      PHASE      COMMIT-TS            TIME-TAKEN   AGE\n" +
			"into-dr   Complete   " + tso(commit) + "   31m          25h\n" +
			"second    -          -                    -            5s\n"},
		{"wide, all namespaces", TableOptions{Wide: true, AllNamespaces: true}, `` +
			"NAMESPACE   NAME      PHASE      COMMIT-TS            COMMIT-TIME            TIME-TAKEN   CLUSTERS    CHECKED   AGE\n" +
			"dr          into-dr   Complete   " + tso(commit) + "   2026-12-06T04:00:01Z   31m          dp-a,dp-b   True      25h\n" +
			"dr          second    -          -                    -                      -            -           -         5s\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Restores(&b, items, c.o, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}

func TestSchedules(t *testing.T) {
	last := metav1.NewTime(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	items := []fedv1alpha1.VolumeBackupSchedule{
		// Every six hours: ran at 06:00, next at 12:00 + 6h = 18:00 (now is 12:00:00, a tick
		// itself, so the next is the one after).
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "every-6h", CreationTimestamp: at(10 * 24 * time.Hour)},
			Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "0 */6 * * *", MaxBackups: ptr.To[int32](4),
				BackupTemplate: fedv1alpha1.VolumeBackupSpec{Template: fedv1alpha1.VolumeBackupMemberSpec{CleanPolicy: fedv1alpha1.CleanPolicyRetain}}},
			Status: fedv1alpha1.VolumeBackupScheduleStatus{LastBackup: "every-6h-2026-12-06t06-00-00", LastBackupTime: &last}},
		// @every counts from the last backup: 06:00 + 4h = 10:00, 14:00 is the next after now
		// (under 3 h, kubectl's ages are in minutes).
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "every-4h", CreationTimestamp: at(48 * time.Hour)},
			Spec:   fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "@every 4h", MaxReservedTime: ptr.To("7d")},
			Status: fedv1alpha1.VolumeBackupScheduleStatus{LastBackupTime: &last}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "paused", CreationTimestamp: at(time.Hour)},
			Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "@daily", Pause: true}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "broken", CreationTimestamp: at(time.Minute)},
			Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "61 * * * *"},
			Status: fedv1alpha1.VolumeBackupScheduleStatus{Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupScheduleReadyCondition,
				Status: metav1.ConditionFalse, Reason: fedv1alpha1.VolumeBackupScheduleInvalidScheduleReason}}}},
	}
	for _, c := range []struct {
		name string
		o    TableOptions
		want string
	}{
		{"one namespace", TableOptions{}, `` +
			"NAME       SCHEDULE      PHASE             LAST-BACKUP                    LAST-RUN   NEXT-RUN   AGE\n" +
			"every-6h   0 */6 * * *   Active            every-6h-2026-12-06t06-00-00   6h         in 6h      10d\n" +
			"every-4h   @every 4h     Active            -                              6h         in 120m    2d\n" +
			"paused     @daily        Paused            -                              -          paused     60m\n" +
			"broken     61 * * * *    InvalidSchedule   -                              -          -          60s\n"},
		{"wide", TableOptions{Wide: true}, `` +
			"NAME       SCHEDULE      PHASE             LAST-BACKUP                    LAST-RUN   NEXT-RUN   NEXT-RUN-AT            MAX-BACKUPS   MAX-RESERVED-TIME   CLEAN-POLICY   AGE\n" +
			"every-6h   0 */6 * * *   Active            every-6h-2026-12-06t06-00-00   6h         in 6h      2026-12-06T18:00:00Z   4             -                   Retain         10d\n" +
			"every-4h   @every 4h     Active            -                              6h         in 120m    2026-12-06T14:00:00Z   -             7d                  Delete         2d\n" +
			"paused     @daily        Paused            -                              -          paused     -                      -             -                   Retain         60m\n" +
			"broken     61 * * * *    InvalidSchedule   -                              -          -          -                      -             -                   Retain         60s\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Schedules(&b, items, c.o, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	for word, want := range map[string]string{
		"backups": "VolumeBackup", "backup": "VolumeBackup", "vbk": "VolumeBackup", "VolumeBackups": "VolumeBackup",
		"restores": "VolumeRestore", "restore": "VolumeRestore", "vrt": "VolumeRestore", "volumerestore": "VolumeRestore",
		"schedules": "VolumeBackupSchedule", "schedule": "VolumeBackupSchedule", "vbks": "VolumeBackupSchedule",
		"volumebackupschedules.federation.pingcap.com": "VolumeBackupSchedule",
	} {
		if k, ok := KindOf(word); !ok || k.Name != want {
			t.Errorf("KindOf(%q) = %q, %v; want %q", word, k.Name, ok, want)
		}
	}
	for _, word := range []string{"", "pods", "vb", "members"} {
		if k, ok := KindOf(word); ok {
			t.Errorf("KindOf(%q) = %q; want none", word, k.Name)
		}
	}
}
