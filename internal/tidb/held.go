package tidb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Held is what a snapshot-backup pause holds in a cluster, as PD reports it. After a backup,
// every part must be empty: a leftover GC safepoint makes the live cluster's MVCC garbage pile
// up, leftover paused schedulers or zeroed limits freeze its balancing.
type Held struct {
	// GC says a service safepoint holds GC back.
	GC bool
	// Schedulers are the paused PD schedulers.
	Schedulers []string
	// ZeroLimits are the schedule limits set to 0 (ReadHeld).
	ZeroLimits []string
	// Settings are the schedule config items still at the value one pause set (ReadHeldOf).
	Settings []string `json:",omitempty"`
}

// Any says something is still held.
func (h Held) Any() bool {
	return h.GC || len(h.Schedulers) > 0 || len(h.ZeroLimits) > 0 || len(h.Settings) > 0
}

// String names what is held, for errors and logs.
func (h Held) String() string {
	var parts []string
	if h.GC {
		parts = append(parts, "the GC service safepoint")
	}
	if len(h.Schedulers) > 0 {
		parts = append(parts, "paused schedulers "+strings.Join(h.Schedulers, ", "))
	}
	if len(h.ZeroLimits) > 0 {
		parts = append(parts, "zeroed limits "+strings.Join(h.ZeroLimits, ", "))
	}
	if len(h.Settings) > 0 {
		parts = append(parts, "schedule config "+strings.Join(h.Settings, ", "))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// Hold is what one pause places in PD, its identity: the id of its GC service safepoint, the
// schedulers it pauses with a delay, and the schedule config items it sets with a TTL. The pause
// records it before it places any of it, so that a lift can undo exactly that after the pause
// died (ReadHeldOf checks it).
type Hold struct {
	ServiceSafePoint string    `json:"serviceSafePoint,omitempty"`
	Schedulers       []string  `json:"pausedSchedulers,omitempty"`
	Config           []Setting `json:"scheduleConfig,omitempty"`
}

// Empty says the hold names nothing.
func (h Hold) Empty() bool {
	return h.ServiceSafePoint == "" && len(h.Schedulers) == 0 && len(h.Config) == 0
}

// Setting is one schedule config item a pause sets with a TTL. The values are JSON-encoded
// (4, true, "true"), as PD's config API takes and returns them.
type Setting struct {
	// Key is the item as PD's config API takes it: schedule.<name>.
	Key string `json:"key"`
	// Original is the value before the pause, Paused the value the pause sets.
	Original string `json:"original"`
	Paused   string `json:"paused"`
}

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
//
// Over TLS (every production caller) pdURL is https://; tidb.Plaintext is for the lab and tests.
func (t *TLS) ReadHeld(ctx context.Context, pd GCReader, pdURL string) (Held, error) {
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
	if err := t.getJSON(ctx, pdURL+"/pd/api/v1/schedulers?status=paused", &h.Schedulers); err != nil {
		return h, err
	}
	var sc map[string]any
	if err := t.getJSON(ctx, pdURL+"/pd/api/v1/config/schedule", &sc); err != nil {
		return h, err
	}
	for _, k := range scheduleLimits {
		if v, ok := sc[k].(float64); ok && v == 0 {
			h.ZeroLimits = append(h.ZeroLimits, k)
		}
	}
	return h, nil
}

// ReadHeldOf reads what PD still holds of one pause's hold: GC when its service safepoint is
// listed and not expired (GET /gc/safepoint: deleting a safepoint removes it from the list), the
// schedulers of the hold still paused, and the config items whose value is still the one the
// pause set (where that differs from the original: an item the pause left as it was holds
// nothing). Another pause's or service's holds are not looked at. pdURL is PD's HTTP address.
//
// Over TLS pdURL is https://.
func (t *TLS) ReadHeldOf(ctx context.Context, pdURL string, hold Hold, now time.Time) (Held, error) {
	var h Held
	pdURL = strings.TrimSuffix(pdURL, "/")
	if hold.ServiceSafePoint != "" {
		sps, err := t.ServiceSafePoints(ctx, pdURL)
		if err != nil {
			return h, err
		}
		for _, s := range sps {
			h.GC = h.GC || s.ServiceID == hold.ServiceSafePoint && s.ExpiredAt > now.Unix()
		}
	}
	if len(hold.Schedulers) > 0 {
		var paused []string
		if err := t.getJSON(ctx, pdURL+"/pd/api/v1/schedulers?status=paused", &paused); err != nil {
			return h, err
		}
		for _, s := range hold.Schedulers {
			if slices.Contains(paused, s) {
				h.Schedulers = append(h.Schedulers, s)
			}
		}
	}
	if len(hold.Config) > 0 {
		var sc map[string]any
		if err := t.getJSON(ctx, pdURL+"/pd/api/v1/config/schedule", &sc); err != nil {
			return h, err
		}
		for _, s := range hold.Config {
			paused, original := jsonText(s.Paused), jsonText(s.Original)
			cur, ok := sc[strings.TrimPrefix(s.Key, "schedule.")]
			if ok && paused != original && ConfigText(cur) == paused {
				h.Settings = append(h.Settings, s.Key)
			}
		}
	}
	return h, nil
}

// ServiceSafePoint is one entry of PD's GET /gc/safepoint.
type ServiceSafePoint struct {
	ServiceID string `json:"service_id"`
	ExpiredAt int64  `json:"expired_at"`
	SafePoint uint64 `json:"safe_point"`
}

// ServiceSafePoints lists PD's service safepoints (GET /gc/safepoint; a deleted one is not
// listed, an expired one may be until PD prunes it). ExpiredAt is in Unix seconds.
//
// Over TLS pdURL is https://.
func (t *TLS) ServiceSafePoints(ctx context.Context, pdURL string) ([]ServiceSafePoint, error) {
	var sps struct {
		Services []ServiceSafePoint `json:"service_gc_safe_points"`
	}
	if err := t.getJSON(ctx, strings.TrimSuffix(pdURL, "/")+"/pd/api/v1/gc/safepoint", &sps); err != nil {
		return nil, fmt.Errorf("read PD's service safepoints: %w", err)
	}
	return sps.Services, nil
}

// PauseServicePrefix starts the id of every service safepoint a fedbr pause places.
const PauseServicePrefix = "fedbr-"

// ErrPauseGone means PD holds no fedbr pause at a backup ts: no service safepoint of a pause
// pins GC there (the pause lifted it, or its TTL lapsed).
var ErrPauseGone = errors.New("no fedbr pause holds GC at the backup ts")

// CheckPauseHolds checks, over t (pdURL https:// with TLS), that a fedbr pause still holds GC
// for backupTS: PD lists a live service safepoint named PauseServicePrefix… at backupTS−1,
// where a pause pins it. It is what a snapshot step in any data plane can see of the pause
// from the cluster itself.
func (t *TLS) CheckPauseHolds(ctx context.Context, pdURL string, backupTS uint64, now time.Time) error {
	sps, err := t.ServiceSafePoints(ctx, pdURL)
	if err != nil {
		return err
	}
	var seen []string
	for _, s := range sps {
		if !strings.HasPrefix(s.ServiceID, PauseServicePrefix) {
			continue
		}
		if s.SafePoint == backupTS-1 && s.ExpiredAt > now.Unix() {
			return nil
		}
		seen = append(seen, fmt.Sprintf("%s at %d, expiring %s", s.ServiceID, s.SafePoint, time.Unix(s.ExpiredAt, 0).UTC().Format(time.RFC3339)))
	}
	if len(seen) == 0 {
		return fmt.Errorf("%w %d: PD lists no fedbr service safepoint", ErrPauseGone, backupTS)
	}
	return fmt.Errorf("%w %d: PD lists only %s", ErrPauseGone, backupTS, strings.Join(seen, "; "))
}

// ConfigText is a config value as PD compares it (PD keeps TTL'd values as text): numbers
// without exponent, booleans and strings bare, so that 0 and 0.0 or "false" and false match.
func ConfigText(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonText is ConfigText of a JSON-encoded value (the text itself when it is not JSON).
func jsonText(raw string) string {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return raw
	}
	return ConfigText(v)
}

func (t *TLS) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := t.HTTPClient().Do(req)
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
