package volumebackup

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// written remembers the member specs this manager wrote that a plane's cache may not show yet.
// It is an optimisation only: without it, a reconcile started by another event before the cache
// caught up plans the same write again, which is harmless (the spec fields only turn on, and a
// phase move tests the member phase it was planned from, so a repeated one is refused
// and found done) but costs round trips while the backup's reconcile is busy with them: seen
// in the lab, a repeated move of one member took 1.3 s on the pause window's path, delaying
// ResumeGC by as much. TestPlanWithoutOverlayOnlyRepeatsWrites shows the plans agree.
// Overlaying is safe because every field only moves forward: phase never goes back, backupTS is
// set once, startPause, resumeGC and backupFailed are never unset.
type written struct {
	mu    sync.Mutex
	specs map[writtenKey]Member
}

// writtenKey is one member: the VolumeBackup's uid (a re-created backup's members are new
// objects) and the data plane.
type writtenKey struct {
	backup  types.UID
	cluster string
}

// record remembers what a successful spec write set.
func (w *written) record(b *fedv1alpha1.VolumeBackup, a Action, now time.Time) {
	var set Member
	switch a.Kind {
	case SetPhase:
		set = Member{Phase: a.Phase, BackupTS: a.BackupTS, PhaseSince: now}
	case StartPause:
		set = Member{StartPause: true}
	case ResumeGC:
		set = Member{ResumeGC: true}
	case MarkFailed:
		set = Member{BackupFailed: true}
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writtenKey{b.UID, a.Cluster}
	w.specs[k], _ = forward(w.specs[k], set)
}

// overlay returns the observed member with what this manager wrote to it on top, and forgets
// the write once the cache shows it.
func (w *written) overlay(b *fedv1alpha1.VolumeBackup, cluster string, m Member) Member {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writtenKey{b.UID, cluster}
	set, ok := w.specs[k]
	if !ok {
		return m
	}
	merged, changed := forward(m, set)
	if !changed {
		delete(w.specs, k)
	}
	return merged
}

// forward moves m's spec fields forward to set's where set is further along, and says whether
// anything changed.
func forward(m, set Member) (Member, bool) {
	out := m
	if phaseOrder[set.Phase] > phaseOrder[out.Phase] {
		out.Phase, out.PhaseSince = set.Phase, set.PhaseSince // the step timeout runs from the write
	}
	if out.BackupTS == "" {
		out.BackupTS = set.BackupTS
	}
	out.StartPause = out.StartPause || set.StartPause
	out.ResumeGC = out.ResumeGC || set.ResumeGC
	out.BackupFailed = out.BackupFailed || set.BackupFailed
	return out, out.Phase != m.Phase || out.BackupTS != m.BackupTS || out.StartPause != m.StartPause || out.ResumeGC != m.ResumeGC ||
		out.BackupFailed != m.BackupFailed
}
