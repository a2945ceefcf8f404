// Package size computes what a backup's snapshots occupy: the full size of each volume's
// snapshot and the incremental size over the previous snapshot of the same volume (what
// the backup really added to the bill). It runs off the critical path, after the snapshots
// completed, and reports how long it took.
package size

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/meta"
)

// Level selects what to compute.
type Level string

// Levels. Full needs no previous snapshot and usually no block listing at all
// (fullSnapshotSizeInBytes); All also lists the changed blocks.
const (
	All  Level = "all"
	Full Level = "full"
)

// Cloud is what sizing needs from the provider.
type Cloud interface {
	cloud.Snapshots
	cloud.Sizer
}

// Options configure a size run.
type Options struct {
	// Level defaults to All.
	Level Level
	// Previous is the previous backup of the same volumes; its snapshot of each volume is the
	// base of the incremental size. When nil, the previous snapshot of each volume is
	// discovered from the account (see Run).
	Previous *meta.Record
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Clock measures elapsed time; nil is the wall clock.
	Clock budget.Clock
}

// VolumeSize is the size of one volume's snapshot.
type VolumeSize struct {
	StoreID    uint64 `json:"storeID"`
	VolumeID   string `json:"volumeID"`
	Type       string `json:"type"`
	SnapshotID string `json:"snapshotID"`
	// PreviousSnapshotID is the base of the incremental size; empty means there was none
	// and the incremental size is the full size.
	PreviousSnapshotID string `json:"previousSnapshotID,omitempty"`
	FullBytes          int64  `json:"fullBytes"`
	IncrementalBytes   int64  `json:"incrementalBytes"`
	// ElapsedSeconds is how long this snapshot's sizing took (cloud.Size.Elapsed).
	ElapsedSeconds float64 `json:"elapsedSeconds"`
}

// Summary is the result, printed as JSON.
type Summary struct {
	Level   Level        `json:"level"`
	Volumes []VolumeSize `json:"volumes"`
	// FullBytes and IncrementalBytes are the totals over all volumes.
	FullBytes          int64   `json:"fullBytes"`
	IncrementalBytes   int64   `json:"incrementalBytes"`
	Full               string  `json:"full"`
	Incremental        string  `json:"incremental"`
	ElapsedSeconds     float64 `json:"elapsedSeconds"`
	PreviousDiscovered bool    `json:"previousDiscovered,omitempty"`
}

// ErrNotCompleted marks a snapshot that cannot be sized yet.
var ErrNotCompleted = errors.New("snapshot is not completed")

// Run sizes the snapshots of the backupmeta in store.
//
// Without Options.Previous, the previous snapshot of a volume is the newest completed
// snapshot of the same source volume started before this one. It is found with one
// listing per distinct set of source-volume tags (a snapshot carries its volume's tags; the
// EBS CSI driver tags every volume it makes), so the listing stays small; a volume without
// tags falls back to listing all of the account's snapshots.
func Run(ctx context.Context, c Cloud, store *meta.Store, o Options) (Summary, error) {
	if o.Level == "" {
		o.Level = All
	}
	if o.Level != All && o.Level != Full {
		return Summary{}, fmt.Errorf("size level %q: want %s or %s", o.Level, All, Full)
	}
	if o.Clock == nil {
		o.Clock = budget.RealClock
	}
	out := o.Progress
	if out == nil {
		out = io.Discard
	}
	logf := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format+"\n", args...) }
	start := o.Clock.Now()
	sum := Summary{Level: o.Level, Volumes: []VolumeSize{}}

	rec, err := store.BackupMeta(ctx)
	if err != nil {
		return sum, fmt.Errorf("size backup: %w", err)
	}
	vols := rec.Volumes()
	ids := rec.SnapshotIDs()
	logf("Describing %d snapshots", len(ids))
	described, err := c.DescribeSnapshots(ctx, ids)
	if err != nil {
		return sum, fmt.Errorf("size backup: %w", err)
	}
	byID := map[string]cloud.Snapshot{}
	for _, s := range described {
		byID[s.ID] = s
	}
	for _, id := range ids {
		s, ok := byID[id]
		switch {
		case !ok:
			return sum, fmt.Errorf("size snapshot %s: it does not exist", id)
		case s.State != cloud.SnapshotCompleted:
			return sum, fmt.Errorf("size snapshot %s (%s): %w", id, s.State, ErrNotCompleted)
		}
	}

	prev := map[string]string{} // volume id → previous snapshot id
	if o.Level == All {
		if o.Previous != nil {
			for _, v := range o.Previous.Volumes() {
				if v.SnapshotID != "" {
					prev[v.ID] = v.SnapshotID
				}
			}
			if prev, err = sameLineage(ctx, c, vols, byID, prev, logf); err != nil {
				return sum, err
			}
		} else {
			sum.PreviousDiscovered = true
			if prev, err = discover(ctx, c, vols, byID, logf); err != nil {
				return sum, err
			}
		}
	}

	reqs := make([]cloud.SizeRequest, len(vols))
	for i, v := range vols {
		reqs[i] = cloud.SizeRequest{SnapshotID: v.SnapshotID}
		if p := prev[v.ID]; p != "" && p != v.SnapshotID {
			reqs[i].PreviousID = p
		}
	}
	logf("Sizing %d snapshots (%d incremental)", len(reqs), countPrevious(reqs))
	sizes, err := c.SnapshotSizes(ctx, reqs)
	if err != nil {
		return sum, fmt.Errorf("size backup: %w", err)
	}
	for i, v := range vols {
		vs := VolumeSize{StoreID: v.StoreID, VolumeID: v.ID, Type: v.Type, SnapshotID: v.SnapshotID,
			PreviousSnapshotID: reqs[i].PreviousID, FullBytes: sizes[i].FullBytes, IncrementalBytes: sizes[i].IncrementalBytes,
			ElapsedSeconds: sizes[i].Elapsed.Seconds()}
		sum.Volumes = append(sum.Volumes, vs)
		sum.FullBytes += vs.FullBytes
		sum.IncrementalBytes += vs.IncrementalBytes
		logf("Volume %s of store %d (snapshot %s): full %s, incremental %s, sized in %s", v.ID, v.StoreID, v.SnapshotID,
			Readable(vs.FullBytes), Readable(vs.IncrementalBytes), sizes[i].Elapsed.Round(time.Millisecond))
	}
	sum.Full, sum.Incremental = Readable(sum.FullBytes), Readable(sum.IncrementalBytes)
	sum.ElapsedSeconds = o.Clock.Now().Sub(start).Seconds()
	logf("Backup size: full %s, incremental %s, %d snapshots sized in %.1fs in all", sum.Full, sum.Incremental, len(sum.Volumes), sum.ElapsedSeconds)
	return sum, nil
}

