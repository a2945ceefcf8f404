package pddouble

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"

	"github.com/fedbr/fedbr/internal/tidb"
)

var errUnknownScheduler = errors.New("scheduler not found")

// schedulerNames lists the schedulers, paused or not, as PD's GET /schedulers.
func (s *Server) schedulerNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.st.Schedulers...)
}

// pausedSchedulers lists the schedulers paused at this instant.
func (s *Server) pausedSchedulers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	now := s.now()
	for _, n := range s.st.Schedulers {
		if !s.schedulerActiveLocked(n, now) {
			out = append(out, n)
		}
	}
	return out
}

// pauseScheduler pauses name for delay seconds; 0 resumes it at once.
func (s *Server) pauseScheduler(name string, delay int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for _, n := range s.st.Schedulers {
		found = found || n == name
	}
	if !found {
		return fmt.Errorf("pause %s: %w", name, errUnknownScheduler)
	}
	if delay <= 0 {
		delete(s.st.Paused, name)
	} else {
		s.st.Paused[name] = s.now().Add(time.Duration(delay) * time.Second)
	}
	return s.persistLocked()
}

func (s *Server) schedulerActiveLocked(name string, now time.Time) bool {
	until, ok := s.st.Paused[name]
	if !ok {
		for _, n := range s.st.Schedulers {
			if n == name {
				return true
			}
		}
		return false
	}
	return !now.Before(until)
}

// scheduleConfig is PD's GET /config/schedule (server/api/config.go
// confHandler.GetScheduleConfig: Server.GetScheduleConfig, the persisted
// options): the persisted values only. TTL'd values apply to scheduling
// (configValueLocked) but PD's API does not show them.
func (s *Server) scheduleConfig() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]any, len(s.st.Config))
	for k, v := range s.st.Config {
		out[k] = v
	}
	return out
}

// EffectiveScheduleConfig is the double's ground truth, which no PD API
// shows: the schedule config its schedulers obey, live TTL'd values on top
// of the persisted ones. The lab reads it at EffectiveScheduleConfigPath.
func (s *Server) EffectiveScheduleConfig() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make(map[string]any, len(s.st.Config))
	for k := range s.st.Config {
		out[k] = s.configValueLocked(k, now)
	}
	return out
}

func (s *Server) configValueLocked(key string, now time.Time) any {
	if o, ok := s.st.TTLConfig[key]; ok && o.live(now) {
		return o.Value
	}
	return s.st.Config[key]
}

