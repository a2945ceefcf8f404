// Package clean deletes a backup: its snapshots, paced at a configured rate inside the
// account's API budget, then its metadata. It refuses to call a completed backup clean when
// its backupmeta is gone (the snapshots it listed may have leaked); it then sweeps the
// snapshots carrying the backup's identity tags and reports them. A failed backup without
// backupmeta is cleanable. When the backup's snapshot step may have left CreateSnapshots calls
// unanswered (Options.Expected), it first waits, within a bound, until AWS shows a snapshot of
// every volume the step was given, so that what those calls made is deleted with the rest. A storage holding another backup's backupmeta (where this backup's
// snapshot step was refused) is left alone: only this backup's tagged snapshots go. Every step
// is idempotent, so a retried clean converges.
package clean

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/meta"
)

// Outcome is how the backup being cleaned ended.
type Outcome string

// Outcomes of a backup. The zero value counts as Completed, the safe assumption.
const (
	Completed Outcome = "completed"
	Failed    Outcome = "failed"
)

// Delete ratio bounds, in snapshots per second (upstream's snapshotsDeleteRatio range).
const (
	MinDeleteRatio     = 0.1
	MaxDeleteRatio     = 2.0
	DefaultDeleteRatio = 1.0
)

// Settle bounds: AWS documents no bound for how long a call runs after its caller is gone nor
// for how long what it made stays invisible to DescribeSnapshots ("Eventual consistency in the
// Amazon EC2 API" advises retrying a describe with backoff up to a few minutes), so the wait
// is fedbr's: as long as the provider's own consistency window (internal/cloud/aws).
const (
	DefaultSettleTimeout  = 2 * time.Minute
	DefaultSettleInterval = 5 * time.Second
)

// maxInFlight bounds concurrent DeleteSnapshot calls, so a slow call does not lower the
// paced rate.
const maxInFlight = 8

// ErrMetaMissing marks a completed backup whose backupmeta is gone.
var ErrMetaMissing = errors.New("backupmeta is missing for a backup that completed; its snapshots may have leaked")

// Options configure a clean.
type Options struct {
	// BackupID is the identity the backup's snapshots are tagged with (meta.BackupTags);
	// empty means the one recorded in backupmeta, if any. Without an identity there is no
	// sweep for orphans.
	BackupID string
	Outcome  Outcome
	// DeleteRatio is the pace of snapshot deletion in snapshots per second; 0 means
	// DefaultDeleteRatio.
	DeleteRatio float64
	// SourceNamespaces are the data-plane namespaces (path.Match globs) whose snapshots the
	// clean may delete: every snapshot it would delete must carry meta.TagNamespace with one of
	// them (meta.CheckNamespace), or nothing is deleted and the clean fails with
	// meta.ErrForeignSnapshot, as for any snapshot not the backup's. The agent passes the
	// namespaces its policy lets the member's owner act on; nil checks no namespace (a clean
	// run by hand with the operator's identity).
	SourceNamespaces meta.Namespaces
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// AcceptMissingMeta lets a completed backup without backupmeta be cleaned after the
	// sweep: an operator's explicit acknowledgement that whatever backupmeta listed beyond
	// the tagged snapshots is lost (otherwise such a clean fails on every retry).
	AcceptMissingMeta bool
	// Expected are the volumes the backup's snapshot step was given, when that step may have
	// left CreateSnapshots calls unanswered (it was stopped, or failed, before it reported every
	// snapshot started): AWS runs a call whose caller is gone, and shows what it made some time
	// later. Before deleting anything the clean then lists the backup's tagged snapshots until
	// every expected volume has one (listed by backupmeta or carrying the identity tag), for at
	// most SettleTimeout from its start; a volume still without one is reported (Unseen) and
	// whatever AWS shows for it later is the agent's orphan sweeper's. Needs a backup identity;
	// ignored with DryRun.
	Expected []string
	// SettleTimeout bounds that wait (0: DefaultSettleTimeout); SettleInterval spaces its
	// listings (0: DefaultSettleInterval).
	SettleTimeout  time.Duration
	SettleInterval time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Report receives the machine-readable status on every change; nil drops it.
	Report func(Status)
	// Clock paces deletions and measures elapsed time; nil is the wall clock.
	Clock budget.Clock
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.BackupID != "" {
		if err := meta.ValidateID(o.BackupID); err != nil {
			return fmt.Errorf("backup id: %w", err)
		}
	}
	switch o.Outcome {
	case "", Completed, Failed:
	default:
		return fmt.Errorf("backup outcome %q: want %s or %s", o.Outcome, Completed, Failed)
	}
	if o.DeleteRatio != 0 && (o.DeleteRatio < MinDeleteRatio || o.DeleteRatio > MaxDeleteRatio) {
		return fmt.Errorf("delete ratio %v: want %v to %v snapshots per second", o.DeleteRatio, MinDeleteRatio, MaxDeleteRatio)
	}
	for _, v := range o.Expected {
		if !volumeIDPattern.MatchString(v) {
			return fmt.Errorf("expected volume %q: want an EBS volume id (vol-…)", v)
		}
	}
	if err := o.SourceNamespaces.Validate(); err != nil {
		return fmt.Errorf("source namespaces: %w", err)
	}
	if o.SettleTimeout < 0 || o.SettleInterval < 0 {
		return fmt.Errorf("settle timeout %s and interval %s: want non-negative durations", o.SettleTimeout, o.SettleInterval)
	}
	return nil
}

