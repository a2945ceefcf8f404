package tidb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Held is what a snapshot-backup pause holds in a cluster, as PD reports it. After a backup,
// every part must be empty: a leftover GC safepoint makes the live cluster's MVCC garbage pile
// up, leftover paused schedulers or zeroed limits freeze its balancing.
type Held struct {
	// GC says a service safepoint holds GC back.
	GC bool
	// Schedulers are the paused PD schedulers.
	Schedulers []string
	// ZeroLimits are the schedule limits set to 0.
	ZeroLimits []string
}

// Any says something is still held.
func (h Held) Any() bool { return h.GC || len(h.Schedulers) > 0 || len(h.ZeroLimits) > 0 }

// GCReader is the part of PD's client that reads safepoints; github.com/tikv/pd/client's Client
// satisfies it.
type GCReader interface {
	UpdateGCSafePoint(ctx context.Context, safePoint uint64) (uint64, error)
	UpdateServiceGCSafePoint(ctx context.Context, serviceID string, ttl int64, safePoint uint64) (uint64, error)
}

// scheduleLimits are the limits a pause sets to 0.
var scheduleLimits = []string{"merge-schedule-limit", "leader-schedule-limit", "region-schedule-limit", "hot-region-schedule-limit", "replica-schedule-limit"}

// ReadHeld reads what PD holds: the service safepoints (deleting a probe service answers the
// minimum over the live ones, or the GC safepoint when there is none), the paused schedulers and
// the schedule limits. pdURL is PD's HTTP address (http://host:port).
func ReadHeld(ctx context.Context, pd GCReader, pdURL string) (Held, error) {
	var h Held
	gcSP, err := pd.UpdateGCSafePoint(ctx, 0)
	if err != nil {
		return h, fmt.Errorf("read the GC safepoint: %w", err)
	}
	minSvc, err := pd.UpdateServiceGCSafePoint(ctx, "fedbr-held-probe", 0, 0)
	if err != nil {
		return h, fmt.Errorf("read the service safepoints: %w", err)
	}
	h.GC = minSvc != gcSP
	pdURL = strings.TrimSuffix(pdURL, "/")
	if err := getJSON(ctx, pdURL+"/pd/api/v1/schedulers?status=paused", &h.Schedulers); err != nil {
		return h, err
	}
	var sc map[string]any
	if err := getJSON(ctx, pdURL+"/pd/api/v1/config/schedule", &sc); err != nil {
		return h, err
	}
	for _, k := range scheduleLimits {
		if v, ok := sc[k].(float64); ok && v == 0 {
			h.ZeroLimits = append(h.ZeroLimits, k)
		}
	}
	return h, nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, v)
}
