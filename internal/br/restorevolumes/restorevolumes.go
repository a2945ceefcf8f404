// Package restorevolumes is the cloud half of a restore's volume phase: it creates one volume
// per backed-up volume from the backup's snapshots in the target AZ (type, IOPS, throughput,
// encryption with a KMS key, tags), optionally through fast snapshot restore, and records
// the old → new volume map as this restore's restoremeta. PD is told first that a snapshot
// recovery is under way and its TSO is raised above every commit the snapshots can hold
// (RecoveryTS).
//
// It never leaves volumes behind: every volume carries the restore's identity tag, a failed
// attempt deletes everything with that tag, and a retried attempt first deletes what a
// killed earlier attempt left. A retry after success returns the recorded volumes.
package restorevolumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/backoff"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/meta"
)

// PD is the part of PD this phase drives; it is satisfied by an adapter over the PD client.
type PD interface {
	// MarkSnapshotRecovering sets PD's snapshot-recovering marker; it must be set before any
	// TiKV starts on a restored volume. Setting it again is harmless.
	MarkSnapshotRecovering(ctx context.Context) error
	// ResetTS raises PD's TSO to at least ts; it never lowers it.
	ResetTS(ctx context.Context, ts uint64) error
}

// Cloud is what this phase needs from the provider.
type Cloud interface {
	cloud.Snapshots
	cloud.Volumes
	cloud.FastRestores
}

// Scope selects the volumes to restore.
type Scope string

// Scopes (upstream's --volume-scope 0, 1, 2).
const (
	ScopeAll     Scope = "all"
	ScopeData    Scope = "data"
	ScopeNonData Scope = "non-data"
)

// Tags every restored volume carries besides fedbr's identity, as upstream sets them, so the
// EBS CSI driver and upstream tools treat the volumes alike.
const (
	TagRestoredBy   = "TiDBCluster-BR"
	TagCSICluster   = "ebs.csi.aws.com/cluster"
	TagFromSnapshot = "snapshot/createdFromSnapshotId"
)

const (
	// snapshotTagPrefix prefixes the source snapshot's tags copied to a volume; a copied tag
	// EC2 would refuse (cloud.CheckTag: its key too long with the prefix) is left out.
	snapshotTagPrefix   = "snapshot/"
	defaultConcurrency  = 8
	defaultCleanupLimit = 5 * time.Minute
)

// Volume types accepted; IOPS apply to gp3, io1 and io2, throughput to gp3 only.
var volumeTypes = []string{"gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"}

