package protocol

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

// TestNegativeControlOfThePinCheck: TiDB's GC worker raised its gc_worker service safepoint
// past the backup ts before the pause pinned GC (the worker does so before it moves the GC
// safe point, which is still below). PD stores no service safepoint below its minimum, so the
// pin is not stored. Checking PD's answer, the pause fails with pause.ErrPinRefused before
// Ready. Taking it on trust (Unsafe.TrustPin), the pause reports Ready with nothing pinned,
// and the snapshot step's check that a pause holds GC at the backup ts
// (tidb.CheckPauseHolds) fails with tidb.ErrPauseGone.
func TestNegativeControlOfThePinCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: stores})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pc, err := pd.NewClientWithContext(ctx, []string{c.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	physical, logical, err := pc.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	backupTS := uint64(physical)<<18 | uint64(logical)
	// TiDB's GC worker's first step (gc_worker.go setGCWorkerServiceSafePoint), a millisecond
	// past the backup ts.
	if _, err := pc.UpdateServiceGCSafePoint(ctx, tidb.GCWorkerService, math.MaxInt64, backupTS+1<<18); err != nil {
		t.Fatal(err)
	}

	_, err = labbr.Pause(ctx, c.PDAddr(), pause.Config{TTL: time.Minute, BackupTS: backupTS}, t.Logf)
	if !errors.Is(err, pause.ErrPinRefused) {
		t.Fatalf("pause with PD's minimum past the backup ts: %v, want pause.ErrPinRefused", err)
	}

	p, err := labbr.Pause(ctx, c.PDAddr(), pause.Config{TTL: time.Minute, BackupTS: backupTS, Unsafe: pause.Unsafe{TrustPin: true}}, t.Logf)
	if err != nil {
		t.Fatalf("pause taking PD's answer on trust: %v, want Ready", err)
	}
	err = tidb.Plaintext.CheckPauseHolds(ctx, c.PD.URL(), backupTS, time.Now())
	if stopErr := p.Stop(); stopErr != nil {
		t.Errorf("stop the trusting pause: %v", stopErr)
	}
	if !errors.Is(err, tidb.ErrPauseGone) {
		t.Fatalf("check of a pause whose pin PD refused: %v, want tidb.ErrPauseGone", err)
	}
	t.Logf("pin taken on trust: %v", err)
}
