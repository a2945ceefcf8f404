package manager

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestScale measures the manager after months of schedules (FEDBR_SCALE=1; `make
// bench-scale-controllers`): 100 schedules of 10 complete backups each over 3 data planes (3,000
// backup members, each with its pause, snapshot and size reports), 50 complete restores (150
// members), the manager (re)started over them. It reports the manager's own heap (in use after
// a GC, above the test's before the start) and the process's RSS growth, how long until every
// controller is idle, and each controller's reconciles with their p50, p99 and how many took
// over 100 ms. It asserts nothing of the figures: they are measurements (run it on a quiet
// machine). FEDBR_SCALE_SCHEDULES and FEDBR_SCALE_PER_SCHEDULE change the size.
func TestScale(t *testing.T) {
	if os.Getenv("FEDBR_SCALE") == "" {
		t.Skip("a measurement: FEDBR_SCALE=1 (make bench-scale-controllers)")
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

	heapBefore, rssBefore := testenv.HeapInUse(), testenv.RSS(t)
	startedManager := time.Now()
	runManager(t, planes, nil, logr.Discard()) // a log line per action would be what is measured
	idle := testenv.WaitIdle(t)
	heapAfter, rssAfter := testenv.HeapInUse(), testenv.RSS(t)
	var b strings.Builder
	fmt.Fprintf(&b, "manager over %d backups (%d members), %d schedules, %d restores (%d members), %d planes:\n",
		schedules*perSchedule, schedules*perSchedule*len(names), schedules, restores, restores*len(names), len(names))
	fmt.Fprintf(&b, "  idle %s after its start; heap in use +%.0f MiB, RSS +%.0f MiB (peak RSS of the test process %.0f MiB)\n",
		idle.Sub(startedManager).Round(100*time.Millisecond), float64(heapAfter-heapBefore)/(1<<20), float64(rssAfter-rssBefore)/(1<<20), float64(testenv.PeakRSS(t))/(1<<20))
	b.WriteString(testenv.ReconcileTable(t))
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

// completeBackup creates b and a member per plane, every one of them complete as the agents and
// the manager leave them.
func completeBackup(t *testing.T, ctx context.Context, b *fedv1alpha1.VolumeBackup, planes map[string]*testenv.Env, names []string, now time.Time) {
	t.Helper()
	c := shared.control.Client
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, p := range names {
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: federation.NewMeta(b, fedv1alpha1.MemberName(b.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: b.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.BackupMemberTeardown, BackupTS: testenv.ScaleTS, Template: b.Spec.Template}}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = testenv.CompleteBackupMemberStatus("s3://backups/scale/"+b.Name+"-"+p, now)
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
	for i, p := range names {
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: federation.NewMeta(r, fedv1alpha1.MemberName(r.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: r.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.RestoreMemberRestoreFinish, Backup: r.Spec.Clusters[i].Backup, DataMember: i == 0}}
		if i == 0 {
			m.Spec.ResolvedTS = testenv.ScaleTS
		}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = testenv.CompleteRestoreMemberStatus(i == 0, now)
		if err := planes[p].Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}
