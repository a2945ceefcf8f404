package pause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Background is a pause a snapshot run alone holds for itself (`fedbr br snapshot` with neither
// a backup ts nor a pause of its caller): Start runs Run beside the snapshot until the pause is
// Ready, Holds says whether it still is, and Release lifts it.
type Background struct {
	backupTS uint64
	stop     context.CancelFunc
	done     chan error
	once     sync.Once
	log      func(string, ...any)

	mu  sync.Mutex
	cur Status
}

// Start runs a pause with d and cfg and returns once it is Ready; a pause that fails first, or
// ctx ending, is an error (whatever it took is lifted by then).
func Start(ctx context.Context, d Deps, cfg Config) (*Background, error) {
	pctx, stop := context.WithCancel(ctx)
	b := &Background{stop: stop, done: make(chan error, 1), log: d.Log}
	if b.log == nil {
		b.log = func(string, ...any) {}
	}
	ready := make(chan Status, 1)
	go func() {
		b.done <- Run(pctx, d, cfg, func(s Status) {
			b.mu.Lock()
			b.cur = s
			b.mu.Unlock()
			if s.Phase == PhaseReady {
				select {
				case ready <- s:
				default:
				}
			}
		})
	}()
	select {
	case st := <-ready:
		b.backupTS = st.BackupTS
		return b, nil
	case err := <-b.done:
		stop()
		if err == nil {
			err = errors.New("the pause ended before it was Ready")
		}
		return nil, fmt.Errorf("pause before snapshotting: %w", err)
	case <-ctx.Done():
		b.Release()
		return nil, ctx.Err()
	}
}

// BackupTS is the ts the pause holds GC at.
func (b *Background) BackupTS() uint64 { return b.backupTS }

// Holds is nil while the pause is still Ready (the snapshot engine's StillPaused).
func (b *Background) Holds(context.Context, uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur.Phase != PhaseReady {
		return fmt.Errorf("the pause is %s, not Ready: %s", b.cur.Phase, b.cur.Error)
	}
	return nil
}

// Release lifts the pause and waits until it has (idempotent).
func (b *Background) Release() {
	b.once.Do(func() {
		b.stop()
		if err := <-b.done; err != nil {
			b.log("lifting the pause: %v", err)
		}
	})
}

// ReadStatusFile reads a pause's status file (`fedbr br pause --status-file`) and returns it
// when the pause is Ready with a backup ts; any other state is an error that says why snapshots
// may not start.
func ReadStatusFile(file string) (Status, error) {
	b, err := os.ReadFile(file) //nolint:gosec // G304: a path the caller chose (--pause-status)
	if err != nil {
		return Status{}, fmt.Errorf("read the pause status: %w", err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return Status{}, fmt.Errorf("pause status %s: %w", file, err)
	}
	if st.Phase != PhaseReady {
		msg := fmt.Sprintf("the pause is %s, not %s: snapshots are only consistent while GC, scheduling and TiKV admin operations are held", st.Phase, PhaseReady)
		if st.Error != "" {
			msg += " (pause error: " + st.Error + ")"
		}
		return st, errors.New(msg)
	}
	if st.BackupTS == 0 {
		return st, fmt.Errorf("pause status %s is Ready without a backupTS", file)
	}
	return st, nil
}
