package tikvdouble

import (
	"context"
	"fmt"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"

	"github.com/fedbr/fedbr/internal/tidb"
)

// pdLoop heartbeats stores and leader regions to PD, executes the operators
// PD's schedulers return, and reports the store's resolved ts.
func (s *Store) pdLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	t := time.NewTicker(s.cfg.Tick * 4)
	defer t.Stop()
	var hb pdpb.PD_RegionHeartbeatClient
	for n := 0; ; n++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if hb == nil {
			var err error
			if hb, err = s.pd.RegionHeartbeat(ctx); err == nil {
				go s.recvOperators(hb)
			}
		}
		if hb != nil && s.regionHeartbeats(hb) != nil {
			hb = nil
		}
		if n%5 == 0 {
			_, _ = s.pd.StoreHeartbeat(ctx, &pdpb.StoreHeartbeatRequest{Header: s.header(), Stats: &pdpb.StoreStats{
				StoreId: s.cfg.StoreID, StartTime: uint32(s.startTS), RegionCount: uint32(s.regionCount()),
			}})
		}
		if !s.recovery {
			if err := s.reportResolvedTS(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("Reporting resolved ts failed", "err", err)
			}
		}
	}
}

func (s *Store) regionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

func (s *Store) regionHeartbeats(hb pdpb.PD_RegionHeartbeatClient) error {
	s.mu.Lock()
	if s.isolatedLocked() {
		s.mu.Unlock()
		return nil
	}
	var reqs []*pdpb.RegionHeartbeatRequest
	for _, p := range s.peers {
		if p.role != leader {
			continue
		}
		var pending []*metapb.Peer
		for _, x := range p.region.GetPeers() {
			if x.GetId() != p.selfID && p.match[x.GetId()] == 0 {
				pending = append(pending, proto.Clone(x).(*metapb.Peer))
			}
		}
		reqs = append(reqs, &pdpb.RegionHeartbeatRequest{
			Header: s.header(), Region: proto.Clone(p.region).(*metapb.Region), Leader: p.self(), Term: p.term,
			ApproximateKeys: uint64(len(s.kv.rangeKeys(p.region.GetStartKey(), p.region.GetEndKey()))),
			PendingPeers:    pending,
		})
	}
	s.mu.Unlock()
	for _, r := range reqs {
		if err := hb.Send(r); err != nil {
			return fmt.Errorf("region heartbeat: %w", err)
		}
	}
	return nil
}

func (s *Store) recvOperators(hb pdpb.PD_RegionHeartbeatClient) {
	for {
		op, err := hb.Recv()
		if err != nil {
			return
		}
		s.handleOperator(op)
	}
}

// handleOperator executes a scheduler's operator unless the store is in
// recovery mode or a PrepareSnapshotBackup lease suspends admin commands
// (TransferLeader, Split, PrepareMerge and ChangePeer are exactly the ones
// TiKV's snapshot-backup observer rejects). A merging region takes no
// operator, and only one admin command is in flight per region.
func (s *Store) handleOperator(op *pdpb.RegionHeartbeatResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[op.GetRegionId()]
	if p == nil || p.role != leader || s.recovery || stale(op.GetRegionEpoch(), p.region.GetRegionEpoch()) || p.merging != nil {
		return
	}
	admin := op.GetTransferLeader() != nil || op.GetSplitRegion() != nil || op.GetMerge() != nil || op.GetChangePeer() != nil
	if admin && s.leaseActiveLocked() {
		s.rejectedAdmin++
		return
	}
	switch {
	case op.GetChangePeer() != nil:
		s.changePeerLocked(p, op.GetChangePeer())
	case op.GetMerge() != nil:
		s.prepareMergeLocked(p, op.GetMerge().GetTarget())
	case op.GetTransferLeader() != nil:
		to := op.GetTransferLeader().GetPeer().GetId()
		if p.peerByID(to) == nil || p.match[to] != p.lastIndex() {
			return
		}
		s.rd.send(p, to, &eraftpb.Message{MsgType: eraftpb.MessageType_MsgTimeoutNow, Term: p.term})
		p.becomeFollower(s.rd, p.term, 0)
		s.wake()
	case op.GetSplitRegion() != nil:
		key := s.kv.middleKey(p.region.GetStartKey(), p.region.GetEndKey())
		if key == nil {
			return
		}
		go s.split(p.region.GetId(), key, p.region.GetRegionEpoch().GetVersion())
	}
}

// changePeerLocked proposes PD's peer addition or removal on leader p.
// It never removes the leader itself nor goes below three replicas; PD
// only asks for the removal once the added peer is no longer pending.
func (s *Store) changePeerLocked(p *peer, cp *pdpb.ChangePeer) {
	if adminPendingLocked(p) || p.applied < p.termStart {
		return
	}
	target := cp.GetPeer()
	c := &changePeerCmd{Peer: proto.Clone(target).(*metapb.Peer), ConfVer: p.region.GetRegionEpoch().GetConfVer()}
	switch cp.GetChangeType() {
	case eraftpb.ConfChangeType_AddNode:
		for _, x := range p.region.GetPeers() {
			if x.GetStoreId() == target.GetStoreId() {
				return
			}
		}
		c.Add = true
	case eraftpb.ConfChangeType_RemoveNode:
		if target.GetId() == p.selfID || p.peerByID(target.GetId()) == nil || len(p.region.GetPeers()) <= 3 {
			return
		}
	default:
		return
	}
	_, _ = s.proposeLocked(p, command{ChangePeer: c})
}

