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
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/controller/volumebackup"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/controller/volumerestore"
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
		var backups []fedv1alpha1.VolumeBackup
		for j := range perSchedule {
			b := scaleBackup(fmt.Sprintf("%s-b%02d", sname, j), names)
			b.Namespace = "scale"
			b.Labels = map[string]string{volumebackupschedule.ScheduleLabel: sname}
			b.Annotations = map[string]string{volumebackupschedule.ScheduledAnnotation: now.Add(-time.Duration(perSchedule-j) * time.Hour).Format(time.RFC3339)}
			completeBackup(t, ctx, b, planes, names, now)
			backups = append(backups, *b)
		}
		// Its status as the manager leaves it over those backups.
		res := volumebackupschedule.Plan(volumebackupschedule.Observe(sc, backups, nil), now)
		if res.Create != "" || res.Delete != "" {
			t.Fatalf("schedule %s: the planner would create %q and delete %q", sname, res.Create, res.Delete)
		}
		sc.Status = res.Status
		if err := c.Status().Update(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for r := range restores {
		completeRestore(t, ctx, fmt.Sprintf("r%02d", r), planes, names, now)
	}
	t.Logf("populated %d schedules, %d backups, %d backup members, %d restores in %s", schedules, schedules*perSchedule,
		schedules*perSchedule*len(names), restores, time.Since(started).Round(time.Second))

	versions := objectVersions(t, ctx, planes)
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
	written := map[string]int{}
	for k, v := range objectVersions(t, ctx, planes) {
		if versions[k] != v {
			written[strings.SplitN(k, " ", 2)[0]]++
		}
	}
	fmt.Fprintf(&b, "  objects the manager wrote (resourceVersion changed): %v\n", written)
	t.Log(b.String())
}

// objectVersions is the resourceVersion of every object the manager may write, by "kind
// plane/namespace/name".
func objectVersions(t *testing.T, ctx context.Context, planes map[string]*testenv.Env) map[string]string {
	t.Helper()
	out := map[string]string{}
	read := func(c client.Client, where string, list client.ObjectList) {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
		kind = kind[strings.LastIndex(kind, ".")+1:]
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			co := o.(client.Object)
			out[kind+" "+where+"/"+co.GetNamespace()+"/"+co.GetName()] = co.GetResourceVersion()
			return nil
		})
	}
	read(shared.control.Client, "control", &fedv1alpha1.VolumeBackupList{})
	read(shared.control.Client, "control", &fedv1alpha1.VolumeBackupScheduleList{})
	read(shared.control.Client, "control", &fedv1alpha1.VolumeRestoreList{})
	for name, e := range planes {
		read(e.Client, name, &dpv1alpha1.VolumeBackupMemberList{})
		read(e.Client, name, &dpv1alpha1.VolumeRestoreMemberList{})
	}
	return out
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

