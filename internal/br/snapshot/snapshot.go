// Package snapshot is the backup step that captures a data plane's TiKV volumes: with the
// cluster held still by a pause, it checks that no admin operation is pending and no region
// is missing, takes the backup timestamp, starts one crash-consistent snapshot set per
// instance, says so as soon as every set has started (the "snapshots started" signal, after
// which the pause may be lifted), records them as a pending backupmeta, waits for them with
// progress and finally marks the backupmeta completed.
//
// It never leaves snapshots behind: every snapshot carries the backup's identity tag, a
// failed attempt deletes everything with that tag (and the pending backupmeta listing them),
// and a retried attempt either resumes the sets a pending backupmeta records or, when the
// earlier attempt died before recording them, deletes them and starts afresh — so a backup
// id never owns two sets of one volume. Until the backup completes every snapshot is also marked
// pending for its owner (meta.TagBackupPending), so what a lost answer or a killed attempt
// leaves once the member is gone is the agent's orphan sweeper's; and for good with its owner's
// namespace (meta.TagNamespace), which a per-namespace IAM policy conditions on.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"golang.org/x/sync/errgroup"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

// TagStore names the TiKV store a snapshot belongs to, next to meta.TagBackup.
const TagStore = "fedbr.io/store"

const (
	defaultCheckTimeout   = 10 * time.Minute
	defaultCheckInterval  = 5 * time.Second
	defaultCleanupTimeout = 5 * time.Minute
)

// Cloud is what the step needs from the provider.
type Cloud interface {
	cloud.Snapshots
	DescribeVolumes(ctx context.Context, ids []string) ([]cloud.Volume, error)
}

// Options configure the step.
type Options struct {
	// BackupID is the backup's identity: the snapshots' tag value and fedbr.backup_id.
	BackupID string
	// Cluster is the data plane's k8sClusterName, recorded in backupmeta.
	Cluster string
	// Manifests are the keys of the Kubernetes manifests saved next to the backup
	// (meta.Store.PutManifest), recorded in backupmeta as fedbr.manifests.
	Manifests []string
	// Input lists the stores and volumes to snapshot (BR's volume file); nil reads the
	// clustermeta from the store.
	Input *meta.Record
	// BackupTS is the timestamp a running pause holds GC at; 0 reads PD's min-resolved-ts,
	// which must then be real-time.
	BackupTS uint64
	// WaitBackupTS, when set, gives the backup ts instead of BackupTS: the step is armed ahead
	// of the pause, and everything that does not depend on the pause (the volumes, their
	// instances, an earlier attempt's leftovers, the cluster version) is done before it is
	// called, so the pause window holds only the cluster check and the snapshot starts.
	WaitBackupTS func(ctx context.Context) (uint64, error)
	// StillPaused, when set, is asked whether the pause the backup ts came from still holds:
	// before the first snapshot starts (an error fails the step before any starts) and again
	// after every set started, before they are recorded (an error fails the backup and deletes
	// the snapshots): snapshots started after the pause broke may miss what the backup ts
	// promises.
	// It is given the backup ts the step took.
	StillPaused func(ctx context.Context, backupTS uint64) error
	// SkipClusterCheck skips waiting for no pending admin operations and no region holes.
	SkipClusterCheck bool
	// CheckTimeout bounds that wait (default 10m); CheckInterval spaces its attempts (5s).
	CheckTimeout  time.Duration
	CheckInterval time.Duration
	// Tags are added to every snapshot (the identity tags win).
	Tags map[string]string
	// Owner, when set, is where the member this step runs for lives: every snapshot carries
	// meta.TagBackupPending=<owner> until the backup completes, so that plane's agent may
	// sweep the snapshots of a backup that never completed once its member is gone. The tag
	// is removed before backupmeta is marked completed, whether or not Owner is set. Every
	// snapshot also carries meta.TagNamespace=<owner's namespace> from its CreateSnapshots on,
	// for good: what a per-namespace IAM policy conditions on.
	Owner *meta.Owner
	// CleanupTimeout bounds the deletion of snapshots after a failure, which runs even when
	// ctx was cancelled (default 5m).
	CleanupTimeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Report receives the progress of the snapshot wait; nil drops it.
	Report func(Progress)
	// Clock spaces check attempts and measures elapsed time; nil is the wall clock.
	Clock budget.Clock
}

