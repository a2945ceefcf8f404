package volumebackup

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestWrittenOverlaysUntilTheCacheCatchesUp: a member write this manager made shows in the
// observation while the cache is stale, never moves a field backwards, and is forgotten once
// the cache shows it.
func TestWrittenOverlaysUntilTheCacheCatchesUp(t *testing.T) {
	w := &written{specs: map[writtenKey]Member{}}
	b := &fedv1alpha1.VolumeBackup{}
	b.UID = types.UID("b-1")
	other := &fedv1alpha1.VolumeBackup{}
	other.UID = types.UID("b-2")
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	w.record(b, Action{Kind: SetPhase, Cluster: "az1", Phase: exec, BackupTS: "100"}, at)
	w.record(b, Action{Kind: ResumeGC, Cluster: "az1"}, at)
	w.record(b, Action{Kind: CreateMember, Cluster: "az2", Phase: exec}, at) // creations are not overlaid

	stale := member(init_)
	got := w.overlay(b, "az1", stale)
	if got.Phase != exec || got.BackupTS != "100" || !got.ResumeGC || !got.PhaseSince.Equal(at) {
		t.Fatalf("stale cache overlaid = %+v, want execute at ts 100, resumeGC, phase since the write", got)
	}
	if got := w.overlay(other, "az1", stale); got.Phase != init_ || got.ResumeGC {
		t.Errorf("another backup's member got this one's writes: %+v", got)
	}
	if got := w.overlay(b, "az2", armed()); got.Phase != exec || got.BackupTS != "" || got.StartPause || got.ResumeGC {
		t.Errorf("a member never written to changed: %+v", got)
	}

	further := member(tear)
	further.ResumeGC = true
	if got := w.overlay(b, "az1", further); got.Phase != tear || got.BackupTS != "100" {
		t.Errorf("a cache further along went back: %+v", got)
	}
	if len(w.specs) != 0 {
		t.Errorf("the write was not forgotten once the cache showed it: %v", w.specs)
	}
}
