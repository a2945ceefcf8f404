package pddouble

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

// stateFile is the one file PD keeps in its data directory. It is rewritten
// whole into a temporary file, fsynced and renamed, so a crash leaves either
// the old or the new image, never a mix.
const stateFile = "pd-state.json"

// expiring is a value that stops counting at Expire; a zero Expire never expires.
type expiring struct {
	SafePoint uint64    `json:"safe_point,omitempty"`
	Value     any       `json:"value,omitempty"`
	Expire    time.Time `json:"expire"`
}

func (e expiring) live(now time.Time) bool {
	return e.Expire.IsZero() || now.Before(e.Expire)
}

// state is everything PD persists.
type state struct {
	ClusterID    uint64                   `json:"cluster_id"`
	Bootstrapped bool                     `json:"bootstrapped"`
	Recovering   bool                     `json:"snapshot_recovering"`
	NextID       uint64                   `json:"next_id"`
	MaxTSO       uint64                   `json:"max_tso"`
	GCSafePoint  uint64                   `json:"gc_safe_point"`
	ServiceGC    map[string]expiring      `json:"service_gc_safe_points"`
	Paused       map[string]time.Time     `json:"paused_schedulers"`
	Schedulers   []string                 `json:"schedulers"`
	Config       map[string]any           `json:"schedule_config"`
	TTLConfig    map[string]expiring      `json:"ttl_schedule_config"`
	Stores       map[uint64]*metapb.Store `json:"stores"`
	ResolvedTS   map[uint64]uint64        `json:"store_resolved_ts"`
	Regions      []*regionEntry           `json:"regions"`
}

// defaultSchedulers is what a fresh PD runs.
var defaultSchedulers = []string{
	"balance-leader-scheduler",
	"balance-region-scheduler",
	"balance-hot-region-scheduler",
	"evict-slow-store-scheduler",
}

// defaultScheduleConfig is the schedule section a fresh PD reports; keys are
// PD's kebab-case names, numbers are JSON numbers as PD returns them.
func defaultScheduleConfig() map[string]any {
	return map[string]any{
		"max-snapshot-count":          64.0,
		"max-pending-peer-count":      64.0,
		"max-merge-region-size":       20.0,
		"max-merge-region-keys":       200000.0,
		"split-merge-interval":        "1h0m0s",
		"leader-schedule-limit":       4.0,
		"region-schedule-limit":       2048.0,
		"replica-schedule-limit":      64.0,
		"merge-schedule-limit":        8.0,
		"hot-region-schedule-limit":   4.0,
		"enable-tikv-split-region":    true,
		"enable-location-replacement": true,
		"max-store-down-time":         "30m0s",
	}
}

func newState(clusterID uint64) *state {
	return &state{
		ClusterID:  clusterID,
		NextID:     1000,
		ServiceGC:  map[string]expiring{},
		Paused:     map[string]time.Time{},
		Schedulers: append([]string(nil), defaultSchedulers...),
		Config:     defaultScheduleConfig(),
		TTLConfig:  map[string]expiring{},
		Stores:     map[uint64]*metapb.Store{},
		ResolvedTS: map[uint64]uint64{},
	}
}

// loadState reads the state file in dir; it returns nil, nil when there is none.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pd state: %w", err)
	}
	st := newState(0)
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("decode pd state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

// writeState writes an encoded state into dir atomically (temp file,
// fsync, rename), under the volume's shared lock so a lab snapshot of PD's
// volume sees one image.
func writeState(dir string, b []byte) error {
	if err := volumelock.NewWriter(dir).Replace(stateFile, b); err != nil {
		return fmt.Errorf("save pd state: %w", err)
	}
	return nil
}
