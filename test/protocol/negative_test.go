package protocol

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// The negative controls run fedbr's own steps (internal/br/pause, internal/br/restoredata) with
// one safeguard removed by their test-only Unsafe switches, and each must fail with its own
// error in every run: the checker's bank.ErrMismatch, or the engine's named error. Each is
// next to the same backup restored with every safeguard in place, which must be exact.

// TestNegativeControlsOfRestoreData: one backup under `br pause` (stores captured one after
// another while transfers go on), restored from copies of the same images with restore-data
// whole (also from images whose logs end in a torn record), with PD's encoded region
// boundaries sent as keys, and without flashback.
//
// No scheduler runs, so the four pre-split regions stay as they are: every region but the
// first starts at an account key, and that key encoded and then encoded again by TiKV sorts
// past its region's end (they share their first 8 bytes), so the encoded-keys control meets
// key_not_in_region in every run instead of flashing back part of the key space.
func TestNegativeControlsOfRestoreData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	images, ts, txns := stillBackup(t, ctx)
	copies := map[string]string{}
	for _, name := range []string{"torn", "encoded-keys", "no-flashback"} {
		copies[name] = t.TempDir()
		copyImages(t, images, copies[name])
	}

	if err := restoreAndCheck(t, ctx, images, ts, txns, restoredata.Unsafe{}); err != nil {
		t.Fatalf("restore with every safeguard: %v", err)
	}
	// A crash can tear the write in flight: every store's log ending in a record cut short
	// (a frame header, then part of its body) restores exactly, the torn record dropped.
	for id := 1; id <= stores; id++ {
		if err := tikvdouble.TearLogTail(filepath.Join(copies["torn"], fmt.Sprintf("tikv-%d", id), "raft.log")); err != nil {
			t.Fatal(err)
		}
	}
	if err := restoreAndCheck(t, ctx, copies["torn"], ts, txns, restoredata.Unsafe{}); err != nil {
		t.Fatalf("restore of images whose logs end in a torn record: %v", err)
	}
	err := restoreAndCheck(t, ctx, copies["encoded-keys"], ts, txns, restoredata.Unsafe{EncodedKeys: true})
	if !errors.Is(err, restoredata.ErrKeyNotInRegion) {
		t.Fatalf("flashback with PD's encoded boundaries as keys: %v, want restoredata.ErrKeyNotInRegion", err)
	}
	t.Logf("encoded keys: %v", err)
	err = restoreAndCheck(t, ctx, copies["no-flashback"], ts, txns, restoredata.Unsafe{NoFlashback: true})
	if !errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("restore without flashback: %v, want bank.ErrMismatch", err)
	}
	t.Logf("no flashback: %v", err)
}

// stillBackup takes a backup under `br pause` of a cluster where no scheduler runs (stores
// captured one after another while transfers go on) and returns its images, its ts and the
// transfers, with enough of them on both sides of the ts for the checker.
func stillBackup(t *testing.T, ctx context.Context) (string, uint64, []bank.Txn) {
	t.Helper()
	l := startLiveWith(t, ctx, pddouble.Config{OperatorRate: -1})
	images, ts := pauseCapture(t, ctx, l, pause.Config{TTL: 2 * time.Minute}, nil)
	l.waitAfter(t, ctx, ts)
	txns := l.finish()
	t.Logf("backup ts %d: %+v", ts, bank.Count(txns, ts))
	return images, ts, txns
}

// TestNegativeControlOfTheGCPin: with GC running (a life time of three seconds), a backup under
// `br pause` survives GC passing its ts, and the same backup taken without the pin does not.
// Each capture waits for the observed event that makes the difference: PD's GC worker aiming
// past the transfers after the backup ts (held back by the pin), or every store having
// collected past them (no pin). The versions the flashback needs are then gone, and the
// restore ends with bank.ErrMismatch.
func TestNegativeControlOfTheGCPin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l := startLiveWithConfig(t, ctx, tidbcluster.Config{GCPollInterval: 100 * time.Millisecond,
		PD: pddouble.Config{OperatorRate: -1, GCLifeTime: 3 * time.Second, GCRunInterval: 100 * time.Millisecond}})

	capture := func(unsafe pause.Unsafe) (string, uint64) {
		images, ts := pauseCapture(t, ctx, l, pause.Config{TTL: time.Minute, Unsafe: unsafe}, func(i int, ts uint64) {
			if i > 0 {
				return
			}
			last, err := l.log.WaitAfter(ctx, ts, 10)
			if err != nil {
				t.Fatal(err)
			}
			if unsafe.NoGCPin {
				if err := l.c.WaitGC(ctx, last); err != nil {
					t.Fatalf("waiting for every store to collect past %d: %v", last, err)
				}
				return
			}
			for l.c.PD.GCStatus().Target <= last {
				select {
				case <-ctx.Done():
					t.Fatalf("PD's GC worker never aimed past %d: %+v", last, l.c.PD.GCStatus())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if sp := l.c.PD.GCStatus().SafePoint; sp >= ts {
				t.Fatalf("GC safe point %d passed the pinned backup ts %d", sp, ts)
			}
		})
		return images, ts
	}
	pinned, pinnedTS := capture(pause.Unsafe{})
	unpinned, unpinnedTS := capture(pause.Unsafe{NoGCPin: true})
	l.waitAfter(t, ctx, unpinnedTS)
	txns := l.finish()
	t.Logf("pinned backup ts %d: %+v; unpinned %d: %+v", pinnedTS, bank.Count(txns, pinnedTS), unpinnedTS, bank.Count(txns, unpinnedTS))

	if err := restoreAndCheck(t, ctx, pinned, pinnedTS, txns, restoredata.Unsafe{}); err != nil {
		t.Fatalf("restore of the backup GC was pinned for: %v", err)
	}
	err := restoreAndCheck(t, ctx, unpinned, unpinnedTS, txns, restoredata.Unsafe{})
	if !errors.Is(err, bank.ErrMismatch) {
		t.Fatalf("restore of a backup taken without the GC pin after GC passed it: %v, want bank.ErrMismatch", err)
	}
	t.Logf("no GC pin: %v", err)
}
