package pddouble

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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

func (s *Server) handleSetConfig(w http.ResponseWriter, r *http.Request) {
	var kv map[string]any
	if err := json.NewDecoder(r.Body).Decode(&kv); err != nil {
		http.Error(w, fmt.Sprintf("decode body: %v", err), http.StatusBadRequest)
		return
	}
	var ttl *float64
	if v := r.URL.Query().Get("ttlSecond"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("bad ttlSecond: %v", err), http.StatusBadRequest)
			return
		}
		ttl = &f
	}
	err := s.setConfig(kv, ttl)
	if errors.Is(err, errUnknownConfig) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, "The config is updated.")
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
	out := map[string]any{
		"min_resolved_ts":  m.Min,
		"is_real_time":     true,
		"persist_interval": "1s",
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