// prepareMergeLocked proposes PrepareMerge on source leader p when the
// target PD named is this store's neighbour peer at the same epoch and every
// source follower holds the whole log.
func (s *Store) prepareMergeLocked(p *peer, target *metapb.Region) {
	t := s.peers[target.GetId()]
	if t == nil || t.uninit || t.merging != nil || stale(t.region.GetRegionEpoch(), target.GetRegionEpoch()) ||
		t.region.GetRegionEpoch().GetVersion() != target.GetRegionEpoch().GetVersion() || !adjacent(p.region, t.region) ||
		!tidb.SameStores(p.region, t.region) || adminPendingLocked(t) ||
		adminPendingLocked(p) || p.applied < p.lastIndex() || !caughtUpLocked(p) {
		return
	}
	ep := p.region.GetRegionEpoch()
	_, _ = s.proposeLocked(p, command{PrepareMerge: &prepareMergeCmd{Version: ep.GetVersion(), ConfVer: ep.GetConfVer(),
		Target: proto.Clone(t.region).(*metapb.Region)}})
}

func stale(a, b *metapb.RegionEpoch) bool {
	return a.GetVersion() < b.GetVersion() || a.GetConfVer() < b.GetConfVer()
}

// split asks PD for ids and proposes the split on the leader.
func (s *Store) split(regionID uint64, key []byte, version uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	p := s.peers[regionID]
	if p == nil {
		s.mu.Unlock()
		return
	}
	region := proto.Clone(p.region).(*metapb.Region)
	s.mu.Unlock()
	resp, err := s.pd.AskBatchSplit(ctx, &pdpb.AskBatchSplitRequest{Header: s.header(), Region: region, SplitCount: 1})
	if err != nil || len(resp.GetIds()) != 1 || len(resp.GetIds()[0].GetNewPeerIds()) != len(region.GetPeers()) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p = s.peers[regionID]
	if p == nil || p.role != leader || p.region.GetRegionEpoch().GetVersion() != version {
		return
	}
	if s.leaseActiveLocked() {
		s.rejectedAdmin++
		return
	}
	id := resp.GetIds()[0]
	_, _ = s.proposeLocked(p, command{Split: &splitCmd{Key: key, Version: version, NewRegion: id.GetNewRegionId(), NewPeerIDs: id.GetNewPeerIds()}})
}

// getTS fetches one timestamp from PD's TSO stream.
func (s *Store) getTS(ctx context.Context) (uint64, error) {
	st, err := s.pd.Tso(ctx)
	if err != nil {
		return 0, fmt.Errorf("tso: %w", err)
	}
	defer func() { _ = st.CloseSend() }()
	if err := st.Send(&pdpb.TsoRequest{Header: s.header(), Count: 1}); err != nil {
		return 0, fmt.Errorf("tso: %w", err)
	}
	r, err := st.Recv()
	if err != nil {
		return 0, fmt.Errorf("tso: %w", err)
	}
	return uint64(r.GetTimestamp().GetPhysical())<<18 | uint64(r.GetTimestamp().GetLogical()), nil
}

// reportResolvedTS sends PD the minimum resolved ts over this store's
// leaders: below every lock, and never for a leader that has not applied
// its own term's first entry (it may not see every lock yet).
func (s *Store) reportResolvedTS(ctx context.Context) error {
	ts, err := s.getTS(ctx)
	if err != nil {
		return err
	}
	resolved, ok := s.resolvedTS(ts)
	if !ok {
		return nil
	}
	_, err = s.pd.ReportMinResolvedTS(ctx, &pdpb.ReportMinResolvedTsRequest{Header: s.header(), StoreId: s.cfg.StoreID, MinResolvedTs: resolved})
	return err
}

func (s *Store) resolvedTS(ts uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resolved := ts
	for _, p := range s.peers {
		if p.role != leader {
			continue
		}
		if p.applied < p.termStart {
			return 0, false
		}
		l := s.kv.minLockTS(p.region.GetStartKey(), p.region.GetEndKey())
		if fs := p.region.GetFlashbackStartTs(); p.region.GetIsInFlashback() && (l == 0 || fs < l) {
			l = fs
		}
		if l != 0 && l-1 < resolved {
			resolved = l - 1
		}
	}
	return resolved, true
}

// gcSafePointFromPD reads PD's GC safe point as TiKV's GC manager does
// (pdpb GetGCSafePoint).
func (s *Store) gcSafePointFromPD(ctx context.Context) (uint64, error) {
	resp, err := s.pd.GetGCSafePoint(ctx, &pdpb.GetGCSafePointRequest{Header: s.header()})
	if err != nil {
		return 0, fmt.Errorf("get gc safe point: %w", err)
	}
	if e := resp.GetHeader().GetError(); e != nil {
		return 0, fmt.Errorf("get gc safe point: %s", e.GetMessage())
	}
	return resp.GetSafePoint(), nil
}