// Options configure the phase.
type Options struct {
	// RestoreID is the restore's identity: the volumes' tag value and the restoremeta name.
	RestoreID string
	// TargetAZ places every volume; empty means each volume's original AZ.
	TargetAZ string
	// VolumeType defaults to gp3; IOPS and Throughput (MiB/s) of 0 leave AWS's defaults.
	VolumeType string
	IOPS       int32
	Throughput int32
	Encrypted  bool
	// KMSKeyID encrypts with this key (needs Encrypted); empty means the account's default.
	KMSKeyID string
	// Tags are added to every volume.
	Tags map[string]string
	// Owner, when set, is where the member this step runs for lives: every volume carries
	// meta.TagRestorePending=<owner> until restoremeta records it, so that plane's agent may
	// sweep a volume no restoremeta records once its member is gone. The tag is removed before
	// restoremeta is written, whether or not Owner is set. Every volume also carries
	// meta.TagNamespace=<owner's namespace> from its CreateVolume on, for good (whatever the
	// backup's namespace): what a per-namespace IAM policy conditions on.
	Owner *meta.Owner
	// SourceNamespaces are the data-plane namespaces (path.Match globs) whose snapshots the
	// restore may create volumes from: every snapshot must carry meta.TagNamespace with one of
	// them (meta.CheckNamespace), or the step fails with meta.ErrForeignSnapshot before any
	// volume is created or FSR enabled. The agent passes the namespaces its policy lets the
	// member's owner act on. Nil means Owner's namespace alone, or no check without Owner (a
	// step run by hand with the operator's identity).
	SourceNamespaces meta.Namespaces
	// Scope defaults to ScopeAll.
	Scope Scope
	// FSR restores the data volumes through fast snapshot restore: enabled in the target AZ,
	// waited for until every snapshot has a credit, disabled again at the end. Only as many
	// snapshots as the account-region's quota has room for get it (PlanFSR); the others, and
	// any AWS refuses, are restored without it (Status.WithoutFSR says which and why).
	FSR bool
	// FSRQuota is the account-region's quota of FSR-enabled snapshots; 0 means
	// DefaultFSRQuota, AWS's default. Set it when the account's quota was raised.
	FSRQuota int
	// Concurrency bounds parallel CreateVolume calls (the budget paces them anyway).
	Concurrency int
	// CleanupTimeout bounds the deletion of created volumes after a failure, which runs
	// even when ctx was cancelled.
	CleanupTimeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Report receives the machine-readable status on every phase change; nil drops it.
	Report func(Status)
	// Check, when set, is called once the backup was read, validated and reported
	// (PhaseAwaitingCheck, Status.Backup), before PD is touched or any volume created: it
	// returns once whoever checks the target against the backup (the agent, through the
	// member's TargetChecked condition) let the restore go on, or with why not. Nil goes on.
	Check func(ctx context.Context) error
	// Clock measures elapsed time; nil is the wall clock.
	Clock budget.Clock
	// StorageRetry bounds how long a backupmeta read that may pass (the storage unreachable,
	// throttled, a network error) is retried, waiting 1 s, 2 s, … up to 15 s between attempts;
	// 0 means DefaultStorageRetry. A missing, incomplete or invalid backup is never retried.
	StorageRetry time.Duration
	// AllowUpstream restores a backupmeta without fedbr's identity (upstream BR wrote it):
	// its snapshots can be checked only for their owner and source volume, not for a backup
	// tag, so whoever writes such a file into a storage prefix could name any of the account's
	// snapshots whose volume ids it knows. Off, such a backup is refused (ErrUpstream) before
	// anything is touched.
	AllowUpstream bool
}

// ErrUpstream: the backupmeta has no fedbr identity (upstream BR wrote it, or whoever wrote it
// left it out) and Options.AllowUpstream is off.
var ErrUpstream = errors.New("the backupmeta has no fedbr identity (an upstream BR backup): restoring one is off unless the agent's --allow-upstream-backups is on")

// DefaultStorageRetry is Options.StorageRetry's default: the agent no longer reads the
// storage, so a storage that is briefly unreachable is waited for here rather than failing
// the restore.
const DefaultStorageRetry = 2 * time.Minute

// Status is the state of the phase, for the member's status.steps.
type Status struct {
	Phase string `json:"phase"`
	// ResolvedTS is the backup's resolved ts, once backupmeta was read.
	ResolvedTS uint64 `json:"resolvedTS,omitempty"`
	// Volumes is the number of volumes to create, once planned.
	Volumes int `json:"volumes,omitempty"`
	// Backup is the backup's report (BackupReport), once the backupmeta was read: kept in
	// every later status, so the member's entry holds it until the step's end.
	Backup *meta.Record `json:"backup,omitempty"`
	// WithoutFSR are the data volumes' snapshots restored without fast snapshot restore
	// although it was asked for, and why (the quota was full, the snapshot too large, AWS
	// refused it).
	WithoutFSR []FSRSkip `json:"withoutFSR,omitempty"`
	// Error says why the phase failed (phase Failed only).
	Error string `json:"error,omitempty"`
	// StartedAt and CompletedAt bound the step's own work (PD, cloud calls and waits), so
	// whoever ran it can tell that work from the orchestration around it.
	StartedAt   time.Time `json:"startedAt,omitzero"`
	CompletedAt time.Time `json:"completedAt,omitzero"`
}

// Phases reported in Status, in the order they happen.
const (
	// PhaseStarting: reading backupmeta.
	PhaseStarting = report.PhaseStarting
	// PhaseAwaitingCheck: the backup is read and reported (Status.Backup); waiting until the
	// target was checked against it (Options.Check). Nothing was changed yet.
	PhaseAwaitingCheck = report.PhaseAwaitingCheck
	// PhasePreparingPD: reading the backup; PD is marked snapshot-recovering and its TSO
	// raised from here on, while the volumes are created.
	PhasePreparingPD = report.PhasePreparingPD
	// PhaseCreatingVolumes: sweeping an earlier attempt's volumes, enabling fast snapshot
	// restore and creating the volumes.
	PhaseCreatingVolumes = report.PhaseCreatingVolumes
	// PhaseWaitingVolumes: every volume was created; waiting until all are available.
	PhaseWaitingVolumes = report.PhaseWaitingVolumes
	// PhaseCompleted: every volume is available and restoremeta is written.
	PhaseCompleted = report.PhaseCompleted
	// PhaseCleaningUp: the phase failed; the attempt's volumes are being deleted.
	PhaseCleaningUp = report.PhaseCleaningUp
	// PhaseFailed: the phase failed (see Error).
	PhaseFailed = report.PhaseFailed
)

