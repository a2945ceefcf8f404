package manager

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestScale measures the manager after months of schedules (FEDBR_SCALE=1; `make
// bench-scale-manager`): 100 schedules of 10 complete backups each over 3 data planes (3,000
// backup members, each with its pause, snapshot and size reports), 50 complete restores (150
// members), the manager (re)started over them. It reports the manager's own heap (in use after
// a GC, above the test's before the start) and the process's RSS growth, how long until every
// controller is idle, and each controller's reconciles with their p50, p99 and how many took
// over 100 ms. It asserts nothing of the figures: they are measurements (run it on a quiet
// machine). FEDBR_SCALE_SCHEDULES and FEDBR_SCALE_PER_SCHEDULE change the size.
func TestScale(t *testing.T) {
	if os.Getenv("FEDBR_SCALE") == "" {
		t.Skip("a measurement: FEDBR_SCALE=1 (make bench-scale-manager)")
	}
	schedules, perSchedule, restores := envInt("FEDBR_SCALE_SCHEDULES", 100), envInt("FEDBR_SCALE_PER_SCHEDULE", 10), 50
	ctx := context.Background()
	dp3, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp3.Stop() })
	planes := map[string]*testenv.Env{"dp1": shared.dp1, "dp2": shared.dp2, "dp3": dp3}
	names := []string{"dp1", "dp2", "dp3"}
	c := shared.control.Client
	ensureNamespace(t, c, "scale")
	for _, e := range planes {
		ensureNamespace(t, e.Client, "tidb")
	}

	started := time.Now()
	now := time.Now().UTC().Truncate(time.Second)
	for s := range schedules {
		sname := fmt.Sprintf("s%03d", s)
		max := int32(perSchedule)
		sc := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: sname, Namespace: "scale"},
			Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "0 0 1 1 *", MaxBackups: &max, BackupTemplate: scaleBackup("x", names).Spec}}
		if err := c.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
		for j := range perSchedule {
			b := scaleBackup(fmt.Sprintf("%s-b%02d", sname, j), names)
			b.Namespace = "scale"
			b.Labels = map[string]string{volumebackupschedule.ScheduleLabel: sname}
			b.Annotations = map[string]string{volumebackupschedule.ScheduledAnnotation: now.Add(-time.Duration(perSchedule-j) * time.Hour).Format(time.RFC3339)}
			completeBackup(t, ctx, b, planes, names, now)
		}
	}
	for r := range restores {
		completeRestore(t, ctx, fmt.Sprintf("r%02d", r), planes, names, now)
	}
	t.Logf("populated %d schedules, %d backups, %d backup members, %d restores in %s", schedules, schedules*perSchedule,
		schedules*perSchedule*len(names), restores, time.Since(started).Round(time.Second))

	heapBefore, rssBefore := heapInUse(), rss(t)
	startedManager := time.Now()
	runManager(t, planes, nil, logr.Discard()) // a log line per action would be what is measured
	idle := waitIdle(t)
	heapAfter, rssAfter := heapInUse(), rss(t)
	var b strings.Builder
	fmt.Fprintf(&b, "manager over %d backups (%d members), %d schedules, %d restores (%d members), %d planes:\n",
		schedules*perSchedule, schedules*perSchedule*len(names), schedules, restores, restores*len(names), len(names))
	fmt.Fprintf(&b, "  idle %s after its start; heap in use +%.0f MiB, RSS +%.0f MiB (peak RSS of the test process %.0f MiB)\n",
		idle.Sub(startedManager).Round(100*time.Millisecond), float64(heapAfter-heapBefore)/(1<<20), float64(rssAfter-rssBefore)/(1<<20), float64(peakRSS(t))/(1<<20))
	fmt.Fprintf(&b, "  %-22s %10s %10s %10s %12s\n", "controller", "reconciles", "p50", "p99", "over 100 ms")
	for _, row := range reconcileTimes(t) {
		fmt.Fprintf(&b, "  %-22s %10d %10s %10s %12d\n", row.controller, row.count, row.p50, row.p99, row.over100ms)
	}
	t.Log(b.String())
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func scaleBackup(name string, planes []string) *fedv1alpha1.VolumeBackup {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale"}}
	for _, p := range planes {
		b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb"})
	}
	b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "scale/" + name}}
	return b
}