var volumeIDPattern = regexp.MustCompile(`^vol-[0-9a-zA-Z]{1,64}$`)

// Status is the state of a clean, for the member's status.steps.
type Status struct {
	Phase string `json:"phase"`
	// Seen of Expected volumes have a snapshot of the backup (phase Settling).
	Seen     int `json:"seen,omitempty"`
	Expected int `json:"expected,omitempty"`
	// Deleted of Total snapshots to delete were deleted (from DeletingSnapshots on).
	Deleted int `json:"deleted"`
	Total   int `json:"total"`
	// Error says why the clean failed (phase Failed only).
	Error string `json:"error,omitempty"`
}

// Phases reported in Status, in the order they happen.
const (
	// PhaseStarting: reading backupmeta and sweeping for orphaned snapshots.
	PhaseStarting = report.PhaseStarting
	// PhaseSettling: waiting for AWS to show a snapshot of every expected volume (Seen of
	// Expected), before anything is deleted (Options.Expected).
	PhaseSettling = report.PhaseSettling
	// PhaseDeletingSnapshots: deleting snapshots (Deleted of Total).
	PhaseDeletingSnapshots = report.PhaseDeletingSnapshots
	// PhaseDeletingMetadata: every snapshot is gone; the metadata objects are being deleted.
	PhaseDeletingMetadata = report.PhaseDeletingMetadata
	// PhaseCompleted: the backup is clean (or, with DryRun, reported).
	PhaseCompleted = report.PhaseCompleted
	// PhaseFailed: the clean failed (see Error); a retry continues it.
	PhaseFailed = report.PhaseFailed
)

