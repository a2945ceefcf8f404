package restorevolumes

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

// AWS's limits on fast snapshot restore ("Amazon EBS fast snapshot restore", Considerations,
// docs.aws.amazon.com/ebs/latest/userguide/ebs-fast-snapshot-restore.html): at most 5
// snapshots per Region by default (an adjustable account quota shared by every user of the
// account-region, counted in snapshots whatever their AZs), and only snapshots of 16 TiB or
// less.
const (
	// DefaultFSRQuota is Options.FSRQuota's default, AWS's default quota.
	DefaultFSRQuota = 5
	// MaxFSRSnapshotGiB is the largest snapshot FSR can be enabled for.
	MaxFSRSnapshotGiB = 16 * 1024
)

// FSRCandidate is the snapshot of a data volume that may be restored through FSR.
type FSRCandidate struct {
	SnapshotID string
	SizeGiB    int32
}

// FSRSkip is a data volume's snapshot restored without FSR, and why; the warm-up reads that
// volume instead.
type FSRSkip struct {
	SnapshotID string `json:"snapshotID"`
	Reason     string `json:"reason"`
}

// FSRPlan is which snapshots a restore enables FSR for, and which go without.
type FSRPlan struct {
	With    []string
	Without []FSRSkip
}

// PlanFSR picks the candidates that restore through FSR within the account-region's quota of
// quota snapshots, of which those in enabled (every snapshot with FSR enabled in the region,
// whoever enabled it) are taken. The rule: the largest snapshots first, ties by snapshot id,
// because a volume's lazy loading costs in proportion to its size and FSR saves the most
// there; a candidate already in enabled takes no new place; one over MaxFSRSnapshotGiB never
// gets FSR (AWS refuses it). The rest go without FSR, each with its reason.
func PlanFSR(cands []FSRCandidate, quota int, enabled []string) FSRPlan {
	taken := map[string]bool{}
	for _, id := range enabled {
		taken[id] = true
	}
	free := quota - len(taken)
	others := len(taken)
	for _, c := range cands {
		if taken[c.SnapshotID] {
			others--
		}
	}
	order := slices.Clone(cands)
	slices.SortFunc(order, func(a, b FSRCandidate) int {
		return cmp.Or(cmp.Compare(b.SizeGiB, a.SizeGiB), strings.Compare(a.SnapshotID, b.SnapshotID))
	})
	var p FSRPlan
	mine := 0
	for _, c := range order {
		switch {
		case c.SizeGiB > MaxFSRSnapshotGiB:
			p.Without = append(p.Without, FSRSkip{SnapshotID: c.SnapshotID,
				Reason: fmt.Sprintf("the snapshot is %d GiB; AWS enables fast snapshot restore only for snapshots of at most %d GiB (16 TiB)", c.SizeGiB, MaxFSRSnapshotGiB)})
		case taken[c.SnapshotID]:
			p.With = append(p.With, c.SnapshotID)
			mine++
		case free > 0:
			p.With = append(p.With, c.SnapshotID)
			free--
			mine++
		default:
			p.Without = append(p.Without, FSRSkip{SnapshotID: c.SnapshotID,
				Reason: fmt.Sprintf("the region's fast snapshot restore quota of %d snapshots is full: %d taken by other snapshots of the account, %d by larger snapshots of this restore", quota, others, mine)})
		}
	}
	return p
}