// snapshotResult is a snapshot step's result of n volumes, as long as a real one.
func snapshotResult(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"backupID":"b","resolvedTS":470802380936708097,"snapshots":[`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"storeID":%d,"volumeID":"vol-%017x","snapshotID":"snap-%017x","device":"/dev/xvdb","sizeGiB":1000,"startedAt":"2026-12-01T10:00:00Z","completedAt":"2026-12-01T10:20:00Z"}`, i+1, i, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// completeBackup creates b and a member per plane, every one of them complete as the agents and
// the manager leave them.
func completeBackup(t *testing.T, ctx context.Context, b *fedv1alpha1.VolumeBackup, planes map[string]*testenv.Env, names []string, now time.Time) {
	t.Helper()
	c := shared.control.Client
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	const ts = "470802380936708097"
	mt := metav1.NewMicroTime(now.Add(-30 * time.Minute))
	for _, p := range names {
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: federation.NewMeta(b, fedv1alpha1.MemberName(b.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: b.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.BackupMemberTeardown, BackupTS: ts, Template: b.Spec.Template}}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = dpv1alpha1.VolumeBackupMemberStatus{Phase: "Complete", CommitTs: ts, BackupPath: "s3://backups/scale/" + b.Name + "-" + p,
			SnapshotsTotal: 10, SnapshotsCompleted: 10, BackupSize: 10 << 40, IncrementalBackupSize: 1 << 40,
			TimeStarted: &metav1.Time{Time: now.Add(-time.Hour)}, TimeCompleted: &metav1.Time{Time: now.Add(-30 * time.Minute)},
			Steps: []dpv1alpha1.StepReport{
				{Name: dpv1alpha1.StepPause, Phase: dpv1alpha1.PausePhaseStopped, BackupTS: 470802380936708097, GCPausedAt: &mt, LiftedAt: &mt},
				{Name: dpv1alpha1.StepSnapshot, Phase: "Completed", BackupTS: 470802380936708097, StartedAt: &mt, CompletedAt: &mt, Done: 10, Total: 10,
					Result: &k8sruntime.RawExtension{Raw: snapshotResult(10)}},
				{Name: dpv1alpha1.StepSize, Phase: "Completed", Sized: 10, SizedBytes: 10 << 40, Result: &k8sruntime.RawExtension{Raw: []byte(`{"backupSize":10995116277760}`)}},
			}}
		for _, ct := range []string{dpv1alpha1.BackupMemberArmedCondition, dpv1alpha1.BackupMemberInitializedCondition, dpv1alpha1.BackupMemberSnapshotsCreatedCondition,
			dpv1alpha1.BackupMemberGCResumedCondition, dpv1alpha1.BackupMemberCompleteCondition, dpv1alpha1.BackupMemberSizedCondition} {
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: ct, Status: metav1.ConditionTrue, Reason: "Scale", Message: "as the agent leaves it",
				LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Minute))})
		}
		if err := planes[p].Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// completeRestore creates a complete VolumeRestore and its members (restored into the