// Summary is the result of a clean, printed as JSON.
type Summary struct {
	BackupID string `json:"backupID,omitempty"`
	// MetaFound says whether backupmeta was there; AlreadyCleaned that an earlier clean
	// finished (its tombstone is there and backupmeta is gone).
	MetaFound      bool `json:"metaFound"`
	AlreadyCleaned bool `json:"alreadyCleaned"`
	DryRun         bool `json:"dryRun,omitempty"`
	// Listed are the snapshots backupmeta lists.
	Listed []string `json:"listed"`
	// Orphans are snapshots carrying the backup's identity tags that backupmeta does not
	// list (or all of them when it is missing).
	Orphans []string `json:"orphans"`
	// Deleted were deleted now; AlreadyGone did not exist any more.
	Deleted     []string `json:"deleted"`
	AlreadyGone []string `json:"alreadyGone"`
	// Unseen are the expected volumes (Options.Expected) of which AWS showed no snapshot of
	// the backup when the settle wait ended; SettleSeconds is how long it waited.
	Unseen        []string `json:"unseen,omitempty"`
	SettleSeconds float64  `json:"settleSeconds,omitempty"`
	// OtherBackup names the backup whose backupmeta the storage holds when it is not this
	// one's (this backup's snapshot step was refused there); its metadata is left alone.
	OtherBackup string `json:"otherBackup,omitempty"`
	// Metadata are the deleted metadata objects: only those fedbr writes for a backup
	// (meta.Written). LeftAlone are the other objects under the prefix, which clean never
	// deletes (another backup's below a prefix that names its parent, a user's files).
	Metadata       []string `json:"metadata"`
	LeftAlone      []string `json:"leftAlone,omitempty"`
	ElapsedSeconds float64  `json:"elapsedSeconds"`
	// Result is "cleaned", "dry-run" or "failed"; Error says why it failed.
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// Run cleans the backup whose metadata is in store. On error the summary still reports
// what was found and done.
func Run(ctx context.Context, snaps cloud.Snapshots, store *meta.Store, o Options) (Summary, error) {
	if err := o.Validate(); err != nil {
		return Summary{Result: "failed", Error: err.Error()}, err
	}
	c := &cleaner{snaps: snaps, store: store, o: o, out: o.Progress}
	if c.out == nil {
		c.out = io.Discard
	}
	if c.o.Clock == nil {
		c.o.Clock = budget.RealClock
	}
	if c.o.DeleteRatio == 0 {
		c.o.DeleteRatio = DefaultDeleteRatio
	}
	if c.o.Outcome == "" {
		c.o.Outcome = Completed
	}
	if c.o.Report == nil {
		c.o.Report = func(Status) {}
	}
	if c.o.SettleTimeout == 0 {
		c.o.SettleTimeout = DefaultSettleTimeout
	}
	if c.o.SettleInterval == 0 {
		c.o.SettleInterval = DefaultSettleInterval
	}
	c.report(PhaseStarting)
	start := c.o.Clock.Now()
	c.start = start
	c.sum = Summary{BackupID: o.BackupID, DryRun: o.DryRun, Listed: []string{}, Orphans: []string{}, Deleted: []string{},
		AlreadyGone: []string{}, Metadata: []string{}}
	err := c.run(ctx)
	c.sum.ElapsedSeconds = c.o.Clock.Now().Sub(start).Seconds()
	switch {
	case err != nil:
		c.sum.Result, c.sum.Error = "failed", err.Error()
		c.status.Error = err.Error()
		c.report(PhaseFailed)
	case o.DryRun:
		c.sum.Result = "dry-run"
		c.report(PhaseCompleted)
	default:
		c.sum.Result = "cleaned"
		c.report(PhaseCompleted)
	}
	return c.sum, err
}

// report sends the status in phase; deletions report from several goroutines.
func (c *cleaner) report(phase string) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	c.status.Phase = phase
	c.o.Report(c.status)
}

type cleaner struct {
	snaps cloud.Snapshots
	store *meta.Store
	o     Options
	out   io.Writer
	sum   Summary
	// rec is the backup's backupmeta when found (MetaFound).
	rec   *meta.Record
	start time.Time
	logMu sync.Mutex

	statusMu sync.Mutex
	status   Status
}

// logf writes one progress line; lines come from concurrent deletions.
func (c *cleaner) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	_, _ = fmt.Fprintf(c.out, format+"\n", args...)
}