func countPrevious(reqs []cloud.SizeRequest) int {
	n := 0
	for _, r := range reqs {
		if r.PreviousID != "" {
			n++
		}
	}
	return n
}

// discover finds each volume's previous completed snapshot.
func discover(ctx context.Context, c Cloud, vols []meta.StoreVolume, byID map[string]cloud.Snapshot, logf func(string, ...any)) (map[string]string, error) {
	groups := map[string]map[string]string{} // tag-set key → source tags
	groupOf := map[string]string{}           // volume id → tag-set key
	for _, v := range vols {
		tags := sourceTags(byID[v.SnapshotID].Tags)
		k := tagKey(tags)
		groups[k] = tags
		groupOf[v.ID] = k
	}
	listed := map[string][]cloud.Snapshot{}
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		logf("Listing earlier snapshots tagged %v", groups[k])
		snaps, err := c.ListSnapshots(ctx, groups[k])
		if err != nil {
			return nil, fmt.Errorf("find previous snapshots: %w", err)
		}
		listed[k] = snaps
	}
	prev := map[string]string{}
	for _, v := range vols {
		cur := byID[v.SnapshotID]
		var best cloud.Snapshot
		for _, s := range listed[groupOf[v.ID]] {
			if s.VolumeID != v.ID || s.ID == cur.ID || s.State != cloud.SnapshotCompleted || !s.Started.Before(cur.Started) {
				continue
			}
			if best.ID == "" || s.Started.After(best.Started) {
				best = s
			}
		}
		if best.ID != "" {
			prev[v.ID] = best.ID
		}
	}
	return prev, nil
}

// sameLineage keeps the previous snapshots given (prev, by volume id) that ListChangedBlocks
// can compare a volume's snapshot with: of the same volume and started before it (EBS direct
// compares "two snapshots of the same volume/snapshot lineage"; other pairs are a
// ValidationException). A previous backup that names another volume's snapshot, a later one,
// or one that no longer exists leaves that volume sized in full, with a line saying why.
func sameLineage(ctx context.Context, c Cloud, vols []meta.StoreVolume, byID map[string]cloud.Snapshot, prev map[string]string, logf func(string, ...any)) (map[string]string, error) {
	var ids []string
	for _, v := range vols {
		if p := prev[v.ID]; p != "" && p != v.SnapshotID && !slices.Contains(ids, p) {
			ids = append(ids, p)
		}
	}
	if len(ids) == 0 {
		return prev, nil
	}
	described, err := c.DescribeSnapshots(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("describe the previous backup's snapshots: %w", err)
	}
	prevOf := map[string]cloud.Snapshot{}
	for _, s := range described {
		prevOf[s.ID] = s
	}
	out := map[string]string{}
	for _, v := range vols {
		p := prev[v.ID]
		if p == "" || p == v.SnapshotID {
			continue
		}
		ps, cur := prevOf[p], byID[v.SnapshotID]
		switch {
		case ps.ID == "":
			logf("Volume %s: the previous backup's snapshot %s does not exist; sizing it in full", v.ID, p)
		case ps.VolumeID != cur.VolumeID:
			logf("Volume %s: the previous backup's snapshot %s is of volume %s, another lineage; sizing it in full", v.ID, p, ps.VolumeID)
		case ps.State != cloud.SnapshotCompleted || !ps.Started.Before(cur.Started):
			logf("Volume %s: the previous backup's snapshot %s is not a completed snapshot older than %s; sizing it in full", v.ID, p, v.SnapshotID)
		default:
			out[v.ID] = p
		}
	}
	return out, nil
}

// sourceTags are a snapshot's tags without fedbr's identity tags: the tags copied from its
// source volume, shared by every snapshot of that volume.
func sourceTags(tags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		if !strings.HasPrefix(k, "fedbr.io/") {
			out[k] = v
		}
	}
	return out
}

func tagKey(tags map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		fmt.Fprintf(&b, "%q=%q;", k, tags[k])
	}
	return b.String()
}

// Readable formats bytes in binary units ("1.5 GiB").
func Readable(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 6 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i-1])
}
