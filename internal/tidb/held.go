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

// Held is what a snapshot-backup pause holds in a cluster. After a backup, every part must be
// empty: a leftover GC safepoint makes the live cluster's MVCC garbage pile up, leftover paused
// schedulers or zeroed limits freeze its balancing.
//
// PD's API shows no TTL'd schedule config (GET /config/schedule answers the persisted values:
// docs/compatibility.md), so ZeroLimits and Settings are filled only by a reader that sees the
// values PD schedules by: the lab's PD double's ground truth (ReadHeld, HeldSettings).
type Held struct {
	// GC says a service safepoint other than TiDB's GC worker's holds GC back.
	GC bool
	// Schedulers are the paused PD schedulers.
	Schedulers []string
	// ZeroLimits are the schedule limits in force at 0 (ReadHeld, from the lab's ground truth).
	ZeroLimits []string
	// Settings are the schedule config items in force at the value one pause set (HeldSettings).
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

// GCReader is the part of PD's client that reads and sets safepoints;
// github.com/tikv/pd/client's Client satisfies it.
type GCReader interface {
	UpdateGCSafePoint(ctx context.Context, safePoint uint64) (uint64, error)
	UpdateServiceGCSafePoint(ctx context.Context, serviceID string, ttl int64, safePoint uint64) (uint64, error)
}

// scheduleLimits are the limits a pause sets to 0.
var scheduleLimits = []string{"merge-schedule-limit", "leader-schedule-limit", "region-schedule-limit", "hot-region-schedule-limit", "replica-schedule-limit"}

// GCWorkerService is the service safepoint TiDB's GC worker keeps in PD (gc_worker): it is
// always there, at the worker's last safe point, so it holds nothing back for a backup.
const GCWorkerService = "gc_worker"

// LabScheduleConfigPath is not PD's: the lab's PD double serves there the schedule config its
// schedulers obey, TTL'd values on top of the persisted ones. Real PD has no read of that
// (docs/compatibility.md), so only lab checks use it.
const LabScheduleConfigPath = "/pddouble/v1/effective-schedule-config"

// ReadHeld is the lab's check that nothing is held in its PD double: a live service safepoint
// other than gc_worker's (GET /gc/safepoint), the paused schedulers, and the schedule limits in
// force at 0, read from the double's ground truth (LabScheduleConfigPath), since PD's own API
// shows only persisted config. pdURL is the double's HTTP address (http://host:port).
//
// Over TLS (the lab's TLS runs) pdURL is https://; tidb.Plaintext is for the lab and tests.
func (t *TLS) ReadHeld(ctx context.Context, pdURL string) (Held, error) {
	var h Held
	pdURL = strings.TrimSuffix(pdURL, "/")
	sps, err := t.ServiceSafePoints(ctx, pdURL)
	if err != nil {
		return h, err
	}
	now := time.Now().Unix()
	for _, s := range sps {
		h.GC = h.GC || s.ServiceID != GCWorkerService && s.ExpiredAt > now
	}
	if err := t.getJSON(ctx, pdURL+"/pd/api/v1/schedulers?status=paused", &h.Schedulers); err != nil {
		return h, err
	}
	var sc map[string]any
	if err := t.getJSON(ctx, pdURL+LabScheduleConfigPath, &sc); err != nil {
		return h, err
	}
	for _, k := range scheduleLimits {
		if v, ok := sc[k].(float64); ok && v == 0 {
			h.ZeroLimits = append(h.ZeroLimits, k)
		}
	}
	return h, nil
}

// ReadHeldOf reads what PD still holds of one pause's hold, as far as PD's API shows it: GC when
// its service safepoint is listed and not expired (GET /gc/safepoint: deleting a safepoint
// removes it from the list), and the schedulers of the hold still paused. The hold's TTL'd
// config items cannot be read back (PD shows only persisted config): Settings stays empty, and
// a lift relies on PD's answer to its TTL-0 write and, failing that, on the TTL. Another
// pause's or service's holds are not looked at. pdURL is PD's HTTP address.
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
	return h, nil
}

// HeldSettings names the config items of hold whose value in effective is still the one the
// pause set (where that differs from the original: an item the pause left as it was holds
// nothing). effective must be the values PD schedules by, TTL'd ones included, which only the
// lab's PD double shows (LabScheduleConfigPath); PD's GET /config/schedule would always answer
// none.
func HeldSettings(hold Hold, effective map[string]any) []string {
	var out []string
	for _, s := range hold.Config {
		paused, original := jsonText(s.Paused), jsonText(s.Original)
		cur, ok := effective[strings.TrimPrefix(s.Key, "schedule.")]
		if ok && paused != original && ConfigText(cur) == paused {
			out = append(out, s.Key)
		}
	}
	return out
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

// SnapshotRecovering reads PD's snapshot-recovering mark (GET
// /admin/cluster/markers/snapshot-recovering), which a restore sets before its stores start
// and restore-data lifts at its end. Over TLS pdURL is https://.
func (t *TLS) SnapshotRecovering(ctx context.Context, pdURL string) (bool, error) {
	var m struct {
		Marked bool `json:"marked"`
	}
	if err := t.getJSON(ctx, strings.TrimSuffix(pdURL, "/")+"/pd/api/v1/admin/cluster/markers/snapshot-recovering", &m); err != nil {
		return false, fmt.Errorf("read PD's snapshot-recovering mark: %w", err)
	}
	return m.Marked, nil
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