func (c *cleaner) run(ctx context.Context) error {
	c.logf("Reading backupmeta")
	rec, err := c.store.BackupMetaAsIs(ctx)
	switch {
	case err == nil:
		if owner, foreign := c.foreign(rec); foreign {
			// The snapshot step refuses a prefix holding another backup's backupmeta, so this
			// backup wrote nothing here: its clean is its own tagged snapshots, and the
			// prefix is left as it is (upstream's clean deleted whatever the prefix listed).
			c.sum.OtherBackup = owner
			c.logf("The backupmeta here is %s's, not %s's; leaving the metadata and deleting only snapshots tagged %s=%s",
				owner, c.sum.BackupID, meta.TagBackup, c.sum.BackupID)
			break
		}
		c.sum.MetaFound = true
		c.rec = rec
		c.sum.Listed = append(c.sum.Listed, rec.SnapshotIDs()...)
		if rec.Fedbr != nil && rec.Fedbr.BackupID != "" {
			c.sum.BackupID = rec.Fedbr.BackupID
		}
	case errors.Is(err, meta.ErrNotFound):
		// Read the tombstone only now: it matters only when backupmeta is gone.
		_, terr := c.store.Tombstone(ctx)
		switch {
		case terr == nil:
			c.sum.AlreadyCleaned = true
		case !errors.Is(terr, meta.ErrNotFound):
			return fmt.Errorf("backupmeta is missing and the clean tombstone is unreadable: %w", terr)
		}
	default:
		// Unreadable is not missing: never delete the metadata of snapshots we could not
		// list (upstream reported success here and leaked them).
		return fmt.Errorf("read backupmeta: %w", err)
	}

	if err := c.sweep(ctx); err != nil {
		return err
	}
	missing := !c.sum.MetaFound && !c.sum.AlreadyCleaned
	if missing {
		c.logf("Backupmeta is missing; the backup %s, %d tagged snapshots found", c.o.Outcome, len(c.sum.Orphans))
	}
	if err := c.deleteSnapshots(ctx); err != nil {
		return err
	}
	if missing && c.o.Outcome != Failed && !c.o.AcceptMissingMeta {
		if c.sum.OtherBackup != "" {
			return fmt.Errorf("%w: the backupmeta in this storage is %s's (snapshots carrying this backup's identity tags: %v; deleted now: %d)",
				ErrMetaMissing, c.sum.OtherBackup, c.sum.Orphans, len(c.sum.Deleted))
		}
		return fmt.Errorf("%w (snapshots carrying its identity tags: %v; deleted now: %d)", ErrMetaMissing, c.sum.Orphans, len(c.sum.Deleted))
	}
	if c.sum.OtherBackup != "" {
		return nil // the metadata is the other backup's
	}
	return c.deleteMetadata(ctx)
}

// foreign says whether rec, found in the storage of the backup being cleaned, is another
// backup's, and names its owner: one with another identity, or one without fedbr's extension
// (upstream BR's) while the clean has an identity of its own. fedbr's snapshot step always
// records its identity.
func (c *cleaner) foreign(rec *meta.Record) (string, bool) {
	switch {
	case c.sum.BackupID == "":
		return "", false
	case rec.Fedbr == nil || rec.Fedbr.BackupID == "":
		return "an upstream BR backup", true
	case rec.Fedbr.BackupID != c.sum.BackupID:
		return fmt.Sprintf("backup %s", rec.Fedbr.BackupID), true
	}
	return "", false
}

// sweep finds the snapshots carrying the backup's identity that backupmeta does not list,
// once every expected volume has one or the settle wait is over (Options.Expected).
func (c *cleaner) sweep(ctx context.Context) error {
	if c.sum.BackupID == "" {
		c.logf("No backup identity known; skipping the sweep for orphaned snapshots")
		if len(c.o.Expected) > 0 {
			c.sum.Unseen = slices.Sorted(slices.Values(c.o.Expected))
		}
		return nil
	}
	c.logf("Listing snapshots tagged %s=%s", meta.TagBackup, c.sum.BackupID)
	var found []cloud.Snapshot
	for {
		var err error
		found, err = c.snaps.ListSnapshots(ctx, meta.BackupTags(c.sum.BackupID))
		if err != nil {
			return fmt.Errorf("sweep snapshots of backup %s: %w", c.sum.BackupID, err)
		}
		settled, err := c.settled(ctx, found)
		if err != nil {
			return err
		}
		if settled {
			break
		}
	}
	for _, s := range found {
		if !slices.Contains(c.sum.Listed, s.ID) {
			c.sum.Orphans = append(c.sum.Orphans, s.ID)
		}
	}
	slices.Sort(c.sum.Orphans)
	return nil
}