// Validate checks the options.
func (o Options) Validate() error {
	if err := meta.ValidateID(o.RestoreID); err != nil {
		return fmt.Errorf("restore id: %w", err)
	}
	vt := o.VolumeType
	if vt == "" {
		vt = "gp3"
	}
	if !slices.Contains(volumeTypes, vt) {
		return fmt.Errorf("volume type %q: want one of %s", vt, strings.Join(volumeTypes, ", "))
	}
	if o.IOPS < 0 || o.Throughput < 0 {
		return errors.New("IOPS and throughput must not be negative")
	}
	if o.IOPS > 0 && vt != "gp3" && vt != "io1" && vt != "io2" {
		return fmt.Errorf("IOPS apply to gp3, io1 and io2, not %s", vt)
	}
	if o.Throughput > 0 && vt != "gp3" {
		return fmt.Errorf("throughput applies to gp3 only, not %s", vt)
	}
	if o.KMSKeyID != "" && !o.Encrypted {
		return errors.New("a KMS key needs encryption enabled")
	}
	switch o.Scope {
	case "", ScopeAll, ScopeData, ScopeNonData:
	default:
		return fmt.Errorf("volume scope %q: want %s, %s or %s", o.Scope, ScopeAll, ScopeData, ScopeNonData)
	}
	if o.FSRQuota < 0 {
		return fmt.Errorf("FSR quota %d must not be negative", o.FSRQuota)
	}
	if len(o.Tags) > cloud.MaxTags {
		return fmt.Errorf("%d tags: %w", len(o.Tags), cloud.ErrTooManyTags)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Tags)) {
		if err := cloud.CheckTag(k, o.Tags[k]); err != nil {
			return fmt.Errorf("tags: %w", err)
		}
	}
	if o.Owner != nil {
		if err := o.Owner.Validate(); err != nil {
			return err
		}
	}
	if err := o.SourceNamespaces.Validate(); err != nil {
		return fmt.Errorf("source namespaces: %w", err)
	}
	return nil
}

// sourceNamespaces are the namespaces whose snapshots the restore may use: SourceNamespaces,
// else Owner's namespace, else nil (no check).
func (o Options) sourceNamespaces() meta.Namespaces {
	switch {
	case o.SourceNamespaces != nil:
		return o.SourceNamespaces
	case o.Owner != nil:
		return meta.Namespaces{o.Owner.Namespace}
	}
	return nil
}

// Volume is one restored volume.
type Volume struct {
	StoreID        uint64 `json:"storeID"`
	Type           string `json:"type"`
	BackupVolumeID string `json:"backupVolumeID"`
	SnapshotID     string `json:"snapshotID"`
	VolumeID       string `json:"volumeID"`
	AZ             string `json:"az"`
	SizeGiB        int32  `json:"sizeGiB"`
	FastRestored   bool   `json:"fastRestored"`
}

// Result is what the phase did.
type Result struct {
	RestoreID  string `json:"restoreID"`
	ResolvedTS uint64 `json:"resolvedTS"`
	// Reused says an earlier attempt had finished; its recorded volumes are returned.
	Reused  bool     `json:"reused"`
	Volumes []Volume `json:"volumes"`
	SizeGiB int64    `json:"sizeGiB"`
	// Swept are volumes of an earlier, unfinished attempt deleted before starting.
	Swept []string `json:"swept"`
	// Deleted are this attempt's volumes deleted after it failed.
	Deleted []string `json:"deleted"`
	// DroppedTags are the keys of tags copied from the snapshots that some volume was created
	// without, to stay within AWS's tag limit with room for the operator tags (FitTags).
	DroppedTags []string `json:"droppedTags,omitempty"`
	// WithoutFSR are the data volumes' snapshots restored without fast snapshot restore
	// although it was asked for, and why (Status.WithoutFSR).
	WithoutFSR     []FSRSkip `json:"withoutFSR,omitempty"`
	ElapsedSeconds float64   `json:"elapsedSeconds"`
}

