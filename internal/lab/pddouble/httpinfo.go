package pddouble

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// The JSON shapes below are PD's API types as github.com/tikv/pd/client/http
// decodes them (StoresInfo, StoreInfo, RegionsInfo, RegionInfo); keys are
// upper-case hex, as PD's HexRegionKeyStr renders them.

type storeMetaJSON struct {
	ID             uint64               `json:"id"`
	Address        string               `json:"address"`
	State          int32                `json:"state"`
	StateName      string               `json:"state_name"`
	Version        string               `json:"version"`
	Labels         []*metapb.StoreLabel `json:"labels"`
	StatusAddress  string               `json:"status_address"`
	GitHash        string               `json:"git_hash"`
	StartTimestamp int64                `json:"start_timestamp"`
	LastHeartbeat  int64                `json:"last_heartbeat"`
}

type storeStatusJSON struct {
	LeaderCount     int       `json:"leader_count"`
	RegionCount     int       `json:"region_count"`
	StartTS         time.Time `json:"start_ts"`
	LastHeartbeatTS time.Time `json:"last_heartbeat_ts"`
}

type storeInfoJSON struct {
	Store  storeMetaJSON   `json:"store"`
	Status storeStatusJSON `json:"status"`
}

type peerJSON struct {
	ID        uint64 `json:"id"`
	StoreID   uint64 `json:"store_id"`
	RoleName  string `json:"role_name"`
	IsLearner bool   `json:"is_learner"`
}

type regionInfoJSON struct {
	ID              uint64     `json:"id"`
	StartKey        string     `json:"start_key"`
	EndKey          string     `json:"end_key"`
	Epoch           epochJSON  `json:"epoch"`
	Peers           []peerJSON `json:"peers"`
	Leader          peerJSON   `json:"leader"`
	DownPeers       []peerJSON `json:"down_peers"`
	PendingPeers    []peerJSON `json:"pending_peers"`
	ApproximateKeys int64      `json:"approximate_keys"`
}

type epochJSON struct {
	ConfVer uint64 `json:"conf_ver"`
	Version uint64 `json:"version"`
}

func hexKey(k []byte) string { return strings.ToUpper(hex.EncodeToString(k)) }

func toPeerJSON(p *metapb.Peer) peerJSON {
	if p == nil {
		return peerJSON{}
	}
	return peerJSON{ID: p.GetId(), StoreID: p.GetStoreId(), RoleName: p.GetRole().String(), IsLearner: p.GetRole() == metapb.PeerRole_Learner}
}

func toRegionJSON(e *regionEntry) regionInfoJSON {
	r := e.Region
	out := regionInfoJSON{
		ID: r.GetId(), StartKey: hexKey(r.GetStartKey()), EndKey: hexKey(r.GetEndKey()),
		Epoch:  epochJSON{ConfVer: r.GetRegionEpoch().GetConfVer(), Version: r.GetRegionEpoch().GetVersion()},
		Leader: toPeerJSON(e.Leader), Peers: []peerJSON{}, DownPeers: []peerJSON{}, PendingPeers: []peerJSON{},
		ApproximateKeys: int64(e.Keys),
	}
	for _, p := range r.GetPeers() {
		out.Peers = append(out.Peers, toPeerJSON(p))
	}
	for _, p := range e.Pending {
		out.PendingPeers = append(out.PendingPeers, toPeerJSON(p))
	}
	return out
}

// storeInfos renders every store (tombstones included, as PD's /stores
// with no state filter hides only tombstones: excludeTombstone).
func (s *Server) storeInfos(excludeTombstone bool) []storeInfoJSON {
	stores := s.allStores(excludeTombstone)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	maxDown := s.maxStoreDownTimeLocked(now)
	leaders, peers := map[uint64]int{}, map[uint64]int{}
	for _, e := range s.regions.sorted {
		if e.Leader != nil {
			leaders[e.Leader.GetStoreId()]++
		}
		for _, p := range e.Region.GetPeers() {
			peers[p.GetStoreId()]++
		}
	}
	out := make([]storeInfoJSON, 0, len(stores))
	for _, st := range stores {
		out = append(out, storeInfoJSON{
			Store: storeMetaJSON{
				ID: st.GetId(), Address: st.GetAddress(), State: int32(st.GetState()), StateName: storeStateName(st, now, maxDown),
				Version: st.GetVersion(), Labels: st.GetLabels(), StatusAddress: st.GetStatusAddress(), GitHash: st.GetGitHash(),
				StartTimestamp: st.GetStartTimestamp(), LastHeartbeat: st.GetLastHeartbeat(),
			},
			Status: storeStatusJSON{
				LeaderCount: leaders[st.GetId()], RegionCount: peers[st.GetId()],
				StartTS: time.Unix(st.GetStartTimestamp(), 0), LastHeartbeatTS: time.Unix(0, st.GetLastHeartbeat()),
			},
		})
	}
	return out
}

func (s *Server) handleStores(w http.ResponseWriter, _ *http.Request) {
	infos := s.storeInfos(true)
	writeJSON(w, struct {
		Count  int             `json:"count"`
		Stores []storeInfoJSON `json:"stores"`
	}{Count: len(infos), Stores: infos})
}

func (s *Server) handleStore(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad store id", http.StatusBadRequest)
		return
	}
	for _, st := range s.storeInfos(false) {
		if st.Store.ID == id {
			writeJSON(w, st)
			return
		}
	}
	http.Error(w, "store not found", http.StatusNotFound)
}

func (s *Server) handleRegions(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := struct {
		Count   int              `json:"count"`
		Regions []regionInfoJSON `json:"regions"`
	}{Count: len(s.regions.sorted), Regions: make([]regionInfoJSON, 0, len(s.regions.sorted))}
	for _, e := range s.regions.sorted {
		out.Regions = append(out.Regions, toRegionJSON(e))
	}
	s.mu.Unlock()
	writeJSON(w, out)
}

func (s *Server) handleRegionsCount(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.regions.sorted)
	s.mu.Unlock()
	writeJSON(w, map[string]int{"count": n})
}

func (s *Server) handleRegionByID(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad region id", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	e := s.regions.byID[id]
	var out *regionInfoJSON
	if e != nil {
		j := toRegionJSON(e)
		out = &j
	}
	s.mu.Unlock()
	if out == nil {
		writeJSON(w, nil) // PD answers null for an unknown region
		return
	}
	writeJSON(w, out)
}
