package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
	"github.com/fedbr/fedbr/internal/recovery"
)

// TestNegativeControlOfTheLease: the stores are captured one after another under `br pause`
// while, before each capture of a store holding one region, an operator added through PD's
// operator API (as `pd-ctl operator add`, or PD's scatter, would: no paused scheduler nor zeroed
// limit holds it back) moves that region's replica off the store, onto the store captured just
// before. The first capture is of the store that never held the region, so with the moves
// every store is captured while it does not hold it. Under the pause's PrepareSnapshotBackup
// lease TiKV refuses the first move (observed: a refused admin operator), the region stays put
// and the restore is exact; the operator runs once the lease is lifted. Without the lease
// (pause.Unsafe.NoLease; GC pinned and PD's schedulers paused as usual) the moves run, no image
// holds the region, and restore-data's plan fails with recovery.ErrKeySpaceNotCovered.
//
// PD's schedulers are off (OperatorRate -1), so the region moves only on the test's say.
func TestNegativeControlOfTheLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l := startLiveWith(t, ctx, pddouble.Config{OperatorRate: -1})
	h := pdhttp.NewClient("fedbr-test", []string{l.c.PD.URL()})
	defer h.Close()
	regions, err := h.GetRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(regions.Regions) < 3 {
		t.Fatalf("%d regions, want the 4 pre-split ones", len(regions.Regions))
	}
	// PD's keys are hex, which sorts as the bytes do.
	slices.SortFunc(regions.Regions, func(a, b pdhttp.RegionInfo) int { return strings.Compare(a.StartKey, b.StartKey) })
	// Each run moves its own region: the operator refused under the lease runs after it.
	leased, leasedTS := moveCapture(t, ctx, l, h, pause.Unsafe{}, uint64(regions.Regions[1].ID))
	unleased, unleasedTS := moveCapture(t, ctx, l, h, pause.Unsafe{NoLease: true}, uint64(regions.Regions[2].ID))
	l.waitAfter(t, ctx, unleasedTS)
	txns := l.finish()
	t.Logf("leased backup ts %d: %+v; unleased %d: %+v", leasedTS, bank.Count(txns, leasedTS), unleasedTS, bank.Count(txns, unleasedTS))

	if err := restoreAndCheck(t, ctx, leased, leasedTS, txns, restoredata.Unsafe{}); err != nil {
		t.Fatalf("restore of the backup taken under the lease: %v", err)
	}
	err = restoreAndCheck(t, ctx, unleased, unleasedTS, txns, restoredata.Unsafe{})
	if !errors.Is(err, recovery.ErrKeySpaceNotCovered) {
		t.Fatalf("restore of a backup taken without the lease while replicas moved: %v, want recovery.ErrKeySpaceNotCovered", err)
	}
	t.Logf("no lease: %v", err)
}