// Run restores the volumes of the backup in store.
func Run(ctx context.Context, c Cloud, pd PD, store *meta.Store, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.VolumeType == "" {
		o.VolumeType = "gp3"
	}
	if o.Scope == "" {
		o.Scope = ScopeAll
	}
	if o.Concurrency <= 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = defaultCleanupLimit
	}
	if o.FSRQuota == 0 {
		o.FSRQuota = DefaultFSRQuota
	}
	if o.Clock == nil {
		o.Clock = budget.RealClock
	}
	if o.Report == nil {
		o.Report = func(Status) {}
	}
	r := &restorer{c: c, pd: pd, store: store, o: o, out: o.Progress}
	if r.out == nil {
		r.out = io.Discard
	}
	start := o.Clock.Now()
	r.res = Result{RestoreID: o.RestoreID, Volumes: []Volume{}, Swept: []string{}, Deleted: []string{}}
	r.status.StartedAt = start
	r.report(PhaseStarting)
	err := r.run(ctx)
	end := o.Clock.Now()
	r.res.ElapsedSeconds = end.Sub(start).Seconds()
	if err != nil {
		r.status.Error = err.Error()
		r.report(PhaseFailed)
	} else {
		r.status.CompletedAt = end
		r.report(PhaseCompleted)
	}
	return r.res, err
}

// report sends the status in phase.
func (r *restorer) report(phase string) {
	r.status.Phase, r.status.ResolvedTS = phase, r.res.ResolvedTS
	r.o.Report(r.status)
}

type restorer struct {
	c     Cloud
	pd    PD
	store *meta.Store
	o     Options
	out   io.Writer
	res   Result

	// pdReady waits for PD's preparation, which runs while the volumes are created, and
	// returns its error.
	pdReady func() error

	mu      sync.Mutex
	created []string
	logMu   sync.Mutex
	status  Status // reported from the run's own goroutine only
}

// logf writes one progress line; lines come from concurrent goroutines.
func (r *restorer) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	_, _ = fmt.Fprintf(r.out, format+"\n", args...)
}

