package pause

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fedbr/fedbr/internal/tidb"
)

// gcKeeper pins a GC service safepoint just below the backup timestamp so that no MVCC version
// the backup needs is collected, and refreshes it until released.
type gcKeeper struct {
	pd       tidb.GCReader
	id       string
	ttl      time.Duration
	backupTS uint64
	// off is the Unsafe.NoGCPin negative control: nothing is pinned or checked.
	off bool
	// trustPin is the Unsafe.TrustPin negative control: PD's answer to the pin is not checked.
	trustPin bool
}

// ErrPinRefused means PD did not store the GC pin: PD stores no service safepoint below its
// minimum one, which always includes TiDB's GC worker's (gc_worker, raised before the worker
// moves the GC safe point), and that minimum is already above backup ts − 1. GC may then
// collect versions the backup needs.
var ErrPinRefused = errors.New("PD did not store the GC pin")

// pin sets the service safepoint, after checking GC has not already passed the backup ts.
func (k *gcKeeper) pin(ctx context.Context) error {
	if k.off {
		return nil
	}
	current, err := k.pd.UpdateGCSafePoint(ctx, 0) // 0 never moves it; it reads the current one
	if err != nil {
		return fmt.Errorf("read GC safepoint: %w", err)
	}
	if current >= k.backupTS {
		return fmt.Errorf("GC safepoint %d has already reached backup ts %d: data at that ts may be gone", current, k.backupTS)
	}
	return k.refresh(ctx)
}

func (k *gcKeeper) refresh(ctx context.Context) error {
	if k.off {
		return nil
	}
	min, err := k.pd.UpdateServiceGCSafePoint(ctx, k.id, int64(k.ttl/time.Second), k.backupTS-1)
	if err != nil {
		return fmt.Errorf("set service GC safepoint %s: %w", k.id, err)
	}
	// PD answers the minimum service safepoint after the update: at most the pin when it was
	// stored, above it when it was not.
	if min > k.backupTS-1 && !k.trustPin {
		return fmt.Errorf("%w %s at backup ts − 1 = %d: PD's minimum service safepoint is %d (TiDB's GC worker or another service is past the backup ts), so data at that ts may be collected",
			ErrPinRefused, k.id, k.backupTS-1, min)
	}
	return nil
}

// check fails when GC overtook the backup ts anyway (upstream panicked here).
func (k *gcKeeper) check(ctx context.Context) error {
	if k.off {
		return nil
	}
	current, err := k.pd.UpdateGCSafePoint(ctx, 0)
	if err != nil {
		return nil // transient: the TTL still holds the pin
	}
	if current >= k.backupTS {
		return fmt.Errorf("GC safepoint %d passed backup ts %d while the backup was paused", current, k.backupTS)
	}
	return nil
}

// release removes the service safepoint (TTL 0 deletes it).
func (k *gcKeeper) release(ctx context.Context) error {
	if k.off {
		return nil
	}
	if _, err := k.pd.UpdateServiceGCSafePoint(ctx, k.id, 0, 0); err != nil {
		return fmt.Errorf("remove service GC safepoint %s: %w", k.id, err)
	}
	return nil
}