// namespace of its name in every plane).
func completeRestore(t *testing.T, ctx context.Context, name string, planes map[string]*testenv.Env, names []string, now time.Time) {
	t.Helper()
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale"}}
	for _, p := range names {
		r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "scale/s000-b00-" + p}}})
	}
	if err := shared.control.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	const ts = "470802380936708097"
	for i, p := range names {
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: federation.NewMeta(r, fedv1alpha1.MemberName(r.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: r.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.RestoreMemberRestoreFinish, Backup: r.Spec.Clusters[i].Backup, DataMember: i == 0}}
		if i == 0 {
			m.Spec.ResolvedTS = ts
		}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = dpv1alpha1.VolumeRestoreMemberStatus{Phase: "Complete", CommitTs: ts, VolumesTotal: 10, VolumesReady: 10,
			TimeStarted: &metav1.Time{Time: now.Add(-time.Hour)}, TimeCompleted: &metav1.Time{Time: now.Add(-30 * time.Minute)},
			Steps: []dpv1alpha1.StepReport{{Name: dpv1alpha1.StepRestoreVolumes, Phase: "Completed", Done: 10, Total: 10,
				Result: &k8sruntime.RawExtension{Raw: snapshotResult(10)}}}}
		conds := []string{dpv1alpha1.RestoreMemberTargetCheckedCondition, dpv1alpha1.RestoreMemberVolumeCompleteCondition,
			dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberCompleteCondition}
		if i == 0 {
			m.Status.RestoredTS = ts
			conds = append(conds, dpv1alpha1.RestoreMemberDataCompleteCondition)
		}
		for _, ct := range conds {
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: ct, Status: metav1.ConditionTrue, Reason: "Scale", Message: "as the agent leaves it",
				LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Minute))})
		}
		if err := planes[p].Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// waitIdle waits until the manager's controllers have reconciled something and then nothing
// for 5 s with empty queues, and returns when they last were busy.
func waitIdle(t *testing.T) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	last, lastChange := -1.0, time.Now()
	for time.Now().Before(deadline) {
		total, depth := 0.0, 0.0
		for _, f := range gather(t) {
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				for _, m := range f.GetMetric() {
					total += m.GetCounter().GetValue()
				}
			case "workqueue_depth":
				for _, m := range f.GetMetric() {
					depth += m.GetGauge().GetValue()
				}
			}
		}
		if total != last || depth > 0 {
			last, lastChange = total, time.Now()
		} else if total > 0 && time.Since(lastChange) > 5*time.Second {
			return lastChange
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the manager's controllers did not become idle within 10 minutes")
	return time.Time{}
}

func gather(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	fs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

type reconcileRow struct {
	controller string
	count      uint64
	p50, p99   string
	over100ms  uint64
}

// reconcileTimes reads every controller's reconcile-time histogram: its count, the bucket
// bounds its 50th and 99th percentiles fall in, and how many took over 100 ms.
func reconcileTimes(t *testing.T) []reconcileRow {
	t.Helper()
	var rows []reconcileRow
	for _, f := range gather(t) {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			row := reconcileRow{}
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					row.controller = l.GetValue()
				}
			}
			h := m.GetHistogram()
			row.count = h.GetSampleCount()
			if row.count == 0 {
				continue
			}
			row.p50, row.p99 = "> max", "> max"
			var at100 uint64
			for _, bk := range h.GetBucket() {
				if bk.GetUpperBound() <= 0.1 {
					at100 = bk.GetCumulativeCount()
				}
				if row.p50 == "> max" && float64(bk.GetCumulativeCount()) >= 0.5*float64(row.count) {
					row.p50 = "≤ " + bound(bk.GetUpperBound())
				}
				if row.p99 == "> max" && float64(bk.GetCumulativeCount()) >= math.Ceil(0.99*float64(row.count)) {
					row.p99 = "≤ " + bound(bk.GetUpperBound())
				}
			}
			row.over100ms = row.count - at100
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].controller < rows[j].controller })
	return rows
}

func bound(s float64) string { return (time.Duration(s * float64(time.Second))).String() }

// heapInUse is the Go heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rss and peakRSS read the process's resident set now and at its peak (/proc/self/status).
func rss(t *testing.T) uint64     { return procStatus(t, "VmRSS:") }
func peakRSS(t *testing.T) uint64 { return procStatus(t, "VmHWM:") }

func procStatus(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