// backupMeta reads the backupmeta, retrying for Options.StorageRetry what may pass; a missing,
// incomplete or invalid backup, or ctx ending, is final at once.
func (r *restorer) backupMeta(ctx context.Context) (*meta.Record, error) {
	limit := r.o.StorageRetry
	if limit <= 0 {
		limit = DefaultStorageRetry
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		rec, err := r.store.BackupMeta(ctx)
		if err == nil || errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrIncomplete) || errors.Is(err, meta.ErrInvalid) || ctx.Err() != nil {
			return rec, err
		}
		wait := backoff.Doubling(time.Second, 15*time.Second, attempt)
		if time.Since(start)+wait > limit {
			return nil, fmt.Errorf("%w (read %d times over %s)", err, attempt, time.Since(start).Round(time.Second))
		}
		r.logf("Reading the backupmeta failed (attempt %d): %v; retrying in %s", attempt, err, wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// plan is one volume to create.
type plan struct {
	meta.StoreVolume
	spec cloud.VolumeSpec
	// sizeGiB is the snapshot's size.
	sizeGiB int32
	// created is the new volume's id once created.
	created string
}

func (r *restorer) run(ctx context.Context) error {
	rec, err := r.backupMeta(ctx)
	if err != nil {
		return fmt.Errorf("restore volumes: %w", err)
	}
	if rec.BackupID() == "" && !r.o.AllowUpstream {
		return fmt.Errorf("restore volumes: %w", ErrUpstream)
	}
	r.res.ResolvedTS = rec.ClusterInfo.ResolvedTS
	if err := r.check(ctx, rec); err != nil {
		return err
	}
	r.report(PhasePreparingPD)
	ts, err := r.recoveryTS(ctx, rec)
	if err != nil {
		return err
	}
	// PD is prepared while the volumes are created: a fresh cluster's PD is often still
	// starting when the restore begins, and the mark only has to be in place before TiKV
	// starts on a restored volume, which is after this step succeeded. The volumes are
	// recorded only once PD is prepared (pdReady), so a PD failure deletes them like any
	// other failure of the attempt.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pdDone := make(chan error, 1)
	go func() { pdDone <- r.preparePD(pctx, ts) }()
	r.pdReady = sync.OnceValue(func() error { return <-pdDone })
	err = r.volumes(ctx, rec)
	if err != nil {
		cancel() // a failed attempt does not wait for a PD that is not up yet
	}
	if perr := r.pdReady(); err == nil {
		err = perr
	}
	return err
}

// check reports the backup (BackupReport) and waits for the go of Options.Check.
func (r *restorer) check(ctx context.Context, rec *meta.Record) error {
	sub, err := BackupReport(rec)
	if err != nil {
		return fmt.Errorf("restore volumes: %w", err)
	}
	r.status.Backup = sub
	if r.o.Check == nil {
		return nil
	}
	r.report(PhaseAwaitingCheck)
	r.logf("Backup reported (%d TiKV stores, %d volumes); waiting until the target is checked against it", len(sub.TiKV.Stores), len(sub.Volumes()))
	if err := r.o.Check(ctx); err != nil {
		return fmt.Errorf("restore volumes: the target was not checked: %w", err)
	}
	r.logf("Target checked; restoring")
	return nil
}

// CaptureSkew is how far a commit on a snapshot's image may be past the snapshot's start time
// as AWS records it: the clock skew allowed between PD's TSO and AWS's snapshot start times
// (PD's TSO may also run up to its 3 s save window ahead of the wall clock after a PD
// restart), the bound the agent allows when it compares snapshot start times with the backup
// ts.
const CaptureSkew = 5 * time.Second

// RecoveryTS is the TSO a restored PD must be raised to: above every commit the snapshots'
// images can hold, so that restore-data's flashback commits above them (TiKV asserts that
// no key of a flashback has a later commit, and panics otherwise). The images hold commits
// up to their capture, past the resolved ts, so it is the latest snapshot start time plus
// CaptureSkew as a TSO (physical milliseconds, logical 0), and never below resolvedTS.
// Snapshots without a start time bound nothing.
func RecoveryTS(resolvedTS uint64, snaps []cloud.Snapshot) uint64 {
	ts := resolvedTS
	for _, s := range snaps {
		if s.Started.IsZero() {
			continue
		}
		if ms := s.Started.Add(CaptureSkew).UnixMilli(); ms > 0 {
			ts = max(ts, uint64(ms)<<tsoLogicalBits)
		}
	}
	return ts
}

// tsoLogicalBits is the width of a TSO's logical part.
const tsoLogicalBits = 18

// recoveryTS describes the snapshots of the volumes in scope and returns RecoveryTS of them.
func (r *restorer) recoveryTS(ctx context.Context, rec *meta.Record) (uint64, error) {
	var ids []string
	for _, v := range r.inScope(rec) {
		ids = append(ids, v.SnapshotID)
	}
	if len(ids) == 0 {
		return r.res.ResolvedTS, nil // nothing in scope: planning the volumes fails
	}
	snaps, err := r.c.DescribeSnapshots(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("restore volumes: describe the backup's snapshots for PD's TSO: %w", err)
	}
	// Snapshots that are not the member's to restore (plan checks them again before any
	// create) fail the step before PD is touched too.
	if err := rec.CheckSnapshots(snaps, rec.BackupID(), r.o.sourceNamespaces()); err != nil {
		return 0, fmt.Errorf("restore volumes: %w", err)
	}
	ts := RecoveryTS(r.res.ResolvedTS, snaps)
	r.logf("PD's TSO goes to %d: above the resolved ts %d and every commit the snapshots can hold (their latest start plus %s)", ts, r.res.ResolvedTS, CaptureSkew)
	return ts, nil
}

// inScope lists the backup's volumes that Options.Scope restores.
func (r *restorer) inScope(rec *meta.Record) []meta.StoreVolume {
	var vols []meta.StoreVolume
	for _, v := range rec.Volumes() {
		data := v.Type == meta.DataDirType
		if r.o.Scope == ScopeAll || (r.o.Scope == ScopeData) == data {
			vols = append(vols, v)
		}
	}
	return vols
}

// preparePD marks PD snapshot-recovering and raises its TSO to ts.
func (r *restorer) preparePD(ctx context.Context, ts uint64) error {
	r.logf("Marking PD snapshot-recovering and raising its TSO to %d", ts)
	if err := r.pd.MarkSnapshotRecovering(ctx); err != nil {
		return fmt.Errorf("mark PD snapshot-recovering: %w", err)
	}
	if err := r.pd.ResetTS(ctx, ts); err != nil {
		return fmt.Errorf("reset PD TSO to %d: %w", ts, err)
	}
	r.logf("PD is snapshot-recovering, its TSO at least %d", ts)
	return nil
}

// volumes creates the volumes from rec's snapshots and records them in restoremeta, or reuses
// the ones an earlier attempt recorded.
func (r *restorer) volumes(ctx context.Context, rec *meta.Record) error {
	done, err := r.store.RestoreMeta(ctx, r.o.RestoreID)
	switch {
	case err == nil:
		return r.reuse(ctx, done)
	case !errors.Is(err, meta.ErrNotFound):
		return fmt.Errorf("restore volumes: %w", err)
	}

	r.report(PhaseCreatingVolumes)
	if err := r.sweep(ctx); err != nil {
		return err
	}
	plans, err := r.plan(ctx, rec)
	if err != nil {
		return err
	}
	err = r.restore(ctx, rec, plans)
	if err != nil {
		r.res.Volumes, r.res.SizeGiB = []Volume{}, 0 // they are about to be deleted
		r.cleanup(ctx)
	}
	return err
}

// reuse returns the volumes an earlier attempt recorded, after checking they still exist.
func (r *restorer) reuse(ctx context.Context, done *meta.Record) error {
	r.res.Reused = true
	var ids []string
	for _, v := range done.Volumes() {
		if v.RestoreVolumeID != "" {
			ids = append(ids, v.RestoreVolumeID)
		}
	}
	r.logf("Restoremeta of %s exists; checking its %d volumes", r.o.RestoreID, len(ids))
	vols, err := r.c.WaitVolumes(ctx, ids)
	if err != nil {
		return fmt.Errorf("volumes recorded in restoremeta of %s: %w", r.o.RestoreID, err)
	}
	byID := map[string]cloud.Volume{}
	var errs []error
	for _, v := range vols {
		byID[v.ID] = v
		errs = append(errs, meta.CheckRestoredVolume(v, r.o.RestoreID))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("volumes recorded in restoremeta of %s: %w", r.o.RestoreID, err)
	}
	for _, v := range done.Volumes() {
		if v.RestoreVolumeID == "" {
			continue
		}
		nv := byID[v.RestoreVolumeID]
		r.res.Volumes = append(r.res.Volumes, Volume{StoreID: v.StoreID, Type: v.Type, BackupVolumeID: v.ID, SnapshotID: v.SnapshotID,
			VolumeID: nv.ID, AZ: nv.AZ, SizeGiB: nv.SizeGiB, FastRestored: nv.FastRestored})
		r.res.SizeGiB += int64(nv.SizeGiB)
	}
	return nil
}

// sweep deletes volumes tagged with this restore that no restoremeta records: an earlier
// attempt was killed before it could clean up.
func (r *restorer) sweep(ctx context.Context) error {
	left, err := r.c.ListVolumes(ctx, meta.RestoreTags(r.o.RestoreID))
	if err != nil {
		return fmt.Errorf("find volumes of an earlier attempt: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	ids := make([]string, len(left))
	for i, v := range left {
		ids[i] = v.ID
	}
	r.logf("Deleting %d volumes left by an earlier attempt: %v", len(ids), ids)
	if err := r.c.DeleteVolumes(ctx, ids); err != nil {
		return fmt.Errorf("delete volumes of an earlier attempt: %w", err)
	}
	r.res.Swept = ids
	return nil
}

// plan builds every volume spec and checks them before anything is created.
func (r *restorer) plan(ctx context.Context, rec *meta.Record) ([]plan, error) {
	vols := r.inScope(rec)
	if len(vols) == 0 {
		return nil, fmt.Errorf("no volume of the backup is in scope %s", r.o.Scope)
	}
	ids := make([]string, len(vols))
	for i, v := range vols {
		ids[i] = v.SnapshotID
	}
	snaps, err := r.c.DescribeSnapshots(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("describe the backup's snapshots: %w", err)
	}
	// Metadata is untrusted: every snapshot must be the account's and this backup's (its
	// identity tag, or for an upstream backup its recorded source volume), and of a namespace
	// the member may act on (its namespace tag, which a tenant copying another's backupmeta
	// cannot forge), before anything is created from it.
	if err := rec.CheckSnapshots(snaps, rec.BackupID(), r.o.sourceNamespaces()); err != nil {
		return nil, fmt.Errorf("plan volumes: %w", err)
	}
	byID := map[string]cloud.Snapshot{}
	for _, s := range snaps {
		byID[s.ID] = s
	}
	var plans []plan
	var errs []error
	for _, v := range vols {
		s, ok := byID[v.SnapshotID]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("snapshot %s of volume %s does not exist", v.SnapshotID, v.ID))
			continue
		case s.State != cloud.SnapshotCompleted:
			errs = append(errs, fmt.Errorf("snapshot %s of volume %s is %s, not completed", v.SnapshotID, v.ID, s.State))
			continue
		}
		az := r.o.TargetAZ
		if az == "" {
			az = v.AZ
		}
		if az == "" {
			errs = append(errs, fmt.Errorf("volume %s: no target AZ given and none recorded", v.ID))
			continue
		}
		// Room is left for the operator tags the agent adds once the volume's PV exists.
		tags, dropped, err := FitTags(r.tags(s), cloud.MaxTags-operatorTagCount)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume from %s: %w", s.ID, err))
			continue
		}
		if len(dropped) > 0 {
			r.logf("Volume from %s: dropped %d tags copied from the snapshot to stay within AWS's %d tags per volume: %s", s.ID, len(dropped), cloud.MaxTags, strings.Join(dropped, ", "))
			r.res.DroppedTags = append(r.res.DroppedTags, dropped...)
		}
		plans = append(plans, plan{StoreVolume: v, sizeGiB: s.SizeGiB, spec: cloud.VolumeSpec{SnapshotID: s.ID, AZ: az, Type: r.o.VolumeType,
			IOPS: r.o.IOPS, Throughput: r.o.Throughput, Encrypted: r.o.Encrypted, KMSKeyID: r.o.KMSKeyID, Tags: tags}})
	}
	slices.Sort(r.res.DroppedTags)
	r.res.DroppedTags = slices.Compact(r.res.DroppedTags)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plan volumes: %w", err)
	}
	return plans, nil
}

