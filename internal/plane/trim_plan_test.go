package plane_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/controller/volumebackup"
	"github.com/fedbr/fedbr/internal/controller/volumerestore"
	"github.com/fedbr/fedbr/internal/plane"
)

// The planners decide the same from a trimmed member as from the whole one: for random members
// (every field set, each condition of the kind present or not with any status, reason and
// message, each step present or not with any phase, ts and times) in backups and restores at
// every stage, Plan's result is the same with the members as the cache keeps them. A planner that
// starts reading a field the cache drops makes this fail (as does a trim that drops a field the
// planners read): the member is converted as observe converts it.

var (
	planNow = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	planes  = []string{"dp1", "dp2"}
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func randText(r *rand.Rand) string {
	return pick(r, "", "x", "some words", strings.Repeat("long ", 50))
}

func randTime(r *rand.Rand) *metav1.Time {
	if r.IntN(3) == 0 {
		return nil
	}
	t := metav1.NewTime(planNow.Add(-time.Duration(r.IntN(7200)) * time.Second))
	return &t
}

func randMicro(r *rand.Rand) *metav1.MicroTime {
	if r.IntN(2) == 0 {
		return nil
	}
	t := metav1.NewMicroTime(planNow.Add(-time.Duration(r.IntN(7200)) * time.Second))
	return &t
}

func randRaw(r *rand.Rand) *runtime.RawExtension {
	if r.IntN(2) == 0 {
		return nil
	}
	return &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"resolvedTS":%d,"pad":%q}`, r.IntN(2000), randText(r)))}
}

// randMeta is a member's metadata: owned by owner (or, rarely, by another uid), with a step clock
// in any form, and labels and annotations of its own.
func randMeta(r *rand.Rand, owner client.Object) metav1.ObjectMeta {
	m := federation.NewMeta(owner, fedv1alpha1.MemberName(owner.GetName()), "tidb", planNow.Add(-time.Duration(r.IntN(7200))*time.Second))
	since := m.Annotations[dpv1alpha1.AnnotationPhaseSince]
	m.Annotations[dpv1alpha1.AnnotationPhaseSince] = pick(r, since, "", "not a time",
		strings.Replace(since, "Z", "."+strings.Repeat("0", 1000)+"1Z", 1), strings.Replace(since, "Z", "+05:30", 1))
	if r.IntN(4) == 0 {
		delete(m.Annotations, dpv1alpha1.AnnotationPhaseSince)
	}
	m.Labels["team"], m.Annotations["note"] = randText(r), randText(r)
	if r.IntN(20) == 0 {
		m.Labels[dpv1alpha1.LabelOwnerUID] = "someone-else"
	}
	m.UID, m.ResourceVersion, m.Generation = "member-uid", "42", int64(r.IntN(5))
	m.Finalizers = []string{"dataplane.fedbr.io/agent"}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "fedbr-agent", Operation: metav1.ManagedFieldsOperationUpdate}}
	return m
}

func randConditions(r *rand.Rand, types []string, reasons []string) []metav1.Condition {
	var cs []metav1.Condition
	for _, t := range append(types, "Unknown"+fmt.Sprint(r.IntN(3))) {
		if r.IntN(2) == 0 {
			continue
		}
		cs = append(cs, metav1.Condition{Type: t, Status: pick(r, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown),
			Reason: pick(r, append(reasons, "Other")...), Message: randText(r), ObservedGeneration: int64(r.IntN(3)),
			LastTransitionTime: *randTimeNonNil(r)})
	}
	return cs
}

func randTimeNonNil(r *rand.Rand) *metav1.Time {
	t := metav1.NewTime(planNow.Add(-time.Duration(r.IntN(7200)) * time.Second))
	return &t
}

func randSteps(r *rand.Rand, names ...string) []dpv1alpha1.StepReport {
	var steps []dpv1alpha1.StepReport
	for _, n := range names {
		if r.IntN(2) == 0 {
			continue
		}
		steps = append(steps, dpv1alpha1.StepReport{Name: n,
			Phase:    pick(r, "", "Starting", "Armed", "Ready", "Stopping", "Stopped", "Started", "Completed", "Failed"),
			Error:    randText(r),
			BackupTS: pick(r, uint64(0), 900, 1000), ResolvedTS: pick(r, uint64(0), 900), Attempt: int32(r.IntN(3)), Regions: int32(r.IntN(3)), Stores: int32(r.IntN(3)),
			Since: randMicro(r), GCPausedAt: randMicro(r), LiftedAt: randMicro(r), ReadyAt: randMicro(r), BackupTSAt: randMicro(r),
			StartedAt: randMicro(r), CompletedAt: randMicro(r), SlowestStartSeconds: r.Float64(), Sized: int32(r.IntN(3)), SizedBytes: int64(r.IntN(1e6)),
			Done: int64(r.IntN(10)), Total: int64(r.IntN(10)), Percent: r.Float64(), Deleted: int32(r.IntN(3)), Volumes: int32(r.IntN(3)),
			ServiceSafePoint: randText(r), PausedSchedulers: []string{randText(r)},
			ScheduleConfig: []dpv1alpha1.ScheduleConfigItem{{Key: "schedule.x", Original: "1", Paused: "0"}},
			Backup:         randRaw(r), Result: randRaw(r)})
	}
	return steps
}

func randBackupMember(r *rand.Rand, b *fedv1alpha1.VolumeBackup, cluster string) *dpv1alpha1.VolumeBackupMember {
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: randMeta(r, b), Spec: dpv1alpha1.VolumeBackupMemberSpec{
		VolumeBackup: b.Name, K8sClusterName: cluster, TCName: "basic", TCNamespace: "tidb",
		Phase:    pick(r, dpv1alpha1.BackupMemberInitialize, dpv1alpha1.BackupMemberExecute, dpv1alpha1.BackupMemberTeardown),
		BackupTS: pick(r, "", "1000", "900"), StartPause: r.IntN(2) == 0, ResumeGC: r.IntN(2) == 0, BackupFailed: r.IntN(4) == 0,
		Template: b.Spec.Template}}
	m.Status = dpv1alpha1.VolumeBackupMemberStatus{ObservedGeneration: int64(r.IntN(3)),
		Phase:      pick(r, "", "Running", "Complete", "Failed"),
		BackupPath: pick(r, "", "s3://backups/nightly-"+cluster), CommitTs: pick(r, "", "900", "1000", "junk"),
		SnapshotsTotal: int32(r.IntN(4)), SnapshotsCompleted: int32(r.IntN(4)), BackupSize: int64(r.IntN(1e6)), IncrementalBackupSize: int64(r.IntN(1e6)),
		TimeStarted: randTime(r), TimeCompleted: randTime(r), CleanAttempts: int32(r.IntN(3)), TiKVVolumes: []string{"vol-1", "vol-2"},
		Conditions: randConditions(r, []string{dpv1alpha1.BackupMemberInitializedCondition, dpv1alpha1.BackupMemberArmedCondition,
			dpv1alpha1.BackupMemberSnapshotsCreatedCondition, dpv1alpha1.BackupMemberGCResumedCondition, dpv1alpha1.BackupMemberCompleteCondition,
			dpv1alpha1.BackupMemberFailedCondition, dpv1alpha1.BackupMemberSizedCondition, dpv1alpha1.BackupMemberCleanedCondition},
			[]string{dpv1alpha1.BackupMemberCleanFailedReason, dpv1alpha1.BackupMemberCleanGaveUpReason}),
		Steps: randSteps(r, dpv1alpha1.StepPause, dpv1alpha1.StepSnapshot, dpv1alpha1.StepClean, dpv1alpha1.StepSize, dpv1alpha1.StepLift, "other"),
	}
	return m
}

// backupMemberOf is volumebackup's observe: what it copies of a member into Plan's Member.
func backupMemberOf(m *dpv1alpha1.VolumeBackupMember) volumebackup.Member {
	return volumebackup.Member{Exists: true, Phase: m.Spec.Phase, BackupTS: m.Spec.BackupTS, StartPause: m.Spec.StartPause,
		ResumeGC: m.Spec.ResumeGC, BackupFailed: m.Spec.BackupFailed, PhaseSince: federation.PhaseSince(m), Status: m.Status}
}

// backupStages are VolumeBackups at every stage the planner tells apart.
func backupStages() []*fedv1alpha1.VolumeBackup {
	base := func(name string) *fedv1alpha1.VolumeBackup {
		b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "backup-uid",
			CreationTimestamp: metav1.NewTime(planNow.Add(-time.Hour))}}
		for _, p := range planes {
			b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb"})
		}
		b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: name}}
		return b
	}
	started := metav1.NewTime(planNow.Add(-10 * time.Minute))
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "Test", LastTransitionTime: started}
	}
	fresh := base("fresh")
	running := base("running")
	running.Status = fedv1alpha1.VolumeBackupStatus{TimeStarted: &started, Initializer: "dp1", Phase: fedv1alpha1.VolumeBackupRunning}
	pausing := base("pausing")
	pausing.Status = fedv1alpha1.VolumeBackupStatus{TimeStarted: &started, Initializer: "dp1", Phase: fedv1alpha1.VolumeBackupRunning,
		Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionTrue)}}
	created := base("created")
	created.Status = fedv1alpha1.VolumeBackupStatus{TimeStarted: &started, Initializer: "dp2", Phase: fedv1alpha1.VolumeBackupSnapshotsCreated,
		Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionTrue), cond(fedv1alpha1.VolumeBackupSnapshotsCreatedCondition, metav1.ConditionTrue)}}
	complete := base("complete")
	complete.Status = fedv1alpha1.VolumeBackupStatus{TimeStarted: &started, Initializer: "dp1", Phase: fedv1alpha1.VolumeBackupComplete,
		Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionTrue), cond(fedv1alpha1.VolumeBackupCompleteCondition, metav1.ConditionTrue)}}
	failed := base("failed")
	failed.Status = fedv1alpha1.VolumeBackupStatus{TimeStarted: &started, Initializer: "dp1", Phase: fedv1alpha1.VolumeBackupFailed,
		Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeBackupFailedCondition, metav1.ConditionTrue)}}
	deleting := complete.DeepCopy()
	deleting.Name, deleting.DeletionTimestamp = "deleting", &started
	deletingPaused := pausing.DeepCopy()
	deletingPaused.Name, deletingPaused.DeletionTimestamp = "deleting-paused", &started
	return []*fedv1alpha1.VolumeBackup{fresh, running, pausing, created, complete, failed, deleting, deletingPaused}
}

func TestPlansAreTheSameFromTrimmedBackupMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 38))
	for _, b := range backupStages() {
		for i := range 400 {
			full := volumebackup.Observed{Backup: b, Members: map[string]volumebackup.Member{}, Known: map[string]bool{"dp1": true, "dp2": true},
				Reachable: map[string]bool{"dp1": true, "dp2": r.IntN(6) != 0}}
			trimmed := full
			trimmed.Members = map[string]volumebackup.Member{}
			var members []*dpv1alpha1.VolumeBackupMember
			for _, p := range planes {
				if r.IntN(8) == 0 {
					continue // not created yet
				}
				m := randBackupMember(r, b, p)
				members = append(members, m)
				full.Members[p] = backupMemberOf(m)
				trimmed.Members[p] = backupMemberOf(plane.TrimBackupMember(m.DeepCopy()))
			}
			want, got := volumebackup.Plan(full, planNow), volumebackup.Plan(trimmed, planNow)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("backup %s, sample %d: Plan differs from trimmed members (-whole +trimmed):\n%s\nmembers: %+v", b.Name, i, d, members)
			}
		}
	}
}

func randRestoreMember(r *rand.Rand, vr *fedv1alpha1.VolumeRestore, cluster string) *dpv1alpha1.VolumeRestoreMember {
	m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: randMeta(r, vr), Spec: dpv1alpha1.VolumeRestoreMemberSpec{
		VolumeRestore: vr.Name, K8sClusterName: cluster, TCName: "basic", TCNamespace: "tidb", AZName: "us-west-2a",
		Backup:     fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "nightly-" + cluster}},
		Phase:      pick(r, dpv1alpha1.RestoreMemberRestoreVolume, dpv1alpha1.RestoreMemberRestoreData, dpv1alpha1.RestoreMemberRestoreFinish),
		DataMember: r.IntN(3) == 0, ResolvedTS: pick(r, "", "400", "500"), Template: vr.Spec.Template}}
	m.Status = dpv1alpha1.VolumeRestoreMemberStatus{ObservedGeneration: int64(r.IntN(3)),
		Phase:    pick(r, "", "Running", "Complete", "Failed"),
		CommitTs: pick(r, "", "400", "500", "junk"), RestoredTS: pick(r, "", "400", "500", "junk"), VolumesTotal: int32(r.IntN(4)), VolumesReady: int32(r.IntN(4)),
		TimeStarted: randTime(r), TimeCompleted: randTime(r),
		Conditions: randConditions(r, []string{dpv1alpha1.RestoreMemberTargetCheckedCondition, dpv1alpha1.RestoreMemberVolumeCompleteCondition,
			dpv1alpha1.RestoreMemberWarmUpStartedCondition, dpv1alpha1.RestoreMemberWarmUpCompleteCondition, dpv1alpha1.RestoreMemberTikvCompleteCondition,
			dpv1alpha1.RestoreMemberDataCompleteCondition, dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberFailedCondition,
			dpv1alpha1.RestoreMemberVolumesCleanedCondition},
			[]string{dpv1alpha1.RestoreMemberWarmUpFailedReason, dpv1alpha1.RestoreMemberWALCorruptedReason}),
		Steps: randSteps(r, dpv1alpha1.StepRestoreVolumes, dpv1alpha1.StepRestoreData, dpv1alpha1.StepWarmup+"-0"),
	}
	return m
}

// restoreMemberOf is volumerestore's observe: what it copies of a member into Plan's Member.
func restoreMemberOf(m *dpv1alpha1.VolumeRestoreMember) volumerestore.Member {
	return volumerestore.Member{Exists: true, Phase: m.Spec.Phase, DataMember: m.Spec.DataMember, ResolvedTS: m.Spec.ResolvedTS, PhaseSince: federation.PhaseSince(m), Status: m.Status}
}

// restoreStages are VolumeRestores at every stage the planner tells apart, with each warm-up.
func restoreStages() []*fedv1alpha1.VolumeRestore {
	var out []*fedv1alpha1.VolumeRestore
	started := metav1.NewTime(planNow.Add(-10 * time.Minute))
	for _, w := range []struct {
		mode     fedv1alpha1.RestoreWarmupMode
		strategy fedv1alpha1.RestoreWarmupStrategy
	}{{fedv1alpha1.RestoreWarmupNone, ""}, {fedv1alpha1.RestoreWarmupSync, ""}, {fedv1alpha1.RestoreWarmupAsync, ""},
		{fedv1alpha1.RestoreWarmupAsync, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly}} {
		for _, stage := range []string{"fresh", "running", "tikv", "data", "complete", "failed", "deleting"} {
			vr := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: stage, Namespace: "default", UID: "restore-uid"}}
			for _, p := range planes {
				vr.Spec.Clusters = append(vr.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb",
					Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "nightly-" + p}}})
			}
			vr.Spec.Template.Warmup, vr.Spec.Template.WarmupStrategy = w.mode, w.strategy
			cond := func(t string) metav1.Condition {
				return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: started}
			}
			switch stage {
			case "running":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreRunning}
			case "tikv":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreTikvComplete,
					Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeRestoreTikvCompleteCondition)}}
			case "data":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreDataComplete,
					Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeRestoreTikvCompleteCondition), cond(fedv1alpha1.VolumeRestoreDataCompleteCondition)}}
			case "complete":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreComplete,
					Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeRestoreCompleteCondition)}}
			case "failed":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreFailed,
					Conditions: []metav1.Condition{cond(fedv1alpha1.VolumeRestoreFailedCondition)}}
			case "deleting":
				vr.Status = fedv1alpha1.VolumeRestoreStatus{TimeStarted: &started, Phase: fedv1alpha1.VolumeRestoreRunning}
				vr.DeletionTimestamp = &started
			}
			out = append(out, vr)
		}
	}
	return out
}

func TestPlansAreTheSameFromTrimmedRestoreMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 38))
	for _, vr := range restoreStages() {
		for i := range 200 {
			full := volumerestore.Observed{Restore: vr, Members: map[string]volumerestore.Member{}, Known: map[string]bool{"dp1": true, "dp2": true},
				Reachable: map[string]bool{"dp1": true, "dp2": r.IntN(6) != 0}}
			trimmed := full
			trimmed.Members = map[string]volumerestore.Member{}
			var members []*dpv1alpha1.VolumeRestoreMember
			for _, p := range planes {
				if r.IntN(8) == 0 {
					continue
				}
				m := randRestoreMember(r, vr, p)
				members = append(members, m)
				full.Members[p] = restoreMemberOf(m)
				trimmed.Members[p] = restoreMemberOf(plane.TrimRestoreMember(m.DeepCopy()))
			}
			want, got := volumerestore.Plan(full, planNow), volumerestore.Plan(trimmed, planNow)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("restore %s (warm-up %q %q), sample %d: Plan differs from trimmed members (-whole +trimmed):\n%s\nmembers: %+v",
					vr.Name, vr.Spec.Template.Warmup, vr.Spec.Template.WarmupStrategy, i, d, members)
			}
		}
	}
}
