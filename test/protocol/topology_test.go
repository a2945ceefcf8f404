package protocol

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

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
