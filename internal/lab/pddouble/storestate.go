package pddouble

import (
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
)

// Store state names as PD's HTTP API reports them.
const (
	stateUp           = "Up"
	stateDisconnected = "Disconnected"
	stateDown         = "Down"
	stateOffline      = "Offline"
	stateTombstone    = "Tombstone"
)

// disconnectAfter is PD's storeDisconnectDuration: a store silent for
// longer is Disconnected (still Up in metapb, but schedulers avoid it).
const disconnectAfter = 20 * time.Second

// storeStateName derives a store's state from its metapb state and the
// time since its last heartbeat, as PD's StoreInfo does: Offline and
// Tombstone are administrative; an Up store is Disconnected after
// disconnectAfter and Down after maxDown without a heartbeat.
func storeStateName(st *metapb.Store, now time.Time, maxDown time.Duration) string {
	switch st.GetState() {
	case metapb.StoreState_Tombstone:
		return stateTombstone
	case metapb.StoreState_Offline:
		return stateOffline
	}
	silent := now.Sub(time.Unix(0, st.GetLastHeartbeat()))
	switch {
	case st.GetLastHeartbeat() == 0:
		return stateUp
	case silent > maxDown:
		return stateDown
	case silent > disconnectAfter:
		return stateDisconnected
	}
	return stateUp
}

// maxStoreDownTime reads max-store-down-time from the schedule config.
func (s *Server) maxStoreDownTimeLocked(now time.Time) time.Duration {
	if v, ok := s.configValueLocked("max-store-down-time", now).(string); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 30 * time.Minute
}
