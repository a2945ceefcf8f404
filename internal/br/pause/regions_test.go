package pause

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/regiononly"
	"github.com/fedbr/fedbr/internal/tidb"
)

// regionOnlyEnv is a region-only cluster with the real PD clients on it.
type regionOnlyEnv struct{ *regiononly.Env }

func startRegionOnly(t testing.TB, cfg regiononly.Config) *regionOnlyEnv {
	t.Helper()
	return &regionOnlyEnv{regiononly.StartEnv(t, cfg)}
}

// pauseUntilReady runs the pause until Ready (or its end), then stops it; it returns Run's error
// and when Ready was reported (zero if never).
func (e *regionOnlyEnv) pauseUntilReady(ctx context.Context, log func(string, ...any)) (time.Time, error) {
	physical, logical, err := e.PD.GetTS(ctx)
	if err != nil {
		return time.Time{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		once    sync.Once
		readyAt time.Time
		ready   = make(chan struct{})
	)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Deps{PD: e.PD, HTTP: e.HTTP, Dial: e.DialBackup, Log: log},
			Config{TTL: 2 * time.Minute, BackupTS: uint64(physical)<<18 | uint64(logical)}, func(s Status) {
				if s.Phase == PhaseReady {
					once.Do(func() { readyAt = time.Now(); close(ready) })
				}
			})
	}()
	select {
	case <-ready:
		stop()
		return readyAt, <-done
	case err := <-done:
		return time.Time{}, err
	}
}

// TestPauseWaitAppliesOnEveryPD: the pause wait-applies every region of a key space larger
// than one page of PD's regions, on PD v8.5 and on PD v7.5 (no BatchScanRegions).
func TestPauseWaitAppliesOnEveryPD(t *testing.T) {
	const regions = 2*tidb.RegionPageSize + 500
	for _, api := range []string{pddouble.APIv85, pddouble.APIv75} {
		t.Run(api, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			e := startRegionOnly(t, regiononly.Config{Regions: regions, Stores: 4, API: api})
			var (
				mu    sync.Mutex
				lines []string
			)
			readyAt, err := e.pauseUntilReady(ctx, func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, f)
			})
			if err != nil {
				t.Fatal(err)
			}
			if readyAt.IsZero() {
				t.Fatal("the pause ended without reporting Ready")
			}
			if n := e.Cluster.NotWaitApplied(); n != 0 {
				t.Fatalf("%d of %d regions never wait-applied", n, regions)
			}
			fell := strings.Contains(strings.Join(lines, "\n"), "ScanRegions")
			if fell != (api == pddouble.APIv75) {
				t.Errorf("PD %s: fallback logged %v", api, fell)
			}
		})
	}
}
