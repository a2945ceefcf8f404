// Package verify judges a restored TiDB cluster from PD alone, as a restore drill does once
// the restore completed: PD's snapshot-recovering mark lifted, every TiKV store Up (as many as
// the backup had, when told), PD's regions tiling the whole key space, each with a leader and
// none left in flashback, and PD's TSO above the backup's commit ts. `fedbr br verify` runs it.
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/checklist"
	"github.com/fedbr/fedbr/internal/tidb"
)

// PD is what the checks read over PD's gRPC API; github.com/tikv/pd/client's Client satisfies it.
type PD interface {
	tidb.RegionPD
	GetTS(ctx context.Context) (physical, logical int64, err error)
}

// Stores lists PD's stores with their state names (Up, Disconnected, Down, Offline, …);
// github.com/tikv/pd/client/http's Client satisfies it.
type Stores interface {
	GetStores(ctx context.Context) (*pdhttp.StoresInfo, error)
}

// Deps are the clients the checks use.
type Deps struct {
	PD     PD
	Stores Stores
	// Recovering reads PD's snapshot-recovering mark (tidb.TLS.SnapshotRecovering).
	Recovering func(ctx context.Context) (bool, error)
	// Log receives a line per check; nil drops them.
	Log func(format string, args ...any)
}

// Config is what the restored cluster must match.
type Config struct {
	// Stores is how many TiKV stores the backup had (0: not checked).
	Stores int
	// CommitTS is the backup's commit ts (0: not checked).
	CommitTS uint64
}

// Check is one check's outcome: its name and, when it failed, why.
type Check struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
}

// Result is every check's outcome.
type Result struct {
	Checks  []Check `json:"checks"`
	Stores  int     `json:"stores"`
	Regions int     `json:"regions"`
	// Passed says every check passed.
	Passed bool `json:"passed"`
}

// Failed lists the checks that failed, one per line.
func (r Result) Failed() string {
	var out []string
	for _, c := range r.Checks {
		if c.Error != "" {
			out = append(out, c.Name+": "+c.Error)
		}
	}
	return strings.Join(out, "\n")
}

// maxNamed bounds how many offending regions or stores one check names.
const maxNamed = 5

// Run runs every check, each whatever the others found.
func Run(ctx context.Context, d Deps, cfg Config) Result {
	if d.Log == nil {
		d.Log = func(string, ...any) {}
	}
	var res Result
	add := func(name string, err error) {
		c := Check{Name: name}
		if err != nil {
			c.Error = err.Error()
		}
		res.Checks = append(res.Checks, c)
		d.Log("%s", Result{Checks: []Check{c}}.Lines()[0])
	}
	add("PD's snapshot-recovering mark is lifted", recoveringLifted(ctx, d))
	n, err := storesUp(ctx, d, cfg.Stores)
	res.Stores = n
	name := "every TiKV store is Up"
	if cfg.Stores > 0 {
		name = fmt.Sprintf("every TiKV store is Up, %d of them", cfg.Stores)
	}
	add(name, err)
	res.Regions, err = regions(ctx, d)
	add("the regions tile the key space, each with a leader, none in flashback", err)
	if cfg.CommitTS > 0 {
		add(fmt.Sprintf("PD's TSO is above the commit ts %d", cfg.CommitTS), tsoAbove(ctx, d, cfg.CommitTS))
	}
	res.Passed = true
	for _, c := range res.Checks {
		res.Passed = res.Passed && c.Error == ""
	}
	return res
}

