package pddouble

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fedbr/fedbr/internal/tidb"
)

const apiPrefix = "/pd/api/v1"

// httpHandler serves the subset of PD's HTTP API that BR relies on.
func (s *Server) httpHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET "+apiPrefix+"/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"version": "v" + s.cfg.Version})
	})
	m.HandleFunc("GET "+apiPrefix+"/config/cluster-version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.cfg.Version)
	})
	m.HandleFunc("GET "+apiPrefix+"/schedulers", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("status") == "paused" {
			writeJSON(w, nonNil(s.pausedSchedulers()))
			return
		}
		writeJSON(w, s.schedulerNames())
	})
	m.HandleFunc("POST "+apiPrefix+"/schedulers/{name}", s.handlePauseScheduler)
	m.HandleFunc("GET "+apiPrefix+"/config/schedule", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.scheduleConfig())
	})
	m.HandleFunc("GET "+apiPrefix+"/config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"schedule": s.scheduleConfig()})
	})
	m.HandleFunc("POST "+apiPrefix+"/config", s.handleSetConfig)
	// Not PD's: the double's ground truth, the config its schedulers obey.
	m.HandleFunc("GET "+tidb.LabScheduleConfigPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.EffectiveScheduleConfig())
	})
	m.HandleFunc("GET "+apiPrefix+"/min-resolved-ts", s.handleMinResolvedTS)
	m.HandleFunc("GET "+apiPrefix+"/gc/safepoint", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.gcSafePoints())
	})
	m.HandleFunc("GET "+apiPrefix+"/admin/cluster/markers/snapshot-recovering", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]bool{"marked": s.recovering()})
	})
	m.HandleFunc("POST "+apiPrefix+"/admin/cluster/markers/snapshot-recovering", func(w http.ResponseWriter, r *http.Request) {
		writeResult(w, s.setRecovering(true))
	})
	m.HandleFunc("DELETE "+apiPrefix+"/admin/cluster/markers/snapshot-recovering", func(w http.ResponseWriter, r *http.Request) {
		writeResult(w, s.setRecovering(false))
	})
	m.HandleFunc("POST "+apiPrefix+"/admin/base-alloc-id", s.handleBaseAllocID)
	m.HandleFunc("POST "+apiPrefix+"/admin/reset-ts", s.handleResetTS)
	m.HandleFunc("GET "+apiPrefix+"/stores", s.handleStores)
	m.HandleFunc("GET "+apiPrefix+"/store/{id}", s.handleStore)
	m.HandleFunc("GET "+apiPrefix+"/regions", s.handleRegions)
	m.HandleFunc("GET "+apiPrefix+"/regions/count", s.handleRegionsCount)
	m.HandleFunc("GET "+apiPrefix+"/region/id/{id}", s.handleRegionByID)
	m.HandleFunc("POST "+apiPrefix+"/operators", s.handleAddOperator)
	m.HandleFunc("GET "+apiPrefix+"/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, []map[string]any{{"name": s.cfg.Name, "client_urls": []string{s.url}, "health": true}})
	})
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeResult(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, "success")
}

func (s *Server) handlePauseScheduler(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, fmt.Sprintf("decode body: %v", err), http.StatusBadRequest)
		return
	}
	d, ok := in["delay"].(float64)
	if !ok {
		http.Error(w, "missing delay", http.StatusBadRequest)
		return
	}
	err := s.pauseScheduler(r.PathValue("name"), int64(d))
	if errors.Is(err, errUnknownScheduler) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeResult(w, err)
}

// handleSetConfig is PD's POST /config (server/api/config.go
// confHandler.SetConfig, release-7.5 and release-8.5). With ttlSecond (an
// integer: strconv.Atoi) the items go to Server.SaveTTLConfig, which takes
// only the keys of IsSupportedTTLConfig; every refusal is 400 with the
// error as a JSON string.
func (s *Server) handleSetConfig(w http.ResponseWriter, r *http.Request) {
	var kv map[string]any
	if err := json.NewDecoder(r.Body).Decode(&kv); err != nil {
		writeJSONStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	if v := r.URL.Query().Get("ttlSecond"); v != "" {
		ttl, err := strconv.Atoi(v)
		if err != nil {
			writeJSONStatus(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := s.setTTLConfig(kv, ttl); err != nil {
			writeJSONStatus(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, s.ttlConfigAnswer(ttl))
		return
	}
	err := s.setConfig(kv)
	if errors.Is(err, errUnknownConfig) || errors.Is(err, errTTLConfigExists) {
		writeJSONStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, "The config is updated.")
}

// ttlConfigAnswer is PD's answer to a TTL'd config write: v7.5 answers as
// for any config write, v8.5 tells an update from a deletion (ttlSecond 0).
func (s *Server) ttlConfigAnswer(ttl int) string {
	switch {
	case s.cfg.API == APIv75:
		return "The config is updated."
	case ttl == 0:
		return "The ttl config is deleted."
	}
	return "The ttl config is updated."
}

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleMinResolvedTS(w http.ResponseWriter, r *http.Request) {
	scope := r.URL.Query().Get("scope")
	var ids []uint64
	if scope != "" && scope != "cluster" {
		for _, f := range strings.Split(scope, ",") {
			id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				http.Error(w, fmt.Sprintf("bad scope: %v", err), http.StatusBadRequest)
				return
			}
			ids = append(ids, id)
		}
	}
	m := s.minResolvedTS(ids)
	// As PD (server/api/min_resolved_ts.go GetMinResolvedTS): is_real_time
	// is persist interval != 0, and omitted (omitempty) when false.
	interval := max(s.cfg.MinResolvedTSPersistenceInterval, 0)
	out := map[string]any{
		"min_resolved_ts":  m.Min,
		"persist_interval": interval.String(),
	}
	if interval != 0 {
		out["is_real_time"] = true
	}
	if scope != "" {
		out["stores_min_resolved_ts"] = m.Stores
	}
	writeJSON(w, out)
}

func (s *Server) handleBaseAllocID(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, fmt.Sprintf("decode body: %v", err), http.StatusBadRequest)
		return
	}
	id, err := strconv.ParseUint(in.ID, 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("bad id: %v", err), http.StatusBadRequest)
		return
	}
	err = s.setBaseAllocID(id)
	if errors.Is(err, errNotRecovering) {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	writeResult(w, err)
}

func (s *Server) handleResetTS(w http.ResponseWriter, r *http.Request) {
	var in struct {
		TSO            string `json:"tso"`
		ForceUseLarger bool   `json:"force-use-larger"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, fmt.Sprintf("decode body: %v", err), http.StatusBadRequest)
		return
	}
	ts, err := strconv.ParseUint(in.TSO, 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("bad tso: %v", err), http.StatusBadRequest)
		return
	}
	err = s.resetTS(ts, in.ForceUseLarger)
	if errors.Is(err, errTSOSmaller) {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	writeResult(w, err)
}
