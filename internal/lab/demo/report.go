package demo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/tidb"
)

// WarmupPod is one warm-up pod (Started: its container's start) and the TiKV pod of its
// member's ordinal at the end of the restore: whether it replaced the pods seen in recovery
// mode, and when it last became ready. Both times are the kubelets', in whole seconds, so
// their order is kept.
type WarmupPod struct {
	Plane, Pod, TiKVPod string
	Started, TiKVReady  time.Time
	TiKVFresh           bool
	// RecoveryPods is how many TiKV pods of the plane the demo saw in recovery mode (TiKVFresh
	// says nothing when it saw none).
	RecoveryPods int
}

// Step is one line of the timeline.
type Step struct {
	Name       string
	Start, End time.Time
}

// Report is what a demo measured.
type Report struct {
	Backup  *fedv1alpha1.VolumeBackup
	Restore *fedv1alpha1.VolumeRestore
	// Timeline lists each phase's start and end.
	Timeline []Step
	// GCPause is the GC/PD pause window; SnapshotSkew the time between the first and the last
	// snapshot's start; SlowestCreateSnapshots the slowest call that started a snapshot set
	// (the window's physical floor).
	GCPause, SnapshotSkew, SlowestCreateSnapshots time.Duration
	// PauseBreakdown splits the GC pause window by what happened in it (steps' own clocks).
	PauseBreakdown []Step
	// WindowWrites are the writes of the backup's members the demo saw inside the GC pause
	// window (its watch of every plane's members against the pause's own clock: one machine).
	WindowWrites WindowWrites
	// InitializerWrites are the initializer's member's writes in the window, in order: each
	// one's time after the pause took hold and its writers.
	InitializerWrites []string
	// BackupWall is from creating the VolumeBackup to seeing it Complete (100 ms polls);
	// BackupWork the parts of it spent on PD, TiKV and the cloud (steps' own clocks).
	BackupWall time.Duration
	BackupWork []Step
	// OverheadHops splits the backup's wall time outside its work into the hops that make it,
	// each ending when the last data plane was seen past it (the demo's watches of members and
	// step pods, the pause's and AWS's own clocks: one machine).
	OverheadHops []Step
	// BeforePause is from creating the VolumeBackup to the pause pinning GC (the pause's
	// clock), AfterAWS from AWS completing the last snapshot to seeing the backup Complete:
	// the orchestration on either side of the backup's work (zero when a time is missing).
	BeforePause, AfterAWS time.Duration
	// SnapshotsSeenLate is from AWS completing the backup's last snapshot (its completionTime)
	// to the snapshot step that waited for it reporting completion: the wait's polling and the
	// step's completing of the backupmeta.
	SnapshotsSeenLate time.Duration
	// RestoreWall is from creating the VolumeRestore to seeing it Complete (100 ms polls);
	// RestoreWork the parts of it spent in the steps (their own clocks) and in the operator
	// starting TiKV (100 ms samples).
	RestoreWall time.Duration
	RestoreWork []Step
	// Snapshots is how many snapshots the backup took; BackupSize and IncrementalBackupSize
	// what the members sized them at after completion.
	Snapshots                         int
	BackupSize, IncrementalBackupSize int64
	// SelfReported is how many snapshot steps reported both their start and their completion
	// in their members' status.steps (the manager acts on those).
	SelfReported int
	// Bank is the workload's summary. CheckedTS is the ts the checker judged (the backup's
	// commit ts); TxnsBeforeCommitTS and TxnsAfterCommitTS the transfers the bank committed at or
	// before it (which the restored cluster must hold) and after it (which it must not), and
	// UnknownBeforeCommitTS those of unknown outcome at or before it (either way will do).
	Bank                                                         bank.Stats
	CheckedTS                                                    uint64
	TxnsBeforeCommitTS, TxnsAfterCommitTS, UnknownBeforeCommitTS int
	// Checker is "pass" or the first difference found.
	Checker string
	// HeldAfterBackup is what the source cluster still held once the backup completed.
	HeldAfterBackup tidb.Held
	// WarmupJobs is how many warm-up Jobs succeeded of WarmupJobsTotal, and Warmup the restore's
	// WarmUpComplete reason ("" without warm-up).
	WarmupJobs, WarmupJobsTotal int
	Warmup                      string
	// WarmupResults is how many warm-up Jobs reported their summary in their members' status.steps,
	// WarmupBytes the bytes they read in total.
	WarmupResults int
	WarmupBytes   int64
	// WarmupWALChecks is how many volumes had their RocksDB logs verified, over those results.
	WarmupWALChecks int
	// WarmupIn is each plane's warm-up Jobs' span (kubelet clock, whole seconds); TiKVHandedOver
	// when each plane's TidbCluster got the restored volumes (demo sample): a sync warm-up ends
	// before it, in each plane.
	WarmupIn       map[string]Step
	TiKVHandedOver map[string]time.Time
	// WarmupPods pairs every warm-up pod with the TiKV pod it warms up: an async one starts
	// after that TiKV pod, out of recovery mode, became ready.
	WarmupPods []WarmupPod
	// OrphanSnapshots and OrphanVolumes are counted after the backup was deleted.
	OrphanSnapshots, OrphanVolumes int
	// Described is what `fedbr describe backup`, `fedbr logs backup` (the snapshot step) and
	// `fedbr describe restore` printed once both completed, by those keys.
	Described map[string]string
	// StepPods counts, by step, the pods of the steps that dial PD or TiKV in the source and
	// restore namespaces once the restore was checked; StepPodsTLS those that carried --ca,
	// --cert and --key (all of them with Options.TLS, none without).
	StepPods, StepPodsTLS map[string]int
	// Err is the demo's outcome.
	Err error

	backupMembers, restoreMembers []memberRef
}

