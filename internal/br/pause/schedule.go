package pause

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/tidb"
)

// pausableSchedulers are the PD schedulers that move regions or leaders; a snapshot backup pauses
// each one that is running.
var pausableSchedulers = []string{
	"balance-leader-scheduler",
	"balance-hot-region-scheduler",
	"balance-region-scheduler",
	"shuffle-leader-scheduler",
	"shuffle-region-scheduler",
	"shuffle-hot-region-scheduler",
	"evict-slow-store-scheduler",
}

// schedulePause is what pausing PD scheduling changes, and how to undo it.
type schedulePause struct {
	// Schedulers to pause with a delay (and resume with delay 0).
	Schedulers []string
	// Paused is the schedule config to set with a TTL, keys prefixed "schedule.".
	Paused map[string]any
	// Original is the config to restore on resume, same keys.
	Original map[string]any
}

// planSchedulePause decides, from PD's current schedule config and scheduler list, which
// schedulers to pause and which limits to zero. Only keys PD reports are touched, so an older
// or newer PD never gets a key it does not know.
func planSchedulePause(current map[string]any, running []string, storeCount int) schedulePause {
	p := schedulePause{Paused: map[string]any{}, Original: map[string]any{}}
	for _, s := range running {
		if slices.Contains(pausableSchedulers, s) {
			p.Schedulers = append(p.Schedulers, s)
		}
	}
	slices.Sort(p.Schedulers)

	set := func(key string, paused any) {
		v, ok := current[key]
		if !ok {
			return
		}
		p.Original["schedule."+key] = v
		p.Paused["schedule."+key] = paused
	}
	for _, k := range []string{"merge-schedule-limit", "leader-schedule-limit", "region-schedule-limit", "hot-region-schedule-limit", "replica-schedule-limit"} {
		set(k, 0)
	}
	set("enable-tikv-split-region", false)
	set("enable-location-replacement", "false")
	set("max-pending-peer-count", math.MaxInt32)
	if v, ok := current["max-snapshot-count"].(float64); ok {
		set("max-snapshot-count", min(40, v*float64(max(storeCount, 1))))
	}
	return p
}

// settings are the plan's config items as a pause's identity records them (tidb.Setting:
// values JSON-encoded), in key order.
func (p schedulePause) settings() []tidb.Setting {
	var out []tidb.Setting
	for _, k := range sortedKeys(p.Paused) {
		paused, _ := json.Marshal(p.Paused[k])
		original, _ := json.Marshal(p.Original[k])
		out = append(out, tidb.Setting{Key: k, Paused: string(paused), Original: string(original)})
	}
	return out
}

// scheduleOf is the schedulePause a pause's identity records: what resume undoes.
func scheduleOf(h tidb.Hold) (schedulePause, error) {
	p := schedulePause{Schedulers: slices.Clone(h.Schedulers), Paused: map[string]any{}, Original: map[string]any{}}
	for _, s := range h.Config {
		if !strings.HasPrefix(s.Key, "schedule.") {
			return p, fmt.Errorf("config item %q: want a schedule.<name> key", s.Key)
		}
		var paused, original any
		if err := json.Unmarshal([]byte(s.Paused), &paused); err != nil {
			return p, fmt.Errorf("config item %s: paused value %q: %w", s.Key, s.Paused, err)
		}
		if err := json.Unmarshal([]byte(s.Original), &original); err != nil {
			return p, fmt.Errorf("config item %s: original value %q: %w", s.Key, s.Original, err)
		}
		p.Paused[s.Key], p.Original[s.Key] = paused, original
	}
	return p, nil
}

// sortedKeys lists a config map's keys in order, for stable logs.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}

// scheduleKeeper applies a schedulePause with TTLs, refreshes it, and undoes it.
type scheduleKeeper struct {
	http SchedulePD
	ttl  time.Duration
	plan schedulePause
}

// decide reads PD's scheduling state and plans the pause, without applying it (refresh does).
func (k *scheduleKeeper) decide(ctx context.Context, storeCount int) error {
	current, err := k.http.GetScheduleConfig(ctx)
	if err != nil {
		return fmt.Errorf("read schedule config: %w", err)
	}
	running, err := k.http.GetSchedulers(ctx)
	if err != nil {
		return fmt.Errorf("list schedulers: %w", err)
	}
	k.plan = planSchedulePause(current, running, storeCount)
	return nil
}

// refresh (re)applies the pause with a fresh TTL. The schedulers and the limits are
// independent PD calls and go out at once: the pause is in force when the slowest returns.
func (k *scheduleKeeper) refresh(ctx context.Context) error {
	secs := int64(k.ttl / time.Second)
	return k.all(func(s string) error {
		if err := k.http.SetSchedulerDelay(ctx, s, secs); err != nil {
			return fmt.Errorf("pause scheduler %s: %w", s, err)
		}
		return nil
	}, k.plan.Paused, func(cfg map[string]any) error {
		if err := k.http.SetConfig(ctx, cfg, float64(secs)); err != nil {
			return fmt.Errorf("pause scheduling limits %v: %w", sortedKeys(cfg), err)
		}
		return nil
	})
}

// resume resumes every paused scheduler and restores the original limits, all at once (the
// GC pause window ends when the slowest returns); it tries all and returns every error.
func (k *scheduleKeeper) resume(ctx context.Context) error {
	return k.all(func(s string) error {
		if err := k.http.SetSchedulerDelay(ctx, s, 0); err != nil {
			return fmt.Errorf("resume scheduler %s: %w", s, err)
		}
		return nil
	}, k.plan.Original, func(cfg map[string]any) error {
		if err := k.http.SetConfig(ctx, cfg, 0); err != nil {
			return fmt.Errorf("restore scheduling limits: %w", err)
		}
		return nil
	})
}

// all runs scheduler for every planned scheduler and limits for cfg (when not empty)
// concurrently, and joins their errors.
func (k *scheduleKeeper) all(scheduler func(string) error, cfg map[string]any, limits func(map[string]any) error) error {
	errs := make([]error, len(k.plan.Schedulers)+1)
	var wg sync.WaitGroup
	for i, s := range k.plan.Schedulers {
		wg.Go(func() { errs[i] = scheduler(s) })
	}
	if len(cfg) > 0 {
		wg.Go(func() { errs[len(errs)-1] = limits(cfg) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