// completeBackup creates b and a member per plane as a complete backup is left by the manager
// and the agents: the members' statuses complete, their specs and the backup's status what the
// manager's planner makes of those statuses (settleBackup), its finalizer on. A restarted
// manager then finds nothing to do, as after months of schedules.
func completeBackup(t *testing.T, ctx context.Context, b *fedv1alpha1.VolumeBackup, planes map[string]*testenv.Env, names []string, now time.Time) {
	t.Helper()
	c := shared.control.Client
	b.Finalizers = []string{volumebackup.Finalizer}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	members := map[string]volumebackup.Member{}
	for _, p := range names {
		members[p] = volumebackup.Member{Exists: true, Phase: dpv1alpha1.BackupMemberTeardown, BackupTS: testenv.ScaleTS,
			PhaseSince: now.Add(-time.Hour), Status: testenv.CompleteBackupMemberStatus("s3://backups/scale/"+b.Name+"-"+p, now)}
	}
	settleBackup(t, b, members, names, now)
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, p := range names {
		mm := members[p]
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: federation.NewMeta(b, fedv1alpha1.MemberName(b.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: b.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: mm.Phase, BackupTS: mm.BackupTS, StartPause: mm.StartPause, ResumeGC: mm.ResumeGC, Template: b.Spec.Template}}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = mm.Status
		if err := planes[p].Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// completeRestore creates a VolumeRestore (restored into namespace tidb of every plane) and its
// members as a complete restore is left: members complete, their specs and the restore's status
// what the manager's planner makes of them (settleRestore), its finalizer on.
func completeRestore(t *testing.T, ctx context.Context, name string, planes map[string]*testenv.Env, names []string, now time.Time) {
	t.Helper()
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale", Finalizers: []string{volumerestore.Finalizer}}}
	for _, p := range names {
		r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "scale/s000-b00-" + p}}})
	}
	if err := shared.control.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	members := map[string]volumerestore.Member{}
	for i, p := range names {
		m := volumerestore.Member{Exists: true, Phase: dpv1alpha1.RestoreMemberRestoreFinish, DataMember: i == 0,
			PhaseSince: now.Add(-time.Hour), Status: testenv.CompleteRestoreMemberStatus(i == 0, now)}
		if i == 0 {
			m.ResolvedTS = testenv.ScaleTS
		}
		members[p] = m
	}
	settleRestore(t, r, members, names, now)
	if err := shared.control.Client.Status().Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	for i, p := range names {
		mm := members[p]
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: federation.NewMeta(r, fedv1alpha1.MemberName(r.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: r.Name, K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
				Phase: mm.Phase, Backup: r.Spec.Clusters[i].Backup, DataMember: mm.DataMember, ResolvedTS: mm.ResolvedTS}}
		if err := planes[p].Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = mm.Status
		if err := planes[p].Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// settleBackup runs the manager's backup planner over complete members until it has nothing
// more to do, applying its actions to the members as the API servers would, and leaves the
// status it settles on in b.
func settleBackup(t *testing.T, b *fedv1alpha1.VolumeBackup, members map[string]volumebackup.Member, names []string, now time.Time) {
	t.Helper()
	settle(t, b.Name, func() bool {
		res := volumebackup.Plan(volumebackup.Observed{Backup: b, Members: members, Known: set(names), Reachable: set(names), Namespaces: []string{"tidb"}}, now)
		res.Status.ObservedGeneration = b.Generation
		changed := !equality.Semantic.DeepEqual(b.Status, res.Status)
		b.Status = res.Status
		for _, a := range res.Actions {
			m := members[a.Cluster]
			switch a.Kind {
			case volumebackup.SetPhase:
				m.Phase = a.Phase
			case volumebackup.StartPause:
				m.StartPause = true
			case volumebackup.ResumeGC:
				m.ResumeGC = true
			default:
				t.Fatalf("settling %s: the planner asks %s of %s", b.Name, a.Kind, a.Cluster)
			}
			members[a.Cluster] = m
		}
		return changed || len(res.Actions) > 0
	})
	if b.Status.Phase != fedv1alpha1.VolumeBackupComplete {
		t.Fatalf("settling %s: the planner settles on phase %s", b.Name, b.Status.Phase)
	}
}

// settleRestore is settleBackup's twin for a restore.
func settleRestore(t *testing.T, r *fedv1alpha1.VolumeRestore, members map[string]volumerestore.Member, names []string, now time.Time) {
	t.Helper()
	settle(t, r.Name, func() bool {
		res := volumerestore.Plan(volumerestore.Observed{Restore: r, Members: members, Known: set(names), Reachable: set(names), Namespaces: []string{"tidb"}}, now)
		res.Status.ObservedGeneration = r.Generation
		changed := !equality.Semantic.DeepEqual(r.Status, res.Status)
		r.Status = res.Status
		for _, a := range res.Actions {
			m := members[a.Cluster]
			switch a.Kind {
			case volumerestore.SetPhase:
				m.Phase = a.Phase
			case volumerestore.MarkDataMember:
				m.DataMember = true
			default:
				t.Fatalf("settling %s: the planner asks %s of %s", r.Name, a.Kind, a.Cluster)
			}
			members[a.Cluster] = m
		}
		return changed || len(res.Actions) > 0
	})
	if r.Status.Phase != fedv1alpha1.VolumeRestoreComplete {
		t.Fatalf("settling %s: the planner settles on phase %s", r.Name, r.Status.Phase)
	}
}

// settle runs step until it changes nothing (a planner settles within a few passes).
func settle(t *testing.T, name string, step func() (changed bool)) {
	t.Helper()
	for range 20 {
		if !step() {
			return
		}
	}
	t.Fatalf("settling %s: the planner does not settle in 20 passes", name)
}

func set(names []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}
