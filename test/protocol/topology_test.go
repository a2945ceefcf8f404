package protocol

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
)

// churnPD makes PD's schedulers reshape the cluster continuously: regions
// split above 10 keys and merge at 6 or fewer (so a split's halves merge back and
// split again), replicas move (balance-region with shuffle), leaders move.
var churnPD = pddouble.Config{OperatorRate: 0.3, SplitKeys: 10, MergeKeys: 6, ShuffleRegionRate: 0.3}

// shape is PD's view of the regions: per region id its epoch and leader.
type shape map[int64]string

func readShape(ctx context.Context, h pdhttp.Client) (shape, error) {
	rs, err := h.GetRegions(ctx)
	if err != nil {
		return nil, err
	}
	out := shape{}
	for _, r := range rs.Regions {
		out[r.ID] = fmt.Sprintf("v%d/c%d/l%d", r.Epoch.Version, r.Epoch.ConfVer, r.Leader.StoreID)
	}
	return out, nil
}

// changes names what differs between two shapes: regions that appeared or
// vanished (split, merge), conf_ver or version bumps, leader moves.
func changes(a, b shape) []string {
	var out []string
	for id, x := range b {
		y, ok := a[id]
		switch {
		case !ok:
			out = append(out, "split")
		case x == y:
		default:
			var av, ac, al, bv, bc, bl int
			_, _ = fmt.Sscanf(y, "v%d/c%d/l%d", &av, &ac, &al)
			_, _ = fmt.Sscanf(x, "v%d/c%d/l%d", &bv, &bc, &bl)
			if bc != ac {
				out = append(out, "peer-move")
			}
			if bv != av && bc == ac {
				out = append(out, "split-or-merge")
			}
			if bl != al {
				out = append(out, "leader-transfer")
			}
		}
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			out = append(out, "merge")
		}
	}
	sort.Strings(out)
	return out
}

// waitTopologyChange waits until PD's region shape differs from before in
// something other than leaders (a split, merge or peer move), and returns
// what changed.
func waitTopologyChange(t *testing.T, ctx context.Context, h pdhttp.Client, before shape) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		now, err := readShape(ctx, h)
		if err == nil {
			c := changes(before, now)
			for _, x := range c {
				if x != "leader-transfer" {
					return c
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("context ended waiting for a topology change")
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("no split, merge or peer move within 20s: the control would prove nothing")
	return nil
}

// TestTopologyChangesBetweenCapturesWithoutPauseAreNeverSilent captures the
// stores one after another with nothing paused while PD reshapes the
// cluster between two captures (splits, merges, peer moves, leader
// transfers). Unlike the staggered-capture control, the backup ts is read
// *before* the first capture, so every transfer at or below it was on a
// quorum of replicas when the captures began: whatever goes wrong can only
// come from the topology changes.
//
// What BR's recovery planner heals, and why:
//   - a leader transfer never loses data: BR elects by (term, last index)
//     and every replica captured after the backup ts holds its entries;
//   - a merge: the target's post-merge version is the highest and its range
//     covers the source's, so the planner drops the stale source; a replica
//     captured mid-merge still holds the source's entries and the store
//     finishes the merge in recovery;
//   - a peer move: the added replica is invisible until its snapshot is
//     installed, the removed one is captured before or after its removal,
//     and some captured replica always holds every entry at or below the
//     backup ts.
//
// Measured on the double (issue 4), two sessions of 4 runs: 0 and 1 runs
// failed loudly (a RecoverRegion that never finished), none silently; in a
// separate run a split between captures while one store's followers did not
// apply was healed too (BR elected a replica that had applied it). So this test asserts the
// safety property that holds with such changes and can still fail: no run
// restores silently wrong data; each restores exactly or fails loudly
// (restore-data refuses, e.g. on a hole left by a region that every image
// missed after several moves). What the pause protects against that the
// checker does see is the backup ts itself: TestStaggeredCaptureWithoutPauseIsCaught.
func TestTopologyChangesBetweenCapturesWithoutPauseAreNeverSilent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := startLiveWith(t, ctx, churnPD)
	l.waitCommits(t, ctx, 5)
	h := pdhttp.NewClient("fedbr-test", []string{l.c.PD.URL()})
	defer h.Close()
	const runs = 4
	type capture struct {
		dir     string
		ts      uint64
		changes []string
	}
	var captures []capture
	for range runs {
		ts, _, err := h.GetMinResolvedTSByStoresIDs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var seen []string
		for i, id := range l.c.StoreIDs() {
			before, err := readShape(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.c.SnapshotStore(id, dir); err != nil {
				t.Fatal(err)
			}
			if i < len(l.c.StoreIDs())-1 {
				seen = append(seen, waitTopologyChange(t, ctx, h, before)...)
			}
		}
		captures = append(captures, capture{dir, ts, seen})
	}
	txns := l.finish()
	failed := 0
	for i, c := range captures {
		err := restoreAndCheck(t, ctx, c.dir, c.ts, txns)
		t.Logf("run %d (between captures: %s): %v", i, strings.Join(c.changes, ","), err)
		if errors.Is(err, bank.ErrMismatch) {
			t.Errorf("run %d restored silently wrong data: %v", i, err)
		}
		if err != nil {
			failed++
		}
	}
	t.Logf("%d of %d runs failed loudly, the rest restored exactly", failed, runs)
}