// moveCapture runs `br pause` (with unsafe) until Ready and captures every store one after
// another, transfers going on in between: first the store without a replica of region, then
// each store holding one (followers first, the leader last). Before each of those captures it
// asks PD's operator API to add the region's replica on the store captured just before and,
// once that replica caught up, to remove it from the store about to be captured, and waits
// until that store dropped its replica. Under a lease the first add is refused (the test fails
// unless it is, and it must run once the pause is lifted); without one every move must run.
// It returns the images and the backup ts.
func moveCapture(t *testing.T, ctx context.Context, l *liveCluster, h pdhttp.Client, unsafe pause.Unsafe, region uint64) (string, uint64) {
	t.Helper()
	l.waitBefore(t, ctx, h)
	p, err := labbr.Pause(ctx, l.c.PDAddr(), pause.Config{TTL: 2 * time.Minute, Unsafe: unsafe}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.GetRegionByID(ctx, region)
	if err != nil {
		t.Fatal(err)
	}
	var holders []uint64
	for _, pr := range r.Peers {
		if pr.StoreID != r.Leader.StoreID {
			holders = append(holders, uint64(pr.StoreID))
		}
	}
	slices.Sort(holders)
	holders = append(holders, uint64(r.Leader.StoreID))
	free := slices.DeleteFunc(l.c.StoreIDs(), func(id uint64) bool { return slices.Contains(holders, id) })
	if len(holders) != 3 || len(free) != 1 {
		t.Fatalf("region %d: replicas on %v, free stores %v: want 3 and 1", region, holders, free)
	}
	images := t.TempDir()
	capture := func(id uint64) {
		l.waitCommits(t, ctx, 2) // transfers go on between captures
		if err := l.c.SnapshotStore(id, images); err != nil {
			t.Fatal(err)
		}
	}
	capture(free[0])
	prev, refused := free[0], false
	for _, victim := range holders {
		if !refused {
			before := l.rejectedAdmin()
			addOperator(t, ctx, l.c.PD.URL(), map[string]any{"name": "add-peer", "region_id": region, "store_id": prev})
			refused = waitAdded(t, ctx, l, h, region, prev, func() bool { return l.rejectedAdmin() > before })
			if refused == unsafe.NoLease {
				t.Fatalf("adding a replica of region %d on store %d: refused %v, with the lease %v", region, prev, refused, !unsafe.NoLease)
			}
		}
		if !refused {
			addOperator(t, ctx, l.c.PD.URL(), map[string]any{"name": "remove-peer", "region_id": region, "store_id": victim})
			waitRemoved(t, ctx, l, h, region, victim)
		}
		capture(victim)
		prev = victim
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if refused {
		// The refused operator was real: with the lease gone it runs.
		waitAdded(t, ctx, l, h, region, free[0], func() bool { return false })
	}
	return images, p.BackupTS
}

// rejectedAdmin is how many admin operators the stores refused under a lease so far.
func (l *liveCluster) rejectedAdmin() int {
	n := 0
	for _, id := range l.c.StoreIDs() {
		n += l.c.Store(id).RejectedAdmin()
	}
	return n
}

// addOperator adds an operator through PD's operator API (what `pd-ctl operator add` sends).
func addOperator(t *testing.T, ctx context.Context, pdURL string, op map[string]any) {
	t.Helper()
	body, _ := json.Marshal(op)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pdURL+"/pd/api/v1/operators", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("add operator %v: %s: %s", op, resp.Status, msg)
	}
}

// waitAdded waits until region's replica on store caught up — PD reports it not pending (so the
// operator is done) and the store holds it — and returns false, or until refused and returns
// true.
func waitAdded(t *testing.T, ctx context.Context, l *liveCluster, h pdhttp.Client, region, store uint64, refused func() bool) bool {
	t.Helper()
	return waitRegion(t, ctx, h, region, fmt.Sprintf("a caught-up replica on store %d or a refusal", store), func(r *pdhttp.RegionInfo) (bool, bool) {
		if refused() {
			return true, true
		}
		return peerOn(r.Peers, store) && !peerOn(r.PendingPeers, store) && l.holds(store, region), false
	})
}

// waitRemoved waits until PD reports region without a replica on store and the store dropped it.
func waitRemoved(t *testing.T, ctx context.Context, l *liveCluster, h pdhttp.Client, region, store uint64) {
	t.Helper()
	waitRegion(t, ctx, h, region, fmt.Sprintf("no replica on store %d", store), func(r *pdhttp.RegionInfo) (bool, bool) {
		return !peerOn(r.Peers, store) && !l.holds(store, region), false
	})
}

// waitRegion polls PD's view of region until done says so, and returns done's second result.
func waitRegion(t *testing.T, ctx context.Context, h pdhttp.Client, region uint64, what string, done func(*pdhttp.RegionInfo) (bool, bool)) bool {
	t.Helper()
	for {
		r, err := h.GetRegionByID(ctx, region)
		if err == nil {
			if ok, v := done(r); ok {
				return v
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("region %d never showed %s (last: %+v, %v)", region, what, r, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func peerOn(peers []pdhttp.RegionPeer, store uint64) bool {
	return slices.ContainsFunc(peers, func(p pdhttp.RegionPeer) bool { return uint64(p.StoreID) == store })
}

// holds reports whether store holds an initialized replica of region.
func (l *liveCluster) holds(store, region uint64) bool {
	return slices.ContainsFunc(l.c.Store(store).Regions(), func(r tikvdouble.RegionState) bool { return r.Region.GetId() == region })
}

// TestLeaseHoldsWithSchedulersRunning is why "schedulers left running" has no failing negative
// control: the pause with PD's schedulers and limits left as they are (pause.Unsafe.
// SchedulersRunning), the lease taken and every region applied, under constant churn. PD keeps
// issuing splits, merges, replica moves and leader transfers, and between every two captures a
// leased TiKV refuses at least one (observed) — exactly the commands TiKV's lease refuses, which
// are every command PD's schedulers issue — so no split, merge or replica move lands between the
// first and the last capture, and the restore is exact. Only an operator the lease does not
// refuse could tell the scheduler pause's absence, and there is none: the scheduler pause keeps
// PD from issuing operators TiKV would refuse anyway (and a lease lost with a restarted TiKV
// fails the pause itself).
func TestLeaseHoldsWithSchedulersRunning(t *testing.T) {
	refused := 0
	churnCaptureRestore(t, pause.Config{TTL: 2 * time.Minute, Unsafe: pause.Unsafe{SchedulersRunning: true}}, func(ctx context.Context, l *liveCluster, i int) {
		if i > 0 {
			// PD's schedulers run: an operator reached a leased store and was refused since the
			// previous capture.
			for l.rejectedAdmin() <= refused {
				select {
				case <-ctx.Done():
					t.Fatalf("no operator refused before capture %d: are PD's schedulers running?", i)
				case <-time.After(20 * time.Millisecond):
				}
			}
			t.Logf("operators refused under the lease before capture %d: %d", i, l.rejectedAdmin()-refused)
		}
		refused = l.rejectedAdmin()
	})
}