// settled says whether the sweep may go on with found: every expected volume has a snapshot of
// the backup, or the settle wait is over (then the volumes without one are Unseen). Otherwise
// it reports how many have one and waits SettleInterval before the next listing.
func (c *cleaner) settled(ctx context.Context, found []cloud.Snapshot) (bool, error) {
	if len(c.o.Expected) == 0 {
		return true, nil
	}
	seen := map[string]bool{}
	if c.rec != nil {
		for _, v := range c.rec.Volumes() {
			if v.SnapshotID != "" {
				seen[v.ID] = true
			}
		}
	}
	for _, s := range found {
		seen[s.VolumeID] = true
	}
	var unseen []string
	for _, v := range c.o.Expected {
		if !seen[v] && !slices.Contains(unseen, v) {
			unseen = append(unseen, v)
		}
	}
	slices.Sort(unseen)
	waited := c.o.Clock.Now().Sub(c.start)
	c.sum.SettleSeconds = waited.Seconds()
	switch {
	case len(unseen) == 0:
		c.logf("Every one of the %d volumes the snapshot step was given has a snapshot of backup %s", len(c.o.Expected), c.sum.BackupID)
		return true, nil
	case c.o.DryRun:
		c.sum.Unseen = unseen
		return true, nil
	case waited >= c.o.SettleTimeout:
		c.sum.Unseen = unseen
		c.logf("After %s, AWS shows no snapshot of backup %s of %d volumes the snapshot step was given (%s): it never started them, or a CreateSnapshots still to land makes one, which the agent's orphan sweeper deletes",
			waited.Round(time.Second), c.sum.BackupID, len(unseen), strings.Join(unseen, ", "))
		return true, nil
	}
	c.statusMu.Lock()
	changed := c.status.Phase != PhaseSettling || c.status.Seen != len(c.o.Expected)-len(unseen)
	c.status.Seen, c.status.Expected = len(c.o.Expected)-len(unseen), len(c.o.Expected)
	c.statusMu.Unlock()
	if changed {
		c.logf("Waiting for AWS to show a snapshot of %d of the %d volumes the snapshot step was given (a CreateSnapshots it sent may still run): %s",
			len(unseen), len(c.o.Expected), strings.Join(unseen, ", "))
		c.report(PhaseSettling)
	}
	select {
	case <-ctx.Done():
		return false, fmt.Errorf("wait for the snapshot step's calls to settle: %w", ctx.Err())
	case <-c.o.Clock.After(c.o.SettleInterval):
	}
	return false, nil
}

// deleteSnapshots deletes the listed and orphaned snapshots that still exist, paced at the
// delete ratio.
func (c *cleaner) deleteSnapshots(ctx context.Context) error {
	ids := slices.Concat(c.sum.Listed, c.sum.Orphans)
	if len(ids) == 0 {
		return nil
	}
	existing, err := c.snaps.DescribeSnapshots(ctx, ids)
	if err != nil {
		return fmt.Errorf("describe the backup's snapshots: %w", err)
	}
	if err := c.check(existing); err != nil {
		return fmt.Errorf("delete snapshots (none deleted; metadata kept): %w", err)
	}
	exists := map[string]bool{}
	for _, s := range existing {
		exists[s.ID] = true
	}
	var todo []string
	for _, id := range ids {
		if exists[id] {
			todo = append(todo, id)
		} else {
			c.sum.AlreadyGone = append(c.sum.AlreadyGone, id)
		}
	}
	c.logf("%d snapshots to delete, %d already gone", len(todo), len(c.sum.AlreadyGone))
	c.statusMu.Lock()
	c.status.Total = len(todo)
	c.statusMu.Unlock()
	c.report(PhaseDeletingSnapshots)
	if c.o.DryRun {
		for _, id := range todo {
			c.logf("Would delete snapshot %s", id)
		}
		return nil
	}
	pace := budget.NewBucket(budget.Rate{Burst: 1, PerSecond: c.o.DeleteRatio}, c.o.Clock)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	sem := make(chan struct{}, maxInFlight)
	for _, id := range todo {
		if err := pace.Wait(ctx); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("wait to delete snapshot %s: %w", id, err))
			mu.Unlock()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := c.snaps.DeleteSnapshots(ctx, []string{id})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				c.logf("Deleting snapshot %s failed: %v", id, err)
				return
			}
			c.sum.Deleted = append(c.sum.Deleted, id)
			c.logf("Deleted snapshot %s (%d/%d)", id, len(c.sum.Deleted), len(todo))
			c.statusMu.Lock()
			c.status.Deleted = len(c.sum.Deleted)
			c.statusMu.Unlock()
			c.report(PhaseDeletingSnapshots)
		}()
	}
	wg.Wait()
	slices.Sort(c.sum.Deleted)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete snapshots (%d of %d deleted; metadata kept for a retry): %w", len(c.sum.Deleted), len(todo), err)
	}
	return nil
}