// enableFSR enables fast snapshot restore for the data volumes' snapshots in their AZs within
// the account-region's quota (PlanFSR), waits until each enabled one has a credit, and records
// the snapshots that go without FSR (planned so, or refused by AWS at run time, e.g. because
// another user of the account took the quota meanwhile) in the status and the result. It
// returns the snapshots enabled, which must come out fast-restored; the returned func disables
// FSR again, only where this restore turned it on: a snapshot-AZ pair whose FSR was on before
// (another restore's, an operator's) stays as it was.
func (r *restorer) enableFSR(ctx context.Context, plans []plan) (map[string]bool, func(), error) {
	var cands []FSRCandidate
	azOf := map[string]string{}
	for _, p := range plans {
		if p.Type == meta.DataDirType && azOf[p.SnapshotID] == "" {
			cands = append(cands, FSRCandidate{SnapshotID: p.SnapshotID, SizeGiB: p.sizeGiB})
			azOf[p.SnapshotID] = p.spec.AZ
		}
	}
	states, err := r.c.DescribeFSR(ctx, nil)
	if err != nil {
		return nil, func() {}, fmt.Errorf("read the region's fast snapshot restores: %w", err)
	}
	var inUse []string
	// Snapshot-AZ pairs FSR was on for before this restore asked: another user's (another
	// restore, an operator), which this restore uses but never disables.
	theirs := map[string]bool{}
	for _, s := range states {
		if s.State == "disabling" || s.State == "disabled" {
			continue
		}
		theirs[s.SnapshotID+"@"+s.AZ] = true
		if !slices.Contains(inUse, s.SnapshotID) {
			inUse = append(inUse, s.SnapshotID)
		}
	}
	fp := PlanFSR(cands, r.o.FSRQuota, inUse)
	for _, s := range fp.Without {
		r.skipFSR(s)
	}
	byAZ := map[string][]string{}
	for _, id := range fp.With {
		byAZ[azOf[id]] = append(byAZ[azOf[id]], id)
	}
	enabled := map[string]bool{}
	var asked []string // AZs FSR was asked in, to disable it there
	disable := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
		defer cancel()
		for _, az := range asked {
			mine := slices.DeleteFunc(slices.Clone(byAZ[az]), func(id string) bool { return theirs[id+"@"+az] })
			if kept := len(byAZ[az]) - len(mine); kept > 0 {
				r.logf("Leaving FSR of %d snapshots in %s enabled: it was on before this restore asked", kept, az)
			}
			if len(mine) == 0 {
				continue
			}
			if err := r.c.DisableFSR(cctx, az, mine); err != nil {
				r.logf("Disabling FSR in %s failed (credits keep being billed until it is disabled): %v", az, err)
			}
		}
	}
	for _, az := range slices.Sorted(maps.Keys(byAZ)) {
		r.logf("Enabling fast snapshot restore of %d snapshots in %s", len(byAZ[az]), az)
		asked = append(asked, az)
		ok, refused, err := r.c.EnableFSR(ctx, az, byAZ[az])
		if err != nil {
			return nil, disable, fmt.Errorf("enable FSR: %w", err)
		}
		for _, s := range ok {
			enabled[s.SnapshotID] = true
		}
		for _, f := range refused {
			delete(enabled, f.SnapshotID)
			r.skipFSR(FSRSkip{SnapshotID: f.SnapshotID, Reason: f.Reason()})
		}
	}
	r.report(PhaseCreatingVolumes)
	for _, az := range slices.Sorted(maps.Keys(byAZ)) {
		ids := slices.DeleteFunc(slices.Clone(byAZ[az]), func(id string) bool { return !enabled[id] })
		if len(ids) == 0 {
			continue
		}
		r.logf("Waiting for FSR credits of %d snapshots in %s", len(ids), az)
		err := r.c.WaitFSR(ctx, az, ids, func(p cloud.Progress) {
			r.logf("FSR in %s: %.0f%% of snapshots have a credit", az, p.Percent)
		})
		if err != nil {
			return nil, disable, fmt.Errorf("wait for FSR credits: %w", err)
		}
	}
	return enabled, disable, nil
}

// skipFSR records a snapshot restored without FSR, once, in the log, the status and the result.
func (r *restorer) skipFSR(s FSRSkip) {
	if slices.ContainsFunc(r.status.WithoutFSR, func(o FSRSkip) bool { return o.SnapshotID == s.SnapshotID }) {
		return
	}
	r.logf("Snapshot %s is restored without fast snapshot restore (the warm-up reads its volume): %s", s.SnapshotID, s.Reason)
	r.status.WithoutFSR = append(r.status.WithoutFSR, s)
	r.res.WithoutFSR = append(r.res.WithoutFSR, s)
}
