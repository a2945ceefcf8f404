// Package crash is the crash suite (issue 22): at each kill point of a backup or a restore —
// every phase transition, and inside the GC pause window — it SIGKILLs the manager, an agent or
// the step pod that is running (or stops a data plane's API server for 60 s) and lets the
// system go on; each must end Complete (a completed backup restores exactly) or Failed with a
// reason, no phase may move backwards, GC and PD scheduling must be lifted within the pause's
// TTL, and nothing may be left in the AWS double. Kill points are reached by observing the
// objects, never by sleeping. fedbr is installed through its charts (demo.Options.Install): a
// killed manager or agent is every replica of its Deployment, whose containers the lab's
// kubelet starts again after its restart back-off (10 s), and the restarted replicas then wait
// out the dead leader's Lease, as after a real crash.
//
// `make test` runs a rotating slice of the points chosen by seed (FEDBR_SEED, default the day of
// the year; labtest.Slice); `make test-long` and `make crash` run every point, and `make crash`
// prints the table that docs/testing.md records.
package crash

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/labtest"
)

// ciPoints is how many points a CI run takes.
const ciPoints = 2

type vb = fedv1alpha1.VolumeBackup
type vr = fedv1alpha1.VolumeRestore

func cond(cs []metav1.Condition, t string, s metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(cs, t)
	return c != nil && c.Status == s
}

func readyReason(b *vb, reason string) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupReadyCondition)
	return c != nil && c.Reason == reason
}

// inPause: the pause holds and not every snapshot has started (the points that use it hold
// CreateSnapshots in the AWS double until they strike, so the window waits for them).
func inPause(b *vb, _ *vr) bool {
	return b != nil && cond(b.Status.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionTrue) &&
		b.Status.Phase == fedv1alpha1.VolumeBackupRunning
}

func backupPhase(p fedv1alpha1.VolumeBackupPhase) func(*vb, *vr) bool {
	return func(b *vb, _ *vr) bool { return b != nil && b.Status.Phase == p }
}

func restorePhase(p fedv1alpha1.VolumeRestorePhase) func(*vb, *vr) bool {
	return func(_ *vb, r *vr) bool { return r != nil && r.Status.Phase == p }
}