type memberRef struct{ cluster, uid string }

func (r *Report) add(name string, start, end *metav1.Time) {
	s := Step{Name: name}
	if start != nil {
		s.Start = start.Time
	}
	if end != nil {
		s.End = end.Time
	}
	r.Timeline = append(r.Timeline, s)
}

// PrintOptions choose what Print shows beyond the headline and the details.
type PrintOptions struct {
	// Instrumentation adds the project's own measurements: the pause window's breakdown, the
	// member writes inside it, the backup's overhead hop by hop, the snapshot steps' reports.
	Instrumentation bool
}

// Print writes the headline (Headline), the timeline and the measurements, and the result
// again last.
func (r *Report) Print(w io.Writer, o PrintOptions) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format+"\n", args...) }
	r.Headline(w)
	p("")
	p("timeline")
	var origin time.Time
	for _, s := range r.Timeline {
		if !s.Start.IsZero() && (origin.IsZero() || s.Start.Before(origin)) {
			origin = s.Start
		}
	}
	for _, s := range r.Timeline {
		p("  %-36s %s", s.Name, span(origin, s.Start, s.End))
	}
	p("GC and PD scheduling paused: %s", r.GCPause)
	if f := r.SlowestCreateSnapshots; f > 0 {
		p("  floor (slowest CreateSnapshots call) %s: window = %.1f × floor, floor + %s (target: floor + ≤ 1s)",
			f.Round(time.Millisecond), r.GCPause.Seconds()/f.Seconds(), (r.GCPause - f).Round(time.Millisecond))
	}
	if o.Instrumentation {
		r.printInstrumentation(p)
	}
	p("snapshots: %d, skew between the first and the last start: %s; sized after completion: full %d B, incremental %d B",
		r.Snapshots, r.SnapshotSkew.Round(time.Millisecond), r.BackupSize, r.IncrementalBackupSize)
	for _, o := range []struct {
		what string
		wall time.Duration
		work []Step
	}{{"backup", r.BackupWall, r.BackupWork}, {"restore", r.RestoreWall, r.RestoreWork}} {
		d, ok := overhead(o.wall, o.work)
		switch {
		case ok:
			p("%s orchestration overhead: %s (wall %s minus the work below)", o.what, d.Round(time.Millisecond), o.wall.Round(time.Millisecond))
		case o.wall > 0:
			p("%s orchestration overhead: not computable (a time below is missing)", o.what)
		default:
			continue
		}
		for _, s := range o.work {
			switch {
			case s.Start.IsZero() || s.End.IsZero():
				p("  %-48s missing (start %v, end %v)", s.Name, !s.Start.IsZero(), !s.End.IsZero())
			default:
				p("  %-48s %s", s.Name, s.End.Sub(s.Start).Round(time.Millisecond))
			}
		}
	}
	if r.Warmup != "" {
		p("warm-up of the restored volumes: %s, %d of %d Jobs succeeded, %d reported reading %d B and verifying the RocksDB logs of %d volumes", r.Warmup, r.WarmupJobs, r.WarmupJobsTotal,
			r.WarmupResults, r.WarmupBytes, r.WarmupWALChecks)
	}
	p("bank: %d transfers committed during the run, %d of unknown outcome; at the backup's commit ts %d: %d at or before it, %d after it, %d of unknown outcome at or before it",
		r.Bank.Committed, r.Bank.Unknown, r.CheckedTS, r.TxnsBeforeCommitTS, r.TxnsAfterCommitTS, r.UnknownBeforeCommitTS)
	p("checker: %s", r.Checker)
	if len(r.StepPods) > 0 {
		var parts []string
		for _, step := range slices.Sorted(maps.Keys(r.StepPods)) {
			parts = append(parts, fmt.Sprintf("%s %d/%d", step, r.StepPodsTLS[step], r.StepPods[step]))
		}
		p("step pods dialing PD/TiKV with --ca/--cert/--key: %s", strings.Join(parts, ", "))
	}
	p("left behind after deleting the backup: %d snapshots, %d volumes", r.OrphanSnapshots, r.OrphanVolumes)
	p("%s", r.result())
}