// tags are upstream's restore tags, the source snapshot's tags under snapshot/, the user's
// tags and, winning over all, fedbr's restore identity, pending mark and the restoring
// member's namespace (meta.TagNamespace: the snapshot's own, the backup's namespace, is only
// ever copied as snapshot/fedbr.io/namespace).
func (r *restorer) tags(s cloud.Snapshot) map[string]string {
	t := map[string]string{}
	for k, v := range s.Tags {
		if !strings.HasPrefix(k, snapshotTagPrefix) && cloud.CheckTag(snapshotTagPrefix+k, v) == nil {
			t[snapshotTagPrefix+k] = v
		}
	}
	t[TagRestoredBy] = "new"
	t[TagCSICluster] = "true"
	t[TagFromSnapshot] = s.ID
	maps.Copy(t, r.o.Tags)
	maps.Copy(t, meta.RestoreTags(r.o.RestoreID))
	maps.Copy(t, meta.PendingRestoreTags(r.o.Owner))
	maps.Copy(t, meta.NamespaceTags(r.o.Owner))
	return t
}

func (r *restorer) restore(ctx context.Context, rec *meta.Record, plans []plan) error {
	r.status.Volumes = len(plans)
	r.report(PhaseCreatingVolumes)
	var fast map[string]bool // snapshots FSR was enabled for
	if r.o.FSR {
		enabled, disable, err := r.enableFSR(ctx, plans)
		defer disable()
		if err != nil {
			return err
		}
		fast = enabled
	}
	if err := r.create(ctx, plans); err != nil {
		return err
	}
	ids := make([]string, len(plans))
	for i, p := range plans {
		ids[i] = p.created
	}
	r.report(PhaseWaitingVolumes)
	r.logf("Waiting for %d volumes to become available", len(ids))
	vols, err := r.c.WaitVolumes(ctx, ids)
	if err != nil {
		return fmt.Errorf("wait for restored volumes: %w", err)
	}
	out := rec.Clone()
	newOf := map[string]cloud.Volume{}
	for i, p := range plans {
		v := vols[i]
		if fast[p.SnapshotID] && !v.FastRestored {
			return fmt.Errorf("volume %s from snapshot %s is not fast-restored", v.ID, p.SnapshotID)
		}
		newOf[p.ID] = v
		r.res.Volumes = append(r.res.Volumes, Volume{StoreID: p.StoreID, Type: p.Type, BackupVolumeID: p.ID, SnapshotID: p.SnapshotID,
			VolumeID: v.ID, AZ: v.AZ, SizeGiB: v.SizeGiB, FastRestored: v.FastRestored})
		r.res.SizeGiB += int64(v.SizeGiB)
	}
	for si := range out.TiKV.Stores {
		for vi := range out.TiKV.Stores[si].Volumes {
			mv := &out.TiKV.Stores[si].Volumes[vi]
			if v, ok := newOf[mv.ID]; ok {
				mv.RestoreVolumeID, mv.RestoreAZ = v.ID, v.AZ
			}
		}
	}
	if out.Fedbr == nil {
		out.Fedbr = &meta.Extension{}
	}
	// Recorded only with PD prepared: a PD failure is a failure of this attempt, which deletes
	// its volumes like any other.
	if err := r.pdReady(); err != nil {
		return err
	}
	// A volume restoremeta records is never marked pending: the sweeper may delete a pending
	// volume once its member is gone, and a restored volume outlives its member (it is the
	// TidbCluster's once the restore completed).
	if err := r.c.UntagVolumes(ctx, ids, []string{meta.TagRestorePending}); err != nil {
		return fmt.Errorf("unmark the restored volumes as pending: %w", err)
	}
	if err := r.store.PutRestoreMeta(ctx, r.o.RestoreID, out); err != nil {
		return fmt.Errorf("record restored volumes: %w", err)
	}
	r.logf("Restored %d volumes (%d GiB); restoremeta written", len(r.res.Volumes), r.res.SizeGiB)
	return nil
}