// Points are every kill point of the suite.
var Points = []KillPoint{
	{Name: "manager, initializer chosen", Target: KillManager, MayFail: true,
		At: func(b *vb, _ *vr) bool { return b != nil && b.Status.Initializer != "" }},
	{Name: "agent of the initializer, arming", Target: KillAgent, Plane: 0, MayFail: true,
		At: func(b *vb, _ *vr) bool { return b != nil && readyReason(b, fedv1alpha1.VolumeBackupArmingReason) }},
	{Name: "armed snapshot step of plane 2", Target: KillStep, Plane: 1, Step: job.StepSnapshot, MayFail: true,
		At: func(b *vb, _ *vr) bool { return b != nil && readyReason(b, fedv1alpha1.VolumeBackupArmingReason) }},
	// GCPaused Unknown (asked, not yet held) lasts milliseconds now: the point holds every
	// CreateSnapshots, so that when a poll misses it the manager is killed inside the window
	// that follows, still after it asked for the pause.
	{Name: "manager, pause asked", Target: KillManager, MayFail: true, HoldSnapshots: true,
		At: func(b *vb, _ *vr) bool {
			return b != nil && (cond(b.Status.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition, metav1.ConditionUnknown) || inPause(b, nil))
		}},
	{Name: "manager, inside the GC pause window", Target: KillManager, MayFail: true, At: inPause, HoldSnapshots: true},
	{Name: "agent of the initializer, inside the GC pause window", Target: KillAgent, Plane: 0, MayFail: true, At: inPause, HoldSnapshots: true},
	{Name: "pause step, inside the GC pause window", Target: KillStep, Plane: 0, Step: job.StepPause, MayFail: true, At: inPause, HoldSnapshots: true},
	{Name: "snapshot step of plane 3, inside the GC pause window", Target: KillStep, Plane: 2, Step: job.StepSnapshot, MayFail: true, At: inPause, HoldSnapshots: true},
	{Name: "manager, snapshots created", Target: KillManager, MayFail: true, At: backupPhase(fedv1alpha1.VolumeBackupSnapshotsCreated)},
	{Name: "agent of plane 2, snapshots created", Target: KillAgent, Plane: 1, MayFail: true, At: backupPhase(fedv1alpha1.VolumeBackupSnapshotsCreated)},
	{Name: "snapshot step of plane 2, snapshots created", Target: KillStep, Plane: 1, Step: job.StepSnapshot, MayFail: true,
		At: backupPhase(fedv1alpha1.VolumeBackupSnapshotsCreated)},
	{Name: "manager, backup complete", Target: KillManager, MayFail: true, At: backupPhase(fedv1alpha1.VolumeBackupComplete)},
	{Name: "API server of plane 2 stopped 60 s, backup running", Target: StopAPIServer, Plane: 1, MayFail: true,
		At: func(b *vb, _ *vr) bool { return b != nil && b.Status.Initializer != "" }},
	{Name: "manager, restoring volumes", Restore: true, Target: KillManager, MayFail: true, At: restorePhase(fedv1alpha1.VolumeRestoreRunning)},
	{Name: "agent of plane 2, restoring volumes", Restore: true, Target: KillAgent, Plane: 1, MayFail: true, At: restorePhase(fedv1alpha1.VolumeRestoreRunning)},
	{Name: "restore-volumes step of plane 2", Restore: true, Target: KillStep, Plane: 1, Step: job.StepRestoreVolumes, MayFail: true,
		At: restorePhase(fedv1alpha1.VolumeRestoreRunning)},
	{Name: "manager, TiKV up", Restore: true, Target: KillManager, MayFail: true, At: restorePhase(fedv1alpha1.VolumeRestoreTikvComplete)},
	{Name: "restore-data step, TiKV up", Restore: true, Target: KillStep, Plane: -1, Step: job.StepRestoreData, MayFail: true,
		At: restorePhase(fedv1alpha1.VolumeRestoreTikvComplete)},
	{Name: "agent of plane 1, TiKV up", Restore: true, Target: KillAgent, Plane: 0, MayFail: true, At: restorePhase(fedv1alpha1.VolumeRestoreTikvComplete)},
	{Name: "manager, data complete", Restore: true, Target: KillManager, MayFail: true, At: restorePhase(fedv1alpha1.VolumeRestoreDataComplete)},
	// A drill (a scratch restore): its agents make the TidbClusters and its deletion removes
	// them; the crash must leave neither half made nor anything behind.
	{Name: "agent of plane 2, scratch restore making its TidbClusters", Restore: true, Scratch: true, Target: KillAgent, Plane: 1, MayFail: true,
		At: restorePhase(fedv1alpha1.VolumeRestoreRunning)},
	{Name: "manager, scratch restore with TiKV up", Restore: true, Scratch: true, Target: KillManager, MayFail: true,
		At: restorePhase(fedv1alpha1.VolumeRestoreTikvComplete)},
	{Name: "agent of plane 1, scratch restore being removed", Restore: true, Scratch: true, Teardown: true, Target: KillAgent, Plane: 0,
		At: restorePhase(fedv1alpha1.VolumeRestoreComplete)},
}

// choose returns the points of this run: those whose names contain one of FEDBR_CRASH_POINTS's
// comma-separated parts when set ("all": every point), else the slice of ciPoints points the
// seed picks (labtest.Slice; every point with FEDBR_LONG=1).
func choose(t *testing.T) []KillPoint {
	sel := os.Getenv("FEDBR_CRASH_POINTS")
	if sel == "all" {
		return Points
	}
	var names []string
	for _, p := range Points {
		names = append(names, p.Name)
	}
	if sel == "" {
		names = labtest.Slice(t, "test/crash", names, ciPoints)
	}
	var out []KillPoint
	for _, p := range Points {
		if sel == "" && slices.Contains(names, p.Name) || sel != "" && labtest.Selected(p.Name, sel) {
			out = append(out, p)
		}
	}
	return out
}

func TestCrashAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash suite runs a lab")
	}
	points := choose(t)
	if len(points) == 0 {
		t.Fatalf("FEDBR_CRASH_POINTS=%q names no point", os.Getenv("FEDBR_CRASH_POINTS"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Minute)
	defer cancel()
	l := labtest.Up(ctx, t)
	results, err := RunCrash(ctx, demo.Options{Lab: l, Timeout: 6 * time.Minute, Out: labtest.Log{T: t}, Install: true}, points)
	t.Logf("crash suite results:\n%s", CrashLog(results))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Point, r.Err)
		}
	}
	if len(results) != len(points) {
		t.Errorf("%d of %d points ran", len(results), len(points))
	}
}