// Until runs the checks every interval until they all pass or within ends, and returns the
// passing result or the last one: a cluster just out of recovery settles in a few heartbeats
// (PD learns the leaders from them), so one read may see what the next would not.
func Until(ctx context.Context, d Deps, cfg Config, within, interval time.Duration) Result {
	deadline := time.Now().Add(within)
	quiet := d
	quiet.Log = func(string, ...any) {}
	for {
		r := Run(ctx, quiet, cfg)
		if r.Passed || time.Now().After(deadline) || ctx.Err() != nil {
			if d.Log != nil {
				for _, line := range r.Lines() {
					d.Log("%s", line)
				}
			}
			return r
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// Lines are the checks one per line, as `fedbr preflight` prints its own.
func (r Result) Lines() []string {
	var l checklist.List
	for _, c := range r.Checks {
		cc := checklist.Check{What: c.Name}
		if c.Error != "" {
			cc.Err = errors.New(c.Error)
		}
		l.Checks = append(l.Checks, cc)
	}
	return l.Lines()
}

func recoveringLifted(ctx context.Context, d Deps) error {
	marked, err := d.Recovering(ctx)
	switch {
	case err != nil:
		return err
	case marked:
		return fmt.Errorf("PD is still marked snapshot-recovering: the restore's data phase did not finish (restore-data lifts the mark at its end)")
	}
	return nil
}

// storesUp checks the TiKV stores (not TiFlash, not tombstones) and returns how many there are.
func storesUp(ctx context.Context, d Deps, want int) (int, error) {
	info, err := d.Stores.GetStores(ctx)
	if err != nil {
		return 0, fmt.Errorf("list PD's stores: %w", err)
	}
	var notUp []string
	n := 0
	for _, s := range info.Stores {
		if s.Store.StateName == metapb.StoreState_Tombstone.String() || tiflash(s.Store.Labels) {
			continue
		}
		n++
		if s.Store.StateName != metapb.StoreState_Up.String() {
			notUp = append(notUp, fmt.Sprintf("store %d (%s) is %s", s.Store.ID, s.Store.Address, s.Store.StateName))
		}
	}
	slices.Sort(notUp)
	switch {
	case len(notUp) > 0:
		return n, fmt.Errorf("%d of %d not Up: %s", len(notUp), n, named(notUp))
	case want > 0 && n != want:
		return n, fmt.Errorf("PD lists %d TiKV stores, the backup had %d", n, want)
	case n == 0:
		return 0, fmt.Errorf("PD lists no TiKV store")
	}
	return n, nil
}

func tiflash(labels []pdhttp.StoreLabel) bool {
	for _, l := range labels {
		if l.Key == "engine" && l.Value == "tiflash" {
			return true
		}
	}
	return false
}

// regions scans PD's regions page by page and returns how many there are.
func regions(ctx context.Context, d Deps) (int, error) {
	var leaderless, flashback []string
	next, done, count := []byte{}, false, 0
	err := tidb.NewRegionScanner(d.PD, tidb.RegionScanOptions{Log: d.Log}).Pages(ctx, []router.KeyRange{{}}, func(page []*router.Region) error {
		if done {
			return fmt.Errorf("regions overlap after the end of the key space (region %d starts at %q)", page[0].Meta.GetId(), page[0].Meta.GetStartKey())
		}
		metas := make([]*metapb.Region, len(page))
		for i, r := range page {
			metas[i] = r.Meta
			if r.Leader == nil || r.Leader.GetId() == 0 {
				leaderless = append(leaderless, fmt.Sprintf("region %d", r.Meta.GetId()))
			}
			if r.Meta.GetIsInFlashback() {
				flashback = append(flashback, fmt.Sprintf("region %d (since ts %d)", r.Meta.GetId(), r.Meta.GetFlashbackStartTs()))
			}
		}
		count += len(page)
		end, err := tidb.Tiles(next, metas)
		if err != nil {
			return err
		}
		next, done = end, len(end) == 0
		return nil
	})
	switch {
	case err != nil:
		return count, err
	case !done:
		return count, fmt.Errorf("region hole: no region covers the key %q", next)
	case len(leaderless) > 0:
		return count, fmt.Errorf("%d of %d regions have no leader: %s", len(leaderless), count, named(leaderless))
	case len(flashback) > 0:
		return count, fmt.Errorf("%d of %d regions are still in flashback: %s", len(flashback), count, named(flashback))
	}
	return count, nil
}

func tsoAbove(ctx context.Context, d Deps, commitTS uint64) error {
	physical, logical, err := d.PD.GetTS(ctx)
	if err != nil {
		return fmt.Errorf("get a ts from PD: %w", err)
	}
	ts, err := tidb.ComposeTS(physical, logical)
	if err != nil {
		return err
	}
	if ts <= commitTS {
		return fmt.Errorf("PD's TSO %d is not above the commit ts %d: a new transaction could commit below the restored data", ts, commitTS)
	}
	return nil
}

// named lists up to maxNamed items and how many more there are.
func named(items []string) string {
	if len(items) <= maxNamed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxNamed], ", "), len(items)-maxNamed)
}