// check refuses, before anything is deleted, every existing snapshot that is not this
// backup's: not the account's, or (with a backup identity) not tagged with it, or (listed by
// backupmeta) not taken of the volume it lists it for, or (with SourceNamespaces) not tagged
// with a namespace the clean may act on. A backupmeta naming another backup's snapshot, or
// copied whole from another tenant's storage, must not make clean delete it.
func (c *cleaner) check(existing []cloud.Snapshot) error {
	var errs []error
	if c.rec != nil {
		errs = append(errs, c.rec.CheckSnapshots(existing, c.sum.BackupID, c.o.SourceNamespaces))
	}
	for _, s := range existing {
		if slices.Contains(c.sum.Orphans, s.ID) {
			err := meta.CheckSnapshot(s, c.sum.BackupID, "")
			if err == nil {
				err = meta.CheckNamespace(s, c.sum.BackupID, c.o.SourceNamespaces)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteMetadata leaves a tombstone and deletes everything else, backupmeta last.
func (c *cleaner) deleteMetadata(ctx context.Context) error {
	c.report(PhaseDeletingMetadata)
	if c.o.DryRun {
		keys, err := c.store.Keys(ctx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			switch {
			case k == meta.TombstoneKey:
			case meta.Written(k):
				c.logf("Would delete metadata %s", k)
			default:
				c.sum.LeftAlone = append(c.sum.LeftAlone, k)
			}
		}
		c.logLeftAlone()
		return nil
	}
	ts := meta.Tombstone{BackupID: c.sum.BackupID, Snapshots: slices.Concat(c.sum.Deleted, c.sum.AlreadyGone),
		CleanedAt: c.o.Clock.Now().UTC().Truncate(time.Second)}
	if prev, err := c.store.Tombstone(ctx); err == nil {
		ts.Snapshots = append(ts.Snapshots, prev.Snapshots...)
		slices.Sort(ts.Snapshots)
		ts.Snapshots = slices.Compact(ts.Snapshots)
	}
	if err := c.store.PutTombstone(ctx, ts); err != nil {
		return err
	}
	deleted, left, err := c.store.DeleteWritten(ctx)
	c.sum.Metadata = append(c.sum.Metadata, deleted...)
	c.sum.LeftAlone = left
	if err != nil {
		return err
	}
	c.logf("Deleted %d metadata objects", len(deleted))
	c.logLeftAlone()
	return nil
}

// logLeftAlone says which objects under the prefix clean leaves because fedbr did not write
// them for this backup (the first ten, and how many).
func (c *cleaner) logLeftAlone() {
	if n := len(c.sum.LeftAlone); n > 0 {
		c.logf("Leaving %d objects under the prefix that fedbr does not write for a backup: %s", n, strings.Join(c.sum.LeftAlone[:min(n, 10)], ", "))
	}
}
