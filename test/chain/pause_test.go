package chain

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/testenv"
)

// startSmall runs a four-store cluster with every region led.
func startSmall(t *testing.T, ctx context.Context) *tidbcluster.Cluster {
	t.Helper()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 4, Tick: tick, StickyAddrs: true, Binary: fedbr(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStopLiftsEverything: stopping the pause (the SIGTERM path: the command cancels the
// engine's context) lifts the GC safepoint, the schedulers and the schedule limits before the
// engine returns.
func TestStopLiftsEverything(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	c := startSmall(t, ctx)
	pc, _ := pdClients(t, c)
	lift := stopReadyPause(t, ctx, c, pc)
	if h, err := observe(ctx, pc, c.PD.URL()); err != nil || h.Any() {
		t.Fatalf("after stop PD still holds %+v (%v)", h, err)
	}
	t.Logf("GC safepoint, schedulers and schedule limits lifted %s after the stop", lift.Round(time.Millisecond))
}

// TestStopFinishesLeases: stopping the pause ends every TiKV lease at once (Finish), so admin
// operations resume without waiting for the TTL. This fails: the engine sends Finish and
// cancels the stream without waiting for TiKV's answer, so most Finish requests are lost and
// the leases only lapse by TTL (engine bug, reported, not fixed here).
func TestStopFinishesLeases(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	c := startSmall(t, ctx)
	pc, _ := pdClients(t, c)
	left := 0
	for round := range 3 { // each Finish is lost at random; three rounds make a loss near certain
		lift := stopReadyPause(t, ctx, c, pc)
		leased, err := leasedStores(ctx, pc)
		if err != nil {
			t.Fatal(err)
		}
		if len(leased) != 0 {
			left++
			t.Errorf("round %d: %s after the stop returned, stores %v still hold the lease", round, lift.Round(time.Millisecond), leased)
		}
	}
	t.Logf("%d of 3 stopped pauses left leases behind", left)
}

// stopReadyPause runs a pause until Ready, checks PD holds it, stops it and returns how long
// the engine took to lift everything and return.
func stopReadyPause(t *testing.T, ctx context.Context, c *tidbcluster.Cluster, pc pd.Client) time.Duration {
	t.Helper()
	p := startPause(t, ctx, c, pause.Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second})
	p.waitReady(t, ctx)
	h, err := observe(ctx, pc, c.PD.URL())
	if err != nil {
		t.Fatal(err)
	}
	if !h.GC || len(h.Schedulers) == 0 || len(h.ZeroLimits) == 0 {
		t.Fatalf("while Ready PD holds %+v, want GC, schedulers and limits held", h)
	}
	stopped := time.Now()
	p.stop()
	if err := p.wait(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	return time.Since(stopped)
}

// fedbr is fedbr-lab (fedbr plus `lab tikv`), built once per run (testenv.Binary).
func fedbr(t *testing.T) string {
	t.Helper()
	return testenv.Binary(t, "fedbr-lab")
}

// TestKilledPauseLapsesByTTL: `fedbr br pause` killed with SIGKILL lifts nothing; the GC
// safepoint, scheduler pause and schedule limits lapse on PD's clock and the TiKV leases on
// theirs, all within the TTL.
func TestKilledPauseLapsesByTTL(t *testing.T) {
	skipShort(t)
	bin := fedbr(t)
	ctx := testContext(t, time.Minute)
	c := startSmall(t, ctx)
	pc, _ := pdClients(t, c)
	const ttl = 5 * time.Second
	status := filepath.Join(t.TempDir(), "pause.json")
	cmd := exec.CommandContext(ctx, bin, "br", "pause", "--pd", c.PDAddr(), "--ttl", ttl.String(), "--status-file", status)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		var st pause.Status
		if b, err := os.ReadFile(status); err == nil && json.Unmarshal(b, &st) == nil && st.Phase == pause.PhaseReady {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("pause exited before Ready: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("pause never Ready\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if h, err := observe(ctx, pc, c.PD.URL()); err != nil || !h.GC || len(h.Schedulers) == 0 || len(h.ZeroLimits) == 0 {
		t.Fatalf("while Ready PD holds %+v (%v)", h, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("pause exited after SIGKILL: %v", <-exited)
	killed := time.Now()
	var gcGone, schedGone, limitsGone time.Duration
	for gcGone == 0 || schedGone == 0 || limitsGone == 0 {
		h, err := observe(ctx, pc, c.PD.URL())
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(killed)
		if gcGone == 0 && !h.GC {
			gcGone = el
		}
		if schedGone == 0 && len(h.Schedulers) == 0 {
			schedGone = el
		}
		if limitsGone == 0 && len(h.ZeroLimits) == 0 {
			limitsGone = el
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %s PD still holds %+v", el, h)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A lease probe drops the lease it finds, so it can only be asked once: when the TTL, the
	// bound every piece was last refreshed with before the kill, has passed.
	select {
	case <-time.After(time.Until(killed.Add(ttl))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	leased, err := leasedStores(ctx, pc)
	if err != nil || len(leased) != 0 {
		t.Fatalf("%s after the kill stores %v are still leased (%v)", time.Since(killed), leased, err)
	}
	t.Logf("after kill -9 (TTL %s): GC safepoint lapsed in %s, schedulers in %s, schedule limits in %s, every lease by %s",
		ttl, gcGone.Round(time.Millisecond), schedGone.Round(time.Millisecond), limitsGone.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
}

// TestUnreachableStoreDelaysReady: with one TiKV down when the pause starts, the pause keeps
// retrying it and becomes Ready only after it is back (at its address, as a TiKV pod behind
// its DNS name).
func TestUnreachableStoreDelaysReady(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, time.Minute)
	unreachableStore(t, ctx, startSmall(t, ctx))
}

// TestUnreachableStoreBackAtNewAddress: the same with the store coming back at another
// address, which it registers with PD. This fails: the pause keeps dialing the address of its
// first store listing and never becomes Ready (engine bug, reported, not fixed here).
func TestUnreachableStoreBackAtNewAddress(t *testing.T) {
	skipShort(t)
	ctx := testContext(t, 20*time.Second)
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 4, Tick: tick, Binary: fedbr(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	unreachableStore(t, ctx, c)
}

func unreachableStore(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) {
	t.Helper()
	c.StopStore(4)
	var back atomic.Bool
	retries := make(chan struct{}, 100)
	pc, h := pdClients(t, c)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	defer func() {
		stop()
		select { // lets the engine lift the pause before the test's clients close
		case err := <-done:
			t.Logf("pause ended: %v", err)
		case <-time.After(30 * time.Second):
		}
	}()
	ready := make(chan pause.Status, 1)
	go func() {
		done <- pause.Run(pctx, pause.Deps{PD: pc, HTTP: h, Dial: dialBackup, Log: func(f string, a ...any) {
			t.Logf(f, a...)
			if strings.HasPrefix(f, "Connecting to store") {
				select {
				case retries <- struct{}{}:
				default:
				}
			}
		}}, pause.Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second, RetryBackoff: 100 * time.Millisecond}, func(s pause.Status) {
			if s.Phase == pause.PhaseReady {
				if !back.Load() {
					t.Errorf("Ready while store 4 is down")
				}
				ready <- s
			}
		})
	}()
	for range 3 { // the pause is retrying the missing store
		select {
		case <-retries:
		case err := <-done:
			t.Fatalf("pause ended with store 4 down: %v", err)
		case <-ctx.Done():
			t.Fatal("pause never tried store 4")
		}
	}
	down := time.Now()
	back.Store(true)
	if err := c.StartStore(ctx, 4); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-ready:
		t.Logf("Ready at ts %d with %d stores, %s after store 4 came back", st.BackupTS, st.Stores, time.Since(down).Round(time.Millisecond))
	case err := <-done:
		t.Fatalf("pause ended: %v", err)
	case <-ctx.Done():
		t.Fatal("pause never Ready after store 4 came back")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("pause: %v", err)
	}
	done <- nil // the deferred wait reads it
}
