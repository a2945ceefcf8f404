package pause

import (
	"context"
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
}

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
	if _, err := k.pd.UpdateServiceGCSafePoint(ctx, k.id, int64(k.ttl/time.Second), k.backupTS-1); err != nil {
		return fmt.Errorf("set service GC safepoint %s: %w", k.id, err)
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