// Progress is the state of the step for a progress file and the member's status.steps.
type Progress struct {
	Phase   string  `json:"phase"`
	Done    int     `json:"done"`
	Total   int     `json:"total"`
	Percent float64 `json:"percent"`
	// BackupTS is the backup's resolved ts, once known (from Starting on, and when resuming).
	BackupTS uint64 `json:"backupTS,omitempty"`
	// Error says why the step failed (phase Failed only).
	Error string `json:"error,omitempty"`
	// BackupTSAt is when an armed step received its backup ts, and StartedAt when every
	// snapshot had started (Started): with the pause's own times they decompose the GC pause
	// window. Both stay set in later reports.
	BackupTSAt time.Time `json:"backupTSAt,omitzero"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	// CompletedAt is when every snapshot had completed and backupmeta said so: with
	// BackupTSAt it bounds the step's own work (cluster check, cloud calls and waits), which
	// the backup's orchestration overhead excludes.
	CompletedAt time.Time `json:"completedAt,omitzero"`
	// ProgressAt is when the wait's progress (Done, Percent) last grew, from the start of
	// Waiting on (report.ProgressClock); the agent fails a wait whose progress has not moved
	// for stallTimeout. The engine stamps every time of Progress on Options.Clock.
	ProgressAt time.Time `json:"progressAt,omitzero"`
	// SlowestStartSeconds is the slowest CreateSnapshots call of this step (from Waiting on):
	// the floor a GC pause window is measured against.
	SlowestStartSeconds float64 `json:"slowestStartSeconds,omitempty"`
	// Sized and SizedBytes are Result.FailedSize in the Failed report: how many completed
	// snapshots were sized before the failed attempt deleted them, and their full size.
	Sized      int   `json:"sized,omitempty"`
	SizedBytes int64 `json:"sizedBytes,omitempty"`
	// Settled, in the Failed report, says no snapshot of this step can appear in AWS later: it
	// sent no CreateSnapshots call, or each call it sent was answered (none after a lost answer)
	// and it deleted every snapshot they started. A clean of the backup then waits for none.
	Settled bool `json:"settled,omitempty"`
}

// Phases reported in Progress, in the order they happen.
const (
	// PhaseArmed: started ahead of the pause (`--wait-backup-ts`), connected and waiting for the
	// backup ts; nothing has been checked or snapshotted yet.
	PhaseArmed = report.PhaseArmed
	// PhaseChecking: waiting until no TiKV has a pending admin operation and the regions tile
	// the key space.
	PhaseChecking = report.PhaseChecking
	// PhaseStarting: the snapshots are being started; the pause must still hold.
	PhaseStarting = report.PhaseStarting
	// PhaseStarted: every snapshot has started while the pause held, and backupmeta is being
	// written. From here on the pause may be lifted (see PauseMayLift): a snapshot is a
	// point-in-time image from its start, and recording it needs no pause. It is never reported
	// before every snapshot started and the pause was confirmed still held.
	PhaseStarted = report.PhaseStarted
	// PhaseWaiting: backupmeta is written (pending) with every snapshot; they are completing.
	PhaseWaiting = report.PhaseWaiting
	// PhaseCompleted: every snapshot completed and backupmeta says so.
	PhaseCompleted = report.PhaseCompleted
	// PhaseCleaningUp: the step failed after snapshots started; they are being deleted.
	PhaseCleaningUp = report.PhaseCleaningUp
	// PhaseFailed: the step failed (see Error).
	PhaseFailed = report.PhaseFailed
)

// PauseMayLift says whether a step in phase has started every snapshot, so that the pause it
// was taken under may be lifted.
func PauseMayLift(phase string) bool {
	return phase == PhaseStarted || phase == PhaseWaiting || phase == PhaseCompleted
}

// percentCompleted is the progress of a completed wait.
const percentCompleted = 100

// Validate checks the options.
func (o Options) Validate() error {
	if err := meta.ValidateID(o.BackupID); err != nil {
		return fmt.Errorf("backup id: %w", err)
	}
	if o.CheckTimeout < 0 || o.CheckInterval < 0 || o.CleanupTimeout < 0 {
		return errors.New("timeouts and intervals must not be negative")
	}
	if o.Owner != nil {
		if err := o.Owner.Validate(); err != nil {
			return err
		}
	}
	if n := len(o.Tags) + len(identityTags("x", o.Owner)) + 1; n > cloud.MaxTags {
		return fmt.Errorf("%d tags with the identity tags: %w", n, cloud.ErrTooManyTags)
	}
	if o.Input != nil {
		if err := o.Input.ValidateCluster(); err != nil {
			return fmt.Errorf("volume file: %w", err)
		}
	}
	return nil
}

// Deps are the clients the step uses.
type Deps struct {
	Cloud Cloud
	Store *meta.Store
	// PD and PDHTTP are needed unless the cluster check is skipped and BackupTS is given;
	// PDHTTP also gives the cluster version.
	PD     PD
	PDHTTP PDHTTP
	// Dial opens TiKV Backup clients for the admin-operation check.
	Dial Dialer
	// Sizer lists the blocks of a completed snapshot whose full size the describe does not
	// give, when a failed attempt measures what it snapshotted before deleting it (FailedSize);
	// nil sizes only what the describe gives.
	Sizer cloud.Sizer
}

// Snapshot is one recorded snapshot.
type Snapshot struct {
	StoreID    uint64 `json:"storeID"`
	InstanceID string `json:"instanceID"`
	VolumeID   string `json:"volumeID"`
	Type       string `json:"type"`
	SnapshotID string `json:"snapshotID"`
	AZ         string `json:"az"`
	SizeGiB    int32  `json:"sizeGiB"`
}

// Result is what the step did.
type Result struct {
	BackupID       string `json:"backupID"`
	ResolvedTS     uint64 `json:"resolvedTS"`
	ClusterVersion string `json:"clusterVersion"`
	// Resumed says an earlier attempt had recorded the snapshots; they were waited for
	// instead of taking new ones.
	Resumed   bool       `json:"resumed"`
	Snapshots []Snapshot `json:"snapshots"`
	SizeGiB   int64      `json:"sizeGiB"`
	// Swept are snapshots of an earlier attempt that never recorded them, deleted first.
	Swept []string `json:"swept"`
	// Deleted are this attempt's snapshots, deleted after it failed.
	Deleted []string `json:"deleted"`
	// Strays are snapshots carrying the backup's tag that backupmeta does not record (a
	// CreateSnapshots whose answer was lost and was sent again), deleted once the backup
	// completed.
	Strays         []string `json:"strays"`
	ElapsedSeconds float64  `json:"elapsedSeconds"`
	// FailedSize is what a failed attempt had snapshotted, measured before it deleted its
	// snapshots; nil when it measured nothing (no snapshot, or stopped by a signal).
	FailedSize *FailedSize `json:"failedSize,omitempty"`
}

// FailedSize is the full size of the snapshots a failed attempt had completed, measured just
// before they were deleted, so that a failed backup still says what it had copied (upstream
// reports sizes for failed backups too). Snapshots still pending or in error are not sized:
// their size is not known yet.
type FailedSize struct {
	// Snapshots is how many snapshots the attempt was deleting; Sized how many of them had
	// completed and were sized, together FullBytes.
	Snapshots int   `json:"snapshots"`
	Sized     int   `json:"sized"`
	FullBytes int64 `json:"fullBytes"`
	// ElapsedSeconds is how long the measure took (it delays the deletion by that much).
	ElapsedSeconds float64 `json:"elapsedSeconds"`
}

// sizeBeforeDeleteTimeout bounds FailedSize's measure (at most half of the CleanupTimeout):
// the deletion waits for it.
const sizeBeforeDeleteTimeout = time.Minute

// Run takes the backup's snapshots.
func Run(ctx context.Context, d Deps, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = defaultCheckTimeout
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = defaultCheckInterval
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = defaultCleanupTimeout
	}
	if o.Clock == nil {
		o.Clock = budget.RealClock
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Report == nil {
		o.Report = func(Progress) {}
	}
	s := &snapshotter{d: d, o: o}
	defer s.closeStores()
	start := o.Clock.Now()
	s.res = Result{BackupID: o.BackupID, Snapshots: []Snapshot{}, Swept: []string{}, Deleted: []string{}, Strays: []string{}}
	err := s.run(ctx)
	s.res.ElapsedSeconds = o.Clock.Now().Sub(start).Seconds()
	if err != nil {
		p := Progress{Phase: PhaseFailed, Error: err.Error()}
		if fs := s.res.FailedSize; fs != nil {
			p.Sized, p.SizedBytes = fs.Sized, fs.FullBytes
		}
		p.Settled = s.settled()
		s.report(p)
	}
	return s.res, err
}

// report sends p with the backup ts, once known, and the step's times: each stamped once, on
// the clock, and carried in every later report.
func (s *snapshotter) report(p Progress) {
	p.BackupTS = s.res.ResolvedTS
	p.SlowestStartSeconds = s.slowestStart.Seconds()
	now := s.o.Clock.Now()
	s.mu.Lock()
	if PauseMayLift(p.Phase) && s.startedAt.IsZero() {
		s.startedAt = now // the manager lifts the pause on this report
	}
	if p.Phase == PhaseCompleted && s.completedAt.IsZero() {
		s.completedAt = now
	}
	p.BackupTSAt, p.StartedAt, p.CompletedAt = s.tsAt, s.startedAt, s.completedAt
	if p.Phase == PhaseWaiting {
		p.ProgressAt = s.waitClock.Observe(int64(p.Done), p.Percent, now)
	}
	s.mu.Unlock()
	s.o.Report(p)
}

type snapshotter struct {
	d   Deps
	o   Options
	res Result

	mu      sync.Mutex
	created []string
	// sent says a CreateSnapshots call went out; unsure that one may have started snapshots
	// this step does not know of (a call that failed or was cut short, a set found after a lost
	// answer, an earlier attempt's snapshots swept); deleted that the failed attempt's cleanup
	// deleted every snapshot it knew of.
	sent, unsure, deleted bool
	// tsAt is when an armed step received its backup ts, startedAt when every snapshot had
	// started, completedAt when every one had completed; waitClock is the wait's progress.
	tsAt, startedAt, completedAt time.Time
	waitClock                    report.ProgressClock
	// slowestStart is the slowest call that started a snapshot set.
	slowestStart time.Duration
	conns        map[string]brpb.BackupClient // by store address, for the cluster check
	closers      []func() error
	scanOnce     sync.Once
	regions      *tidb.RegionScanner
	logMu        sync.Mutex
}

func (s *snapshotter) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = fmt.Fprintf(s.o.Progress, format+"\n", args...)
}

func (s *snapshotter) run(ctx context.Context) error {
	prev, err := s.d.Store.BackupMetaAsIs(ctx)
	switch {
	case err == nil:
		if prev.Fedbr == nil || prev.Fedbr.BackupID != s.o.BackupID {
			owner := "upstream BR"
			if prev.Fedbr != nil {
				owner = fmt.Sprintf("backup %q", prev.Fedbr.BackupID)
			}
			return fmt.Errorf("backupmeta of %s already exists in this storage; use a fresh prefix for backup %s: %w", owner, s.o.BackupID, meta.ErrExists)
		}
		return s.resume(ctx, prev)
	case !errors.Is(err, meta.ErrNotFound):
		return fmt.Errorf("check for an earlier backupmeta: %w", err)
	}

	in := s.o.Input
	if in == nil {
		if in, err = s.d.Store.ClusterMeta(ctx); err != nil {
			return fmt.Errorf("read the volumes to snapshot: %w", err)
		}
	}
	// The preparation's calls go out at once where one does not need another's answer: the
	// sweep of an earlier attempt's snapshots, PD's cluster version, and the stores, the
	// volumes and (armed) the instances in that order, beside the dials of the stores. For an
	// armed step all of it sits between its pod's start and Armed, for one started with the
	// ts inside the pause window.
	rec := in.Clone()
	var (
		version  string
		reqs     []cloud.SnapshotRequest
		prepared *cloud.PreparedSnapshots
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.sweep(gctx) })
	g.Go(func() (err error) {
		version, err = s.clusterVersion(gctx)
		return err
	})
	g.Go(func() error {
		if err := s.clusterStores(gctx, rec); err != nil {
			return err
		}
		var err error
		if reqs, err = s.plan(gctx, rec); err != nil {
			return err
		}
		if s.o.WaitBackupTS != nil {
			// The instances and volumes are described now, so that the pause window holds
			// only the CreateSnapshots calls.
			if prepared, err = s.d.Cloud.PrepareSnapshotInstances(gctx, reqs); err != nil {
				return fmt.Errorf("prepare snapshots: %w", err)
			}
		}
		return nil
	})
	if s.o.WaitBackupTS != nil && !s.o.SkipClusterCheck && s.d.PD != nil && s.d.Dial != nil {
		// The connections outlive the preparation: they dial on the step's context.
		g.Go(func() error { s.dialStores(ctx); return nil })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if s.o.WaitBackupTS != nil {
		if s.o.BackupTS, err = s.o.WaitBackupTS(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		s.tsAt = s.o.Clock.Now()
		s.mu.Unlock()
	}
	// The pause must hold before the first CreateSnapshots (asked beside the cluster check,
	// both inside the pause window) and after the last (take).
	var held chan error
	if s.o.StillPaused != nil {
		held = make(chan error, 1)
		go func() { held <- s.o.StillPaused(ctx, s.o.BackupTS) }()
	}
	if !s.o.SkipClusterCheck {
		if err := s.waitClusterStill(ctx); err != nil {
			return err
		}
	}
	if held != nil {
		if err := <-held; err != nil {
			return fmt.Errorf("the pause no longer holds, so no snapshot was started: %w", err)
		}
	}
	if err := s.clusterInfo(ctx, rec, version); err != nil {
		return err
	}
	err = s.take(ctx, rec, reqs, prepared)
	if err != nil {
		s.cleanup(ctx)
	}
	return err
}

// sweep deletes snapshots tagged with this backup that no backupmeta records: an earlier
// attempt died between starting them and recording them, so their timestamp is unknown.
func (s *snapshotter) sweep(ctx context.Context) error {
	left, err := s.d.Cloud.ListSnapshots(ctx, meta.BackupTags(s.o.BackupID))
	if err != nil {
		return fmt.Errorf("find snapshots of an earlier attempt: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	s.markUnsure() // the earlier attempt may have calls of its own still running
	ids := snapshotIDs(left)
	s.logf("Deleting %d snapshots an earlier attempt of backup %s started but never recorded: %v", len(ids), s.o.BackupID, ids)
	if err := s.d.Cloud.DeleteSnapshots(ctx, ids); err != nil {
		return fmt.Errorf("delete snapshots of an earlier attempt: %w", err)
	}
	s.res.Swept = ids
	return nil
}

// clusterVersion reads PD's cluster version ("0.0.0" without PD).
func (s *snapshotter) clusterVersion(ctx context.Context) (string, error) {
	if s.d.PDHTTP == nil {
		return "0.0.0", nil
	}
	v, err := s.d.PDHTTP.ClusterVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("read PD cluster version: %w", err)
	}
	pv, err := meta.ParseVersion(v)
	if err != nil {
		return "", fmt.Errorf("PD cluster version: %w", err)
	}
	return pv.String(), nil
}

// clusterStores records the whole cluster's TiKV count, as PD lists the stores, in
// tikv.replicas: restore-data waits for that many stores, whichever plane's backupmeta it
// reads (tidb-operator's clustermeta counts a plane's stores plus its peer stores the same
// way). The clustermeta, written by this plane's agent, counts only this plane's. Without PD
// it stays as the clustermeta has it.
func (s *snapshotter) clusterStores(ctx context.Context, rec *meta.Record) error {
	if s.d.PD == nil {
		return nil
	}
	stores, err := tidb.TiKVStores(ctx, s.d.PD)
	if err != nil {
		return fmt.Errorf("count the cluster's TiKV stores: %w", err)
	}
	if len(stores) < len(rec.TiKV.Stores) {
		return fmt.Errorf("PD lists %d TiKV stores, fewer than the %d this plane backs up: the clustermeta does not describe this cluster", len(stores), len(rec.TiKV.Stores))
	}
	rec.TiKV.Replicas = len(stores)
	return nil
}

// clusterInfo fills cluster_info: the backup timestamp and PD's cluster version.
func (s *snapshotter) clusterInfo(ctx context.Context, rec *meta.Record, version string) error {
	ts := s.o.BackupTS
	if ts == 0 {
		if s.d.PDHTTP == nil {
			return errors.New("no backup ts given and no PD to read min-resolved-ts from")
		}
		r, err := s.d.PDHTTP.MinResolvedTS(ctx)
		if err != nil {
			return fmt.Errorf("read PD min-resolved-ts: %w", err)
		}
		if !r.RealTime {
			return fmt.Errorf("PD min-resolved-ts %d is not real-time (is_real_time=false): the stores do not report resolved ts, so it cannot be a consistent backup ts; hold a pause and pass its backup ts instead", r.TS)
		}
		if r.TS == 0 {
			return errors.New("PD min-resolved-ts is 0: the stores have not reported a resolved ts yet")
		}
		ts = r.TS
	}
	rec.ClusterInfo = &meta.ClusterInfo{Version: version, FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: ts}
	s.res.ResolvedTS, s.res.ClusterVersion = ts, version
	s.logf("Backup ts %d, cluster version %s", ts, version)
	return nil
}

// take starts every snapshot set (prepared ahead when prepared is not nil), records them as a
// pending backupmeta, waits for them and completes the backupmeta.
func (s *snapshotter) take(ctx context.Context, rec *meta.Record, reqs []cloud.SnapshotRequest, prepared *cloud.PreparedSnapshots) error {
	total := len(rec.Volumes())
	s.report(Progress{Phase: PhaseStarting, Total: total})
	s.logf("Starting %d crash-consistent snapshot sets (%d volumes)", len(reqs), total)
	var sets [][]cloud.Snapshot
	var err error
	s.mu.Lock()
	s.sent = true
	s.mu.Unlock()
	if prepared != nil {
		sets, err = s.d.Cloud.StartSnapshotInstances(ctx, prepared)
	} else {
		sets, err = s.d.Cloud.SnapshotInstances(ctx, reqs)
	}
	for _, set := range sets {
		s.remember(snapshotIDs(set))
		for _, sn := range set {
			s.slowestStart = max(s.slowestStart, sn.StartCall)
			if sn.AfterLostAnswer {
				s.markUnsure()
			}
		}
	}
	if err != nil {
		s.markUnsure()
		return fmt.Errorf("start snapshots: %w", err)
	}
	if s.o.StillPaused != nil {
		if err := s.o.StillPaused(ctx, s.o.BackupTS); err != nil {
			return fmt.Errorf("the pause did not hold until every snapshot started: %w", err)
		}
	}
	// The pause's job is done: say so before recording the snapshots, so the backupmeta write
	// is not inside the GC pause window. A failure from here on still deletes the snapshots.
	s.logf("Every snapshot started (slowest CreateSnapshots call %s); the pause may be lifted", s.slowestStart.Round(time.Millisecond))
	s.report(Progress{Phase: PhaseStarted, Total: total})
	snapOf := map[string]string{}
	for _, set := range sets {
		for _, sn := range set {
			snapOf[sn.VolumeID] = sn.ID
		}
	}
	for si := range rec.TiKV.Stores {
		for vi := range rec.TiKV.Stores[si].Volumes {
			v := &rec.TiKV.Stores[si].Volumes[vi]
			id, ok := snapOf[v.ID]
			if !ok {
				return fmt.Errorf("start snapshots: volume %s of store %d got no snapshot", v.ID, rec.TiKV.Stores[si].ID)
			}
			v.SnapshotID = id
		}
	}
	if rec.Fedbr == nil {
		rec.Fedbr = &meta.Extension{}
	}
	rec.Fedbr.BackupID, rec.Fedbr.Snapshots = s.o.BackupID, meta.SnapshotsPending
	if s.o.Cluster != "" {
		rec.Fedbr.Cluster = s.o.Cluster
	}
	if len(s.o.Manifests) > 0 {
		rec.Fedbr.Manifests = slices.Sorted(slices.Values(s.o.Manifests))
	}
	if err := s.d.Store.PutBackupMeta(ctx, rec); err != nil {
		return fmt.Errorf("record the started snapshots: %w", err)
	}
	s.logf("Snapshots recorded: backupmeta written (pending) with %d snapshots", total)
	s.dropUnplanned(ctx, sets, rec)
	return s.wait(ctx, rec)
}

// dropUnplanned deletes the snapshots of volumes the plan did not ask for: a data volume
// attached to an instance after the sets were prepared is not in their exclusion list. They are
// tagged with the backup, so a failed delete is left to the clean's tag sweep.
func (s *snapshotter) dropUnplanned(ctx context.Context, sets [][]cloud.Snapshot, rec *meta.Record) {
	planned := map[string]bool{}
	for _, v := range rec.Volumes() {
		planned[v.ID] = true
	}
	var extra []string
	for _, set := range sets {
		for _, sn := range set {
			if !planned[sn.VolumeID] {
				extra = append(extra, sn.ID)
			}
		}
	}
	if len(extra) == 0 {
		return
	}
	s.logf("Deleting %d snapshots of volumes attached after the plan: %v", len(extra), extra)
	if err := s.d.Cloud.DeleteSnapshots(ctx, extra); err != nil {
		s.logf("Deleting them failed (the clean's sweep of the backup's tag deletes them): %v", err)
	}
}

// dropStrays deletes the snapshots tagged with the backup that backupmeta does not record: a
// CreateSnapshots whose answer was lost started a set, AWS did not show it yet when the
// provider looked for it, and the call sent again started the recorded one. By now (the
// recorded snapshots completed) AWS shows it. A failure is logged: the strays carry the
// backup's tag, so the clean's tag sweep deletes them with the backup.
func (s *snapshotter) dropStrays(ctx context.Context, recorded []string) {
	tagged, err := s.d.Cloud.ListSnapshots(ctx, meta.BackupTags(s.o.BackupID))
	if err != nil {
		s.logf("Looking for snapshots of backup %s that backupmeta does not record failed (the clean's sweep of the backup's tag deletes any): %v", s.o.BackupID, err)
		return
	}
	var strays []string
	for _, id := range snapshotIDs(tagged) {
		if !slices.Contains(recorded, id) {
			strays = append(strays, id)
		}
	}
	if len(strays) == 0 {
		return
	}
	slices.Sort(strays)
	s.logf("Deleting %d snapshots of backup %s that backupmeta does not record (a lost CreateSnapshots answer): %v", len(strays), s.o.BackupID, strays)
	if err := s.d.Cloud.DeleteSnapshots(ctx, strays); err != nil {
		s.logf("Deleting them failed (the clean's sweep of the backup's tag deletes them): %v", err)
		return
	}
	s.res.Strays = strays
}

// resume continues an attempt whose backupmeta exists: a completed one is the result, a
// pending one is waited for and completed.
func (s *snapshotter) resume(ctx context.Context, rec *meta.Record) error {
	s.res.Resumed = true
	s.markUnsure() // the earlier attempt may have lost a CreateSnapshots answer (a stray not shown yet)
	s.res.ResolvedTS = rec.ClusterInfo.ResolvedTS
	s.res.ClusterVersion = rec.ClusterInfo.Version
	if !rec.Pending() {
		s.logf("Backup %s is already completed; checking its %d snapshots", s.o.BackupID, len(rec.SnapshotIDs()))
		snaps, err := s.d.Cloud.DescribeSnapshots(ctx, rec.SnapshotIDs())
		if err != nil {
			return fmt.Errorf("check the recorded snapshots: %w", err)
		}
		if len(snaps) != len(rec.SnapshotIDs()) {
			return fmt.Errorf("backup %s is recorded completed but %d of its %d snapshots are gone", s.o.BackupID, len(rec.SnapshotIDs())-len(snaps), len(rec.SnapshotIDs()))
		}
		s.fill(rec, snaps)
		n := len(snaps)
		s.report(Progress{Phase: PhaseCompleted, Done: n, Total: n, Percent: percentCompleted})
		return nil
	}
	s.logf("Backup %s recorded %d snapshots in an earlier attempt; waiting for them instead of taking new ones", s.o.BackupID, len(rec.SnapshotIDs()))
	s.remember(rec.SnapshotIDs())
	err := s.wait(ctx, rec)
	if err != nil {
		s.cleanup(ctx)
	}
	return err
}

func (s *snapshotter) remember(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(s.created, id) {
			s.created = append(s.created, id)
		}
	}
}

// wait waits for every snapshot of rec and completes the backupmeta.
func (s *snapshotter) wait(ctx context.Context, rec *meta.Record) error {
	ids := rec.SnapshotIDs()
	s.report(Progress{Phase: PhaseWaiting, Total: len(ids)})
	last := -1.0
	snaps, err := s.d.Cloud.WaitSnapshots(ctx, ids, func(p cloud.Progress) {
		s.report(Progress{Phase: PhaseWaiting, Done: p.Done, Total: p.Total, Percent: p.Percent})
		if p.Percent != last {
			last = p.Percent
			s.logf("Snapshots: %d of %d completed, %.2f%%", p.Done, p.Total, p.Percent)
		}
	})
	if err != nil {
		return fmt.Errorf("wait for snapshots: %w", err)
	}
	// A completed backupmeta never lists a snapshot marked pending: the sweeper may delete a
	// pending snapshot once its member is gone, and a completed backup outlives its member
	// (cleanPolicy Retain).
	if err := s.d.Cloud.UntagSnapshots(ctx, ids, []string{meta.TagBackupPending}); err != nil {
		return fmt.Errorf("unmark the completed snapshots as pending: %w", err)
	}
	done, err := s.d.Store.CompleteBackupMeta(ctx)
	if err != nil {
		return fmt.Errorf("record the completed snapshots: %w", err)
	}
	s.fill(done, snaps)
	s.dropStrays(ctx, ids)
	s.report(Progress{Phase: PhaseCompleted, Done: len(ids), Total: len(ids), Percent: percentCompleted})
	s.logf("Snapshot backup %s completed: %d snapshots, %d GiB, resolved_ts=%d", s.o.BackupID, len(ids), s.res.SizeGiB, s.res.ResolvedTS)
	return nil
}

// fill sets the result's snapshots from the record and what the cloud reported.
func (s *snapshotter) fill(rec *meta.Record, snaps []cloud.Snapshot) {
	size := map[string]int32{}
	for _, sn := range snaps {
		size[sn.ID] = sn.SizeGiB
	}
	s.res.Snapshots, s.res.SizeGiB = []Snapshot{}, 0
	for _, st := range rec.TiKV.Stores {
		for _, v := range st.Volumes {
			s.res.Snapshots = append(s.res.Snapshots, Snapshot{StoreID: st.ID, InstanceID: st.InstanceID, VolumeID: v.ID, Type: v.Type,
				SnapshotID: v.SnapshotID, AZ: v.AZ, SizeGiB: size[v.SnapshotID]})
			s.res.SizeGiB += int64(size[v.SnapshotID])
		}
	}
}

// plan finds each store's instance and each volume's AZ, and builds one request per
// instance. Stores sharing an instance are snapshotted in one set.
func (s *snapshotter) plan(ctx context.Context, rec *meta.Record) ([]cloud.SnapshotRequest, error) {
	var ids []string
	for _, v := range rec.Volumes() {
		ids = append(ids, v.ID)
	}
	vols, err := s.d.Cloud.DescribeVolumes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("describe the volumes to snapshot: %w", err)
	}
	byID := map[string]cloud.Volume{}
	for _, v := range vols {
		byID[v.ID] = v
	}
	var errs []error
	byInstance := map[string]*cloud.SnapshotRequest{}
	var order []string
	for si := range rec.TiKV.Stores {
		st := &rec.TiKV.Stores[si]
		for vi := range st.Volumes {
			v := &st.Volumes[vi]
			cv, ok := byID[v.ID]
			if !ok {
				errs = append(errs, fmt.Errorf("volume %s of store %d does not exist", v.ID, st.ID))
				continue
			}
			if len(cv.Attachments) == 0 {
				errs = append(errs, fmt.Errorf("volume %s of store %d is not attached to an instance", v.ID, st.ID))
				continue
			}
			inst := cv.Attachments[0].InstanceID
			if st.InstanceID == "" {
				st.InstanceID = inst
			}
			if inst != st.InstanceID {
				errs = append(errs, fmt.Errorf("volume %s of store %d is attached to %s, not to the store's instance %s", v.ID, st.ID, inst, st.InstanceID))
				continue
			}
			v.AZ = cv.AZ
			req, ok := byInstance[inst]
			if !ok {
				tags := maps.Clone(s.o.Tags)
				if tags == nil {
					tags = map[string]string{}
				}
				tags[TagStore] = fmt.Sprint(st.ID)
				maps.Copy(tags, identityTags(s.o.BackupID, s.o.Owner))
				req = &cloud.SnapshotRequest{InstanceID: inst, Tags: tags,
					Description: fmt.Sprintf("fedbr backup %s, TiKV store %d", s.o.BackupID, st.ID)}
				byInstance[inst] = req
				order = append(order, inst)
			}
			// CreateSnapshots copies every tag of the volume to its snapshot, beside fedbr's: a
			// snapshot AWS would refuse fails the step now, before the pause, not at its start.
			if n := cloud.SnapshotTagCount(cv.Tags, req.Tags); n > cloud.MaxTags {
				errs = append(errs, fmt.Errorf("volume %s of TiKV store %d has %d tags and the snapshot step adds %d: %d, more than the %d AWS allows on a snapshot, "+
					"which copies every tag of its volume; remove %d tags from the volume (or give fewer --tags): %w",
					v.ID, st.ID, len(cv.Tags), n-len(cv.Tags), n, cloud.MaxTags, n-cloud.MaxTags, cloud.ErrTooManyTags))
				continue
			}
			req.VolumeIDs = append(req.VolumeIDs, v.ID)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plan snapshots: %w", err)
	}
	reqs := make([]cloud.SnapshotRequest, len(order))
	for i, inst := range order {
		reqs[i] = *byInstance[inst]
	}
	return reqs, nil
}

// identityTags are the tags fedbr sets on every snapshot of the backup: its identity and,
// with an owner, the pending mark and the owner's namespace (meta.TagNamespace, permanent).
// They win over --tags and over the tags CreateSnapshots copies from the source volume.
func identityTags(backupID string, owner *meta.Owner) map[string]string {
	tags := meta.BackupTags(backupID)
	maps.Copy(tags, meta.PendingBackupTags(owner))
	maps.Copy(tags, meta.NamespaceTags(owner))
	return tags
}

// cleanup deletes every snapshot this attempt created or recorded and any other snapshot
// carrying the backup's tag, even when ctx was cancelled; when all are gone it removes the
// pending backupmeta that lists them.
func (s *snapshotter) cleanup(ctx context.Context) {
	s.report(Progress{Phase: PhaseCleaningUp})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.CleanupTimeout)
	defer cancel()
	s.mu.Lock()
	ids := slices.Clone(s.created)
	s.mu.Unlock()
	tagged, err := s.d.Cloud.ListSnapshots(cctx, meta.BackupTags(s.o.BackupID))
	if err != nil {
		s.logf("Listing snapshots tagged %s=%s failed: %v", meta.TagBackup, s.o.BackupID, err)
	}
	for _, id := range snapshotIDs(tagged) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) > 0 {
		s.sizeBeforeDelete(ctx, ids)
		s.logf("Deleting the %d snapshots of the failed attempt: %v", len(ids), ids)
		if err := s.d.Cloud.DeleteSnapshots(cctx, ids); err != nil {
			s.logf("Deleting snapshots failed; they carry %s=%s for `fedbr br clean --backup-id %s`: %v", meta.TagBackup, s.o.BackupID, s.o.BackupID, err)
			return
		}
		s.res.Deleted = ids
	}
	s.mu.Lock()
	s.deleted = true
	s.mu.Unlock()
	if err := s.d.Store.AbandonBackupMeta(cctx); err != nil {
		s.logf("Removing the pending backupmeta failed: %v", err)
		return
	}
	s.logf("Deleted %d snapshots; no snapshot of backup %s is left", len(ids), s.o.BackupID)
}

// markUnsure records that a snapshot may exist that this step does not know of.
func (s *snapshotter) markUnsure() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsure = true
}

// settled says no snapshot this step started can appear later (Progress.Settled): it sent no
// CreateSnapshots call, or it knows every snapshot its calls started and deleted them all.
func (s *snapshotter) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.unsure && (!s.sent || s.deleted)
}

// sizeBeforeDelete measures the full size of the snapshots among ids that completed
// (Result.FailedSize), within sizeBeforeDeleteTimeout; a step stopped by a signal (ctx done)
// deletes at once without measuring. A measure that fails is logged and left out: it never
// keeps the snapshots from being deleted.
func (s *snapshotter) sizeBeforeDelete(ctx context.Context, ids []string) {
	if ctx.Err() != nil {
		s.logf("Stopped: deleting the snapshots without sizing them")
		return
	}
	start := s.o.Clock.Now()
	sctx, cancel := context.WithTimeout(ctx, min(sizeBeforeDeleteTimeout, s.o.CleanupTimeout/2))
	defer cancel()
	snaps, err := s.d.Cloud.DescribeSnapshots(sctx, ids)
	if err != nil {
		s.logf("Sizing the failed attempt's snapshots before deleting them failed: %v", err)
		return
	}
	fs := &FailedSize{Snapshots: len(ids)}
	var listed []cloud.SizeRequest
	for _, sn := range snaps {
		switch {
		case sn.State != cloud.SnapshotCompleted:
		case sn.FullSizeKnown:
			fs.Sized++
			fs.FullBytes += sn.FullSizeBytes
			s.logf("Snapshot %s of volume %s completed before the failure: full size %d bytes", sn.ID, sn.VolumeID, sn.FullSizeBytes)
		case s.d.Sizer != nil:
			listed = append(listed, cloud.SizeRequest{SnapshotID: sn.ID})
		}
	}
	if len(listed) > 0 {
		sizes, err := s.d.Sizer.SnapshotSizes(sctx, listed)
		if err != nil {
			s.logf("Listing the blocks of %d completed snapshots failed; they are left out of the size: %v", len(listed), err)
		}
		for i, sz := range sizes {
			fs.Sized++
			fs.FullBytes += sz.FullBytes
			s.logf("Snapshot %s completed before the failure: full size %d bytes (blocks listed in %s)", listed[i].SnapshotID, sz.FullBytes, sz.Elapsed.Round(time.Millisecond))
		}
	}
	fs.ElapsedSeconds = s.o.Clock.Now().Sub(start).Seconds()
	s.res.FailedSize = fs
	s.logf("Sized before deleting: %d of the %d snapshots had completed, full size %d bytes, measured in %.1fs", fs.Sized, fs.Snapshots, fs.FullBytes, fs.ElapsedSeconds)
}

func snapshotIDs(snaps []cloud.Snapshot) []string {
	ids := make([]string, 0, len(snaps))
	for _, sn := range snaps {
		ids = append(ids, sn.ID)
	}
	return ids
}
