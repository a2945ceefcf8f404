package pddouble

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
)

// adminOp is an operator added through PD's operator API (POST /pd/api/v1/operators, what
// `pd-ctl operator add` sends; PD's scatter makes the same kind): an admin operator. PD hands
// its next step to the region's leader with every heartbeat until the region shows it done.
// Unlike the schedulers' operators, nothing BR's scheduler pause sets holds it back — no paused
// scheduler, no schedule limit, no OperatorRate — only recovery mode does. A TiKV under a
// PrepareSnapshotBackup lease refuses its steps, so it stays pending while the lease holds.
type adminOp struct {
	// Name is add-peer, remove-peer or transfer-leader.
	Name   string
	Region uint64
	// Store is the store to add a peer on, remove the peer from, or move the leader to.
	Store uint64
	// peer is the id of the peer add-peer creates, allocated when the operator is added.
	peer uint64
}

// opRequest is the body of POST /operators for the operators the double serves.
type opRequest struct {
	Name      string `json:"name"`
	RegionID  uint64 `json:"region_id"`
	StoreID   uint64 `json:"store_id"`
	ToStoreID uint64 `json:"to_store_id"`
}

var errBadOperator = errors.New("bad operator")

func (s *Server) handleAddOperator(w http.ResponseWriter, r *http.Request) {
	var in opRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, fmt.Sprintf("decode body: %v", err), http.StatusBadRequest)
		return
	}
	op := adminOp{Name: in.Name, Region: in.RegionID, Store: in.StoreID}
	if in.Name == "transfer-leader" {
		op.Store = in.ToStoreID
	}
	err := s.addOperator(op)
	if errors.Is(err, errBadOperator) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, "The operator is created.")
}

// addOperator checks op against PD's view of its region and queues it; a region has at most
// one operator at a time, as in PD.
func (s *Server) addOperator(op adminOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.regions.byID[op.Region]
	if e == nil {
		return fmt.Errorf("%w: region %d not found", errBadOperator, op.Region)
	}
	if _, ok := s.adminOps[op.Region]; ok {
		return fmt.Errorf("%w: region %d already has an operator", errBadOperator, op.Region)
	}
	if _, ok := s.st.Stores[op.Store]; !ok {
		return fmt.Errorf("%w: store %d not found", errBadOperator, op.Store)
	}
	has := slices.ContainsFunc(e.Region.GetPeers(), func(p *metapb.Peer) bool { return p.GetStoreId() == op.Store })
	switch op.Name {
	case "add-peer":
		if has {
			return fmt.Errorf("%w: region %d already has a peer on store %d", errBadOperator, op.Region, op.Store)
		}
		id, err := s.allocIDLocked()
		if err != nil {
			return err
		}
		op.peer = id
	case "remove-peer", "transfer-leader":
		if !has {
			return fmt.Errorf("%w: region %d has no peer on store %d", errBadOperator, op.Region, op.Store)
		}
	default:
		return fmt.Errorf("%w: unknown operator %q (the double serves add-peer, remove-peer and transfer-leader)", errBadOperator, op.Name)
	}
	s.adminOps[op.Region] = &op
	return nil
}

// adminStepLocked is the next step of e's admin operator, or nil when it has none; an operator
// the region shows done is dropped. A peer is removed from the leader's store as PD does: the
// leader moves first, to the lowest-id follower that is not pending.
func (s *Server) adminStepLocked(e *regionEntry) *pdpb.RegionHeartbeatResponse {
	op := s.adminOps[e.Region.GetId()]
	if op == nil || s.st.Recovering || e.Leader == nil {
		return nil
	}
	var peer *metapb.Peer
	for _, p := range e.Region.GetPeers() {
		if p.GetStoreId() == op.Store {
			peer = p
		}
	}
	pending := func(p *metapb.Peer) bool {
		return slices.ContainsFunc(e.Pending, func(x *metapb.Peer) bool { return x.GetId() == p.GetId() })
	}
	resp := &pdpb.RegionHeartbeatResponse{
		Header:      &pdpb.ResponseHeader{ClusterId: s.st.ClusterID},
		RegionId:    e.Region.GetId(),
		RegionEpoch: e.Region.GetRegionEpoch(),
		TargetPeer:  e.Leader,
	}
	switch {
	case op.Name == "add-peer" && peer != nil && !pending(peer),
		op.Name == "remove-peer" && peer == nil,
		op.Name == "transfer-leader" && e.Leader.GetStoreId() == op.Store:
		delete(s.adminOps, op.Region)
		return nil
	case op.Name == "add-peer":
		if peer != nil {
			return nil // added; its snapshot is on the way
		}
		resp.ChangePeer = &pdpb.ChangePeer{Peer: &metapb.Peer{Id: op.peer, StoreId: op.Store}, ChangeType: eraftpb.ConfChangeType_AddNode}
	case op.Name == "transfer-leader":
		resp.TransferLeader = &pdpb.TransferLeader{Peer: peer}
	case peer.GetId() != e.Leader.GetId():
		resp.ChangePeer = &pdpb.ChangePeer{Peer: peer, ChangeType: eraftpb.ConfChangeType_RemoveNode}
	default:
		var to *metapb.Peer
		for _, p := range e.Region.GetPeers() {
			if p.GetId() != peer.GetId() && !pending(p) && (to == nil || p.GetStoreId() < to.GetStoreId()) {
				to = p
			}
		}
		if to == nil {
			return nil
		}
		resp.TransferLeader = &pdpb.TransferLeader{Peer: to}
	}
	return resp
}