// create creates every planned volume, at most Concurrency at once; the first failure
// stops the rest.
func (r *restorer) create(ctx context.Context, plans []plan) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, r.o.Concurrency)
	errs := make([]error, len(plans))
	ids := make([]string, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.logf("Creating a %s volume from %s (volume %s of store %d) in %s", p.spec.Type, p.SnapshotID, p.ID, p.StoreID, p.spec.AZ)
			v, err := r.c.CreateVolume(ctx, p.spec)
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			ids[i] = v.ID
			r.mu.Lock()
			r.created = append(r.created, v.ID)
			r.mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("create volumes: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create volumes: %w", err)
	}
	for i := range plans {
		plans[i].created = ids[i]
	}
	return nil
}

// cleanup deletes every volume this attempt created, and any other volume carrying the
// restore's tag (a create whose answer was lost), even when ctx was cancelled.
func (r *restorer) cleanup(ctx context.Context) {
	r.report(PhaseCleaningUp)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
	defer cancel()
	r.mu.Lock()
	ids := slices.Clone(r.created)
	r.mu.Unlock()
	// Volumes a restoremeta of this restore records belong to an attempt that finished
	// (a concurrent run with the same id, which fedbr's Jobs never start): keep them.
	recorded := map[string]bool{}
	if rm, err := r.store.RestoreMeta(cctx, r.o.RestoreID); err == nil {
		for _, id := range rm.RestoredVolumes() {
			recorded[id] = true
		}
	}
	tagged, err := r.c.ListVolumes(cctx, meta.RestoreTags(r.o.RestoreID))
	if err != nil {
		r.logf("Listing volumes tagged %s=%s failed: %v", meta.TagRestore, r.o.RestoreID, err)
	}
	for _, v := range tagged {
		if !slices.Contains(ids, v.ID) {
			ids = append(ids, v.ID)
		}
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return recorded[id] })
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	r.logf("Deleting the %d volumes of the failed attempt", len(ids))
	if err := r.c.DeleteVolumes(cctx, ids); err != nil {
		r.logf("Deleting volumes failed; they carry %s=%s for a later sweep: %v", meta.TagRestore, r.o.RestoreID, err)
		return
	}
	r.res.Deleted = ids
}