// printInstrumentation prints the project's hop-by-hop measurements of the backup.
func (r *Report) printInstrumentation(p func(string, ...any)) {
	for _, s := range r.PauseBreakdown {
		if !s.Start.IsZero() && !s.End.IsZero() {
			p("  %-40s %s", s.Name, s.End.Sub(s.Start).Round(time.Millisecond))
		}
	}
	if len(r.OverheadHops) > 0 {
		p("backup overhead, hop by hop (each until the last data plane was seen past it):")
		for _, s := range r.OverheadHops {
			if !s.Start.IsZero() && !s.End.IsZero() {
				p("  %-52s %s", s.Name, s.End.Sub(s.Start).Round(time.Millisecond))
			}
		}
	}
	if r.WindowWrites != nil {
		p("  member writes seen inside the window: %d: %s", r.WindowWrites.Total(""), r.WindowWrites)
		p("    the initializer's, from the pause taking hold: %s", strings.Join(r.InitializerWrites, ", "))
	}
	p("snapshot steps that told their members of start and completion themselves: %d of %d", r.SelfReported, len(r.backupMembers))
	if r.SnapshotsSeenLate != 0 {
		p("the last snapshot completed in AWS %s before its step reported it", r.SnapshotsSeenLate.Round(time.Millisecond))
	}
}

// result is the report's verdict line.
func (r *Report) result() string {
	if r.Err != nil {
		return fmt.Sprintf("RESULT: FAIL: %v", r.Err)
	}
	return "RESULT: PASS"
}

// Headline writes what ran and its outcome first, with the numbers a user judges fedbr by:
// how long the backup and the restore took, how long GC and PD scheduling were held, whether
// the restored data is exactly the data at the commit ts, and what was left behind.
func (r *Report) Headline(w io.Writer) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format+"\n", args...) }
	planes := len(r.backupMembers)
	p("%s: one TiDB cluster over %d data planes backed up while a bank workload wrote, restored into fresh clusters, checked", r.result(), planes)
	commit := "(none)"
	if r.Backup != nil && r.Backup.Status.CommitTs != "" {
		commit = r.Backup.Status.CommitTs
	}
	switch {
	case r.BackupWall > 0:
		p("  backup   %s: %d EBS snapshots consistent at commit ts %s; GC and PD scheduling held %s",
			r.BackupWall.Round(100*time.Millisecond), r.Snapshots, commit, r.GCPause.Round(time.Millisecond))
	default:
		p("  backup   did not complete")
	}
	switch {
	case r.RestoreWall > 0:
		warm := "no warm-up"
		if r.Warmup != "" {
			warm = fmt.Sprintf("warm-up %s (%d of %d Jobs)", r.Warmup, r.WarmupJobs, r.WarmupJobsTotal)
		}
		p("  restore  %s into fresh TidbClusters in every plane, %s", r.RestoreWall.Round(100*time.Millisecond), warm)
	default:
		p("  restore  did not complete")
	}
	switch r.Checker {
	case "pass":
		p("  data     exact: the %d transfers committed at or before the commit ts, none of the %d after it",
			r.TxnsBeforeCommitTS, r.TxnsAfterCommitTS)
	case "":
		p("  data     not checked")
	default:
		p("  data     WRONG: %s", r.Checker)
	}
	held := "lifted"
	if r.HeldAfterBackup.Any() {
		held = fmt.Sprintf("STILL HELD: %+v", r.HeldAfterBackup)
	}
	p("  cleanup  the source's GC and PD scheduling %s; deleting the backup left %d snapshots, %d volumes",
		held, r.OrphanSnapshots, r.OrphanVolumes)
}

// BackupOverhead is the backup's wall time minus its work: what fedbr's controllers, the
// Jobs and pods and the hops between them added. ok is false when a time is missing.
func (r *Report) BackupOverhead() (time.Duration, bool) { return overhead(r.BackupWall, r.BackupWork) }

// RestoreOverhead is the restore's wall time minus its work (the steps' and the operator's).
func (r *Report) RestoreOverhead() (time.Duration, bool) {
	return overhead(r.RestoreWall, r.RestoreWork)
}

// overhead is wall minus the time covered by work (overlapping work counted once); ok is
// false when wall or any work's start or end is missing.
func overhead(wall time.Duration, work []Step) (time.Duration, bool) {
	if wall == 0 || len(work) == 0 {
		return 0, false
	}
	spans := slices.Clone(work)
	for _, s := range spans {
		if s.Start.IsZero() || s.End.Before(s.Start) {
			return 0, false
		}
	}
	slices.SortFunc(spans, func(a, b Step) int { return a.Start.Compare(b.Start) })
	var covered time.Duration
	var end time.Time
	for _, s := range spans {
		if s.Start.After(end) {
			end = s.Start
		}
		if s.End.After(end) {
			covered += s.End.Sub(end)
			end = s.End
		}
	}
	return wall - covered, true
}

// span prints a step relative to origin; times are whole seconds where Kubernetes stamped them.
func span(origin, start, end time.Time) string {
	switch {
	case start.IsZero():
		return "(not started)"
	case end.IsZero():
		return fmt.Sprintf("+%6.1fs → (running)", start.Sub(origin).Seconds())
	}
	return fmt.Sprintf("+%6.1fs → +%6.1fs  (%s)", start.Sub(origin).Seconds(), end.Sub(origin).Seconds(), end.Sub(start).Round(time.Millisecond))
}
