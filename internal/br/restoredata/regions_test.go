package restoredata

import (
	"context"
	"errors"
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

// run runs the data phase to a resolved ts just below PD's TSO.
func (e *regionOnlyEnv) run(ctx context.Context, stores int, d Deps, cfg Config) (Result, error) {
	physical, logical, err := e.PD.GetTS(ctx)
	if err != nil {
		return Result{}, err
	}
	d.PD, d.HTTP, d.Dial = e.PD, e.HTTP, e.Dial
	cfg.ResolvedTS, cfg.Stores = uint64(physical)<<18|uint64(logical), stores
	return Run(ctx, d, cfg)
}

// TestRestoreDataPagesOnEveryPD: the data phase recovers and flashes back every region of a
// key space larger than one page of PD's regions, on PD v8.5 and on PD v7.5 (no
// BatchScanRegions).
func TestRestoreDataPagesOnEveryPD(t *testing.T) {
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
			res, err := e.run(ctx, 4, Deps{Log: func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, f)
			}}, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Regions != regions {
				t.Errorf("planned %d regions, want %d", res.Regions, regions)
			}
			if n := e.Cluster.NotFlashedBack(); n != 0 {
				t.Fatalf("%d of %d regions not flashed back", n, regions)
			}
			fell := strings.Contains(strings.Join(lines, "\n"), "ScanRegions")
			if fell != (api == pddouble.APIv75) {
				t.Errorf("PD %s: fallback logged %v", api, fell)
			}
		})
	}
}

// TestRegionOnlyStoresCheckKeys is the region-only stores' negative control: PD's encoded
// boundaries sent as raw keys are refused as outside the region, as by TiKV.
func TestRegionOnlyStoresCheckKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e := startRegionOnly(t, regiononly.Config{Regions: 50, Stores: 3})
	_, err := e.run(ctx, 3, Deps{}, Config{Unsafe: Unsafe{EncodedKeys: true}})
	if !errors.Is(err, ErrKeyNotInRegion) {
		t.Fatalf("restore-data with encoded keys = %v, want ErrKeyNotInRegion", err)
	}
}