func (s *Server) configNumberLocked(key string, now time.Time) float64 {
	switch v := s.configValueLocked(key, now).(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	return 0
}

func (s *Server) configBoolLocked(key string, now time.Time) bool {
	switch v := s.configValueLocked(key, now).(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

var (
	errUnknownConfig   = errors.New("config item not found")
	errTTLConfigExists = errors.New("need to clean up TTL first")
)

// errTiKVSplitDisabled is PD's answer to a split asked while enable-tikv-split-region is off.
var errTiKVSplitDisabled = errors.New("tikv split region disabled")

// tikvSplitEnabled reports the effective schedule.enable-tikv-split-region.
func (s *Server) tikvSplitEnabled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configBoolLocked("enable-tikv-split-region", s.now())
}

// setConfig persists schedule items (keys with or without the "schedule."
// prefix). As PD (confHandler.updateConfig), an item with a live TTL'd value
// is refused: "need to clean up TTL first for schedule.<name>".
func (s *Server) setConfig(kv map[string]any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k := range kv {
		name := strings.TrimPrefix(k, "schedule.")
		if _, ok := s.st.Config[name]; !ok {
			return fmt.Errorf("set config %q: %w", k, errUnknownConfig)
		}
		if o, ok := s.st.TTLConfig[name]; ok && o.live(now) {
			return fmt.Errorf("%w for schedule.%s", errTTLConfigExists, name)
		}
	}
	for k, v := range kv {
		s.st.Config[strings.TrimPrefix(k, "schedule.")] = v
	}
	return s.persistLocked()
}

// ttlConfigKeys are the items PD takes with a TTL (server/config
// persist_options.go supportedTTLConfigs, release-7.5); IsSupportedTTLConfig
// also takes any add-peer-… or remove-peer-… key.
var ttlConfigKeys = []string{
	"schedule.max-snapshot-count",
	"schedule.max-merge-region-size",
	"schedule.max-pending-peer-count",
	"schedule.max-merge-region-keys",
	"schedule.leader-schedule-limit",
	"schedule.region-schedule-limit",
	"schedule.replica-schedule-limit",
	"schedule.merge-schedule-limit",
	"schedule.hot-region-schedule-limit",
	"schedule.scheduler-max-waiting-operator",
	"schedule.enable-location-replacement",
	"schedule.enable-tikv-split-region",
	"default-add-peer",
	"default-remove-peer",
}

// ttlConfigKeysV85 are the items release-8.5 adds to ttlConfigKeys.
var ttlConfigKeysV85 = []string{"schedule.split-scatter-schedule-limit"}

// supportsTTL is PD's IsSupportedTTLConfig for the double's API version.
func (s *Server) supportsTTL(key string) bool {
	if slices.Contains(ttlConfigKeys, key) || s.cfg.API != APIv75 && slices.Contains(ttlConfigKeysV85, key) {
		return true
	}
	return strings.HasPrefix(key, "add-peer-") || strings.HasPrefix(key, "remove-peer-")
}

// setTTLConfig is PD's Server.SaveTTLConfig: every key must be one PD takes
// with a TTL (else "unsupported ttl config <key>" and nothing is set); ttl
// > 0 overrides the persisted values for ttl seconds, ttl <= 0 drops the
// overrides of these keys (PersistOptions.SetTTLData with 0).
func (s *Server) setTTLConfig(kv map[string]any, ttl int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k := range kv {
		if !s.supportsTTL(k) {
			return fmt.Errorf("unsupported ttl config %s", k)
		}
	}
	for k, v := range kv {
		k = strings.TrimPrefix(k, "schedule.")
		if ttl <= 0 {
			delete(s.st.TTLConfig, k)
		} else {
			s.st.TTLConfig[k] = expiring{Value: v, Expire: now.Add(time.Duration(ttl) * time.Second)}
		}
	}
	for k, o := range s.st.TTLConfig {
		if !o.live(now) {
			delete(s.st.TTLConfig, k)
		}
	}
	return s.persistLocked()
}

// regionHeartbeat records a leader's report and returns the operator the
// schedulers hand the region, or nil.
func (s *Server) regionHeartbeat(e *regionEntry) (*pdpb.RegionHeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.st.Bootstrapped {
		return nil, errNotBootstrapped
	}
	old := s.regions.byID[e.Region.GetId()]
	e.LeaderSince, e.Reported = s.now(), s.now()
	if old != nil && proto.Equal(old.Leader, e.Leader) {
		e.LeaderSince = old.LeaderSince
	}
	if !s.regions.put(e) {
		return nil, nil
	}
	// Only a changed shape or leader must reach the disk soon; key counts
	// and pending peers are soft state, written with the next save.
	if old == nil || !proto.Equal(old.Region, e.Region) || !proto.Equal(old.Leader, e.Leader) {
		s.dirty = true
	} else {
		s.softDirty = true
	}
	if op := s.adminStepLocked(e); op != nil {
		return op, nil
	}
	return s.operatorLocked(e, s.now()), nil
}

// operatorLocked is the schedulers' decision for one region. Every kind of
// operator is gated exactly as BR pauses it: the scheduler by name (paused
// with delay) and the schedule limits in the config (TTL'd to 0). Splits of
// big regions come first; otherwise merge, peer move and leader transfer are
// tried in a random order, so all three keep happening.
func (s *Server) operatorLocked(e *regionEntry, now time.Time) *pdpb.RegionHeartbeatResponse {
	if s.st.Recovering || e.Leader == nil || s.rng.Float64() >= s.cfg.OperatorRate {
		return nil
	}
	resp := &pdpb.RegionHeartbeatResponse{
		Header:      &pdpb.ResponseHeader{ClusterId: s.st.ClusterID},
		RegionId:    e.Region.GetId(),
		RegionEpoch: e.Region.GetRegionEpoch(),
		TargetPeer:  e.Leader,
	}
	regionOK := s.schedulerActiveLocked("balance-region-scheduler", now) &&
		s.configNumberLocked("region-schedule-limit", now) > 0
	if regionOK && s.configBoolLocked("enable-tikv-split-region", now) && e.Keys >= s.cfg.SplitKeys {
		resp.SplitRegion = &pdpb.SplitRegion{Policy: pdpb.CheckPolicy_APPROXIMATE}
		return resp
	}
	kinds := []func() bool{
		func() bool { return s.mergeOpLocked(e, now, resp) },
		func() bool { return s.moveOpLocked(e, now, resp, regionOK) },
		func() bool { return s.leaderOpLocked(e, now, resp) },
	}
	s.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for _, k := range kinds {
		if k() {
			return resp
		}
	}
	return nil
}

// mergeOpLocked asks a small region to merge into its small right
// neighbour on the same stores (PD's merge checker, limited by
// merge-schedule-limit).
func (s *Server) mergeOpLocked(e *regionEntry, now time.Time, resp *pdpb.RegionHeartbeatResponse) bool {
	if s.configNumberLocked("merge-schedule-limit", now) <= 0 || e.Keys > s.cfg.MergeKeys {
		return false
	}
	n := s.regions.next(e)
	if n == nil || n.Keys > s.cfg.MergeKeys || !tidb.SameStores(e.Region, n.Region) {
		return false
	}
	resp.Merge = &pdpb.Merge{Target: n.Region}
	return true
}

// moveOpLocked runs one step of a replica move (see balanceRegionStep).
// Starting a move (adding a replica) is balance-region's, so it needs
// regionOK; finishing one (removing the excess replica) is the replica
// checker's, which only replica-schedule-limit stops, so a move in flight
// completes after balance-region is paused, as PD's running operators do.
// A new peer's id is allocated (and persisted) before it is handed out.
func (s *Server) moveOpLocked(e *regionEntry, now time.Time, resp *pdpb.RegionHeartbeatResponse, regionOK bool) bool {
	if !s.cfg.MoveReplicas && s.cfg.ShuffleRegionRate <= 0 {
		return false
	}
	load := map[uint64]int{}
	for _, r := range s.regions.sorted {
		for _, p := range r.Region.GetPeers() {
			load[p.GetStoreId()]++
		}
	}
	maxDown := s.maxStoreDownTimeLocked(now)
	var up []uint64
	for id, st := range s.st.Stores {
		if st.GetAddress() != "" && storeStateName(st, now, maxDown) == stateUp {
			up = append(up, id)
		}
	}
	step := balanceRegionStep(e.Region, e.Leader, e.Pending, load, up, s.rng.Float64() < s.cfg.ShuffleRegionRate)
	switch {
	case step.AddStore != 0 && regionOK:
		id, err := s.allocIDLocked()
		if err != nil {
			return false
		}
		resp.ChangePeer = &pdpb.ChangePeer{Peer: &metapb.Peer{Id: id, StoreId: step.AddStore}, ChangeType: eraftpb.ConfChangeType_AddNode}
	case step.Remove != nil && s.configNumberLocked("replica-schedule-limit", now) > 0:
		resp.ChangePeer = &pdpb.ChangePeer{Peer: step.Remove, ChangeType: eraftpb.ConfChangeType_RemoveNode}
	default:
		return false
	}
	return true
}

// leaderSettle is how long a new leader keeps its region before
// balance-leader may move it again. Without it a high OperatorRate moved a
// region's leader on every heartbeat (every 80 ms in the tests), faster than
// any real PD and too fast for a client to land a write between moves.
const leaderSettle = 500 * time.Millisecond

// leaderOpLocked hands out a leader transfer (balance-leader, limited by
// leader-schedule-limit).
func (s *Server) leaderOpLocked(e *regionEntry, now time.Time, resp *pdpb.RegionHeartbeatResponse) bool {
	if !s.schedulerActiveLocked("balance-leader-scheduler", now) || s.configNumberLocked("leader-schedule-limit", now) <= 0 ||
		now.Sub(e.LeaderSince) < leaderSettle {
		return false
	}
	p := s.leaderTargetLocked(e)
	if p == nil {
		return false
	}
	resp.TransferLeader = &pdpb.TransferLeader{Peer: p}
	return true
}

// leaderTargetLocked picks the follower on the store with the fewest leaders
// (ties broken at random), so leaders keep moving around like under
// balance-leader + shuffle.
func (s *Server) leaderTargetLocked(e *regionEntry) *metapb.Peer {
	leaders := map[uint64]int{}
	for _, r := range s.regions.sorted {
		if r.Leader != nil {
			leaders[r.Leader.GetStoreId()]++
		}
	}
	var cands []*metapb.Peer
	for _, p := range e.Region.GetPeers() {
		if p.GetId() != e.Leader.GetId() && p.GetRole() == metapb.PeerRole_Voter {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	s.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	sort.SliceStable(cands, func(i, j int) bool {
		return leaders[cands[i].GetStoreId()] < leaders[cands[j].GetStoreId()]
	})
	return cands[0]
}
