package tikvdouble_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// pdClock is PD's clock in GC tests: it stands still until the test moves
// it, so the GC safe point passes a timestamp only when the test says so
// (PD's TSO then counts logical ticks within one millisecond).
type pdClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *pdClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *pdClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gcLife is the GC life time of gcCluster.
const gcLife = time.Second

// gcCluster is a cluster whose GC acts within a test: PD's GC worker runs
// every 20 ms with a 1 s life time on clock, and the stores poll it every
// 20 ms.
func gcCluster(t *testing.T, ctx context.Context, clock *pdClock) *tidbcluster.Cluster {
	t.Helper()
	return startCluster(t, ctx, tidbcluster.Config{
		SplitKeys: [][]byte{[]byte("k5")}, GCPollInterval: 20 * time.Millisecond,
		PD: pddouble.Config{OperatorRate: -1, Now: clock.Now, GCLifeTime: gcLife, GCRunInterval: 20 * time.Millisecond},
	})
}

// waitGCRun waits for a run of PD's GC worker that passes ok and returns
// what it left.
func waitGCRun(t *testing.T, ctx context.Context, c *tidbcluster.Cluster, what string, ok func(pddouble.GCStatus) bool) pddouble.GCStatus {
	t.Helper()
	for {
		st := c.PD.GCStatus()
		if ok(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no GC run %s: last %+v", what, st)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitFollowersApplied waits until every peer applied what its region's leader applied.
func waitFollowersApplied(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) {
	t.Helper()
	for {
		leader, behind := map[uint64]uint64{}, 0
		var all []tikvdouble.RegionState
		for _, id := range c.StoreIDs() {
			for _, r := range c.Store(id).Regions() {
				all = append(all, r)
				if r.Leader {
					leader[r.Region.GetId()] = r.Applied
				}
			}
		}
		for _, r := range all {
			if a, ok := leader[r.Region.GetId()]; !ok || r.Applied < a {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d peers never applied what their leaders applied", behind)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func get(t *testing.T, ctx context.Context, cl *bank.Client, key string, ts uint64) string {
	t.Helper()
	v, err := cl.Get(ctx, []byte(key), ts)
	if err != nil {
		t.Fatalf("get %s@%d: %v", key, ts, err)
	}
	return string(v)
}

// TestGCLosesHistoryUnlessPinned is the reason the lab has GC: a read at
// t1 of a key overwritten at t2 loses its value once the GC safe point
// passes t2 and the stores collected, unless a service safe point (BR's GC
// pin) at or below t1 holds the safe point back. Collection is on the
// volumes: a crash image of a store holds the collected state.
func TestGCLosesHistoryUnlessPinned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clock := &pdClock{t: time.Now()}
	c := gcCluster(t, ctx, clock)
	cl := client(t, ctx, c)

	t.Run("unpinned", func(t *testing.T) {
		t1 := put(t, ctx, cl, map[string]string{"k1": "v1", "k7": "w1"})
		t2 := put(t, ctx, cl, map[string]string{"k1": "v2", "k7": "w2"})
		if get(t, ctx, cl, "k1", t1) != "v1" {
			t.Fatal("the t1 value is not there to begin with")
		}
		// A follower collects on its own, at whatever it applied: only one that applied t2
		// can drop t1, so every store's image is judged below once all applied it.
		waitFollowersApplied(t, ctx, c)
		clock.Add(2 * gcLife)
		st := waitGCRun(t, ctx, c, "past t2", func(st pddouble.GCStatus) bool { return st.SafePoint > t2 })
		if err := c.WaitGC(ctx, st.SafePoint); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k1", "k7"} {
			if v := get(t, ctx, cl, k, t1); v != "" {
				t.Errorf("%s@t1 = %q after GC past t2, want it collected", k, v)
			}
		}
		if get(t, ctx, cl, "k1", t2) != "v2" || get(t, ctx, cl, "k7", t2) != "w2" {
			t.Error("GC dropped the newest version at or below the safe point")
		}

		// A crash image of every store holds the collection.
		for _, id := range c.StoreIDs() {
			img := filepath.Join(t.TempDir(), "img")
			if err := tidbcluster.CopyVolume(c.StoreDir(id), img); err != nil {
				t.Fatal(err)
			}
			sp, read, err := tikvdouble.ReplayVolume(img, id)
			if err != nil {
				t.Fatal(err)
			}
			if sp < st.SafePoint {
				t.Errorf("store %d image collected up to %d, the store reported %d", id, sp, st.SafePoint)
			}
			if v := read([]byte("k1"), t1); v != nil {
				t.Errorf("store %d image: k1@t1 = %q, want it collected", id, v)
			}
			if v := read([]byte("k1"), t2); string(v) != "v2" {
				t.Errorf("store %d image: k1@t2 = %q, want v2", id, v)
			}
		}
	})

	t.Run("pinned", func(t *testing.T) {
		pd := cl.PD()
		// BR's order: pin first, then read at a ts above the pin.
		pin, err := cl.TS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// PD answers its minimum, gc_worker's included: above the pin, the pin was not stored.
		if min, err := pd.UpdateServiceGCSafePoint(ctx, "test-pin", 600, pin); err != nil || min > pin {
			t.Fatalf("pin at %d: min %d, %v", pin, min, err)
		}
		t1 := put(t, ctx, cl, map[string]string{"k2": "v1"})
		t2 := put(t, ctx, cl, map[string]string{"k2": "v2"})
		clock.Add(2 * gcLife)
		st := waitGCRun(t, ctx, c, "that would have passed t2", func(st pddouble.GCStatus) bool { return st.Target > t2 })
		if st.SafePoint != pin {
			t.Fatalf("GC safe point %d with a pin at %d", st.SafePoint, pin)
		}
		if err := c.WaitGC(ctx, pin); err != nil {
			t.Fatal(err)
		}
		if v := get(t, ctx, cl, "k2", t1); v != "v1" {
			t.Fatalf("k2@t1 = %q with the pin held, want v1", v)
		}

		// Released, the same history goes.
		if _, err := pd.UpdateServiceGCSafePoint(ctx, "test-pin", 0, 0); err != nil {
			t.Fatal(err)
		}
		st = waitGCRun(t, ctx, c, "past t2 after the pin", func(st pddouble.GCStatus) bool { return st.SafePoint > t2 })
		if err := c.WaitGC(ctx, st.SafePoint); err != nil {
			t.Fatal(err)
		}
		if v := get(t, ctx, cl, "k2", t1); v != "" {
			t.Fatalf("k2@t1 = %q after the pin was released and GC passed t2", v)
		}
	})
}
