package tikvdouble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverService serves recover_data.RecoverData; it exists only in
// recovery mode (PD's snapshot-recovering mark set when the store started).
type recoverService struct {
	recoverdatapb.UnimplementedRecoverDataServer
	s *Store
}

// ReadRegionMeta streams one meta per local region, as TiKV reports them:
// peer_id is the largest peer id of the region, last_log_term is the hard
// state term, commit_index is left 0. A destroyed peer (merged away or
// removed) is a tombstone and is skipped, so tombstone is never set; a merge
// source caught between PrepareMerge and CommitMerge is reported with its
// bumped epoch version and its own range, which is what lets BR's overlap
// resolution prefer a target that already absorbed it. Once leaders exist
// again the store completes (or rolls back) that merge itself.
func (r *recoverService) ReadRegionMeta(_ *recoverdatapb.ReadRegionMetaRequest, stream recoverdatapb.RecoverData_ReadRegionMetaServer) error {
	s := r.s
	s.mu.Lock()
	s.recoverGen++
	s.keepLeading = nil
	var metas []*recoverdatapb.RegionMeta
	for _, p := range s.peers {
		if p.uninit {
			continue // never persisted: TiKV has no region state for it
		}
		var maxPeer uint64
		for _, x := range p.region.GetPeers() {
			maxPeer = max(maxPeer, x.GetId())
		}
		metas = append(metas, &recoverdatapb.RegionMeta{
			RegionId: p.region.GetId(), PeerId: maxPeer, LastLogTerm: p.term, LastIndex: p.lastIndex(),
			Version: p.region.GetRegionEpoch().GetVersion(), StartKey: p.region.GetStartKey(), EndKey: p.region.GetEndKey(),
		})
	}
	s.mu.Unlock()
	for _, m := range metas {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// RecoverRegion campaigns for every as_leader region's local peer and returns
// once each of them leads and applied its whole log; a newer RecoverRegion or
// ReadRegionMeta aborts it. As TiKV's LeaderKeeper, the campaign is an
// ordinary raft election (no pre-vote), repeated every election timeout
// until it wins: a peer is elected only if its log is at least as up to date
// as a quorum's, so a plan that picks a stale peer leaves its region without a
// leader and the call waits, rather than overwriting committed entries.
func (r *recoverService) RecoverRegion(stream recoverdatapb.RecoverData_RecoverRegionServer) error {
	s := r.s
	var leaders []uint64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// TiKV unwraps every request it reads: a stream that ends with an error
			// (the client cancelled or died mid-send) panics the process.
			s.crash(fmt.Errorf("%w: %w", ErrRecoverRegionRecv, err))
			return status.Error(codes.Unavailable, "store crashed")
		}
		s.mu.Lock()
		s.recoverReceived++
		s.mu.Unlock()
		if req.GetAsLeader() {
			leaders = append(leaders, req.GetRegionId())
		}
	}
	s.mu.Lock()
	if err := s.recoverFault; err != nil {
		s.mu.Unlock()
		return err
	}
	s.recoverGen++
	gen := s.recoverGen
	s.keepLeading = map[uint64]bool{}
	for _, id := range leaders {
		s.keepLeading[id] = true
		if p := s.peers[id]; p != nil && !p.uninit && p.role == follower {
			p.timeout = s.electionTimeout()
			p.campaign(s.rd)
		}
	}
	s.mu.Unlock()
	s.wake()
	if err := s.waitApplied(stream.Context(), leaders, gen); err != nil {
		return err
	}
	return stream.SendAndClose(&recoverdatapb.RecoverRegionResponse{StoreId: s.cfg.StoreID})
}

// RecoverRegionsReceived counts the RecoverRegion requests this process has read.
func (s *Store) RecoverRegionsReceived() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recoverReceived
}

// FailRecoverRegion is a fault injection: from now on every RecoverRegion reads its whole
// plan and then, at the client's close, ends with err instead of making any leader (a TiKV
// whose recovery failed); nil lifts it.
func (s *Store) FailRecoverRegion(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recoverFault = err
}

// waitApplied waits until every listed region has a local leader that
// applied its last index; ids nil means every local leader.
func (s *Store) waitApplied(ctx context.Context, ids []uint64, gen uint64) error {
	for {
		s.mu.Lock()
		if gen != 0 && s.recoverGen != gen {
			s.mu.Unlock()
			return status.Error(codes.Aborted, "recover region task aborted by a newer one")
		}
		done := true
		if ids == nil {
			// Every peer that follows a leader must have applied its
			// whole log; peers that never heard of a leader are skipped.
			for _, p := range s.peers {
				done = done && (p.leaderID == 0 || p.applied >= p.lastIndex())
			}
			s.applyTick = true
		}
		for _, id := range ids {
			// A merge source that its target absorbed meanwhile (the
			// store completes merges it finds prepared) is done.
			p := s.peers[id]
			done = done && (s.destroyed[id] || p != nil && p.role == leader && p.applied >= p.lastIndex())
		}
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return status.Error(codes.Unavailable, "store stopped")
		case <-time.After(s.cfg.Tick):
		}
	}
}

// WaitApply is the legacy store-wide wait: every peer with a leader
// applied its whole log, so a following ResolveKvData sees everything.
func (r *recoverService) WaitApply(ctx context.Context, _ *recoverdatapb.WaitApplyRequest) (*recoverdatapb.WaitApplyResponse, error) {
	if err := r.s.waitApplied(ctx, nil, 0); err != nil {
		return nil, err
	}
	return &recoverdatapb.WaitApplyResponse{}, nil
}

// ResolveKvData is the v6.3 data phase: delete every lock and every write
// newer than resolved_ts locally, bypassing raft.
func (r *recoverService) ResolveKvData(req *recoverdatapb.ResolveKvDataRequest, stream recoverdatapb.RecoverData_ResolveKvDataServer) error {
	s := r.s
	s.mu.Lock()
	n := s.kv.resolveKV(req.GetResolvedTs())
	s.rd.recs = append(s.rd.recs, record{Kind: "resolve", TS: req.GetResolvedTs()})
	s.mu.Unlock()
	s.wake()
	if err := s.sync(stream.Context()); err != nil {
		return err
	}
	return stream.Send(&recoverdatapb.ResolveKvDataResponse{StoreId: s.cfg.StoreID, ResolvedKeyCount: uint64(n)})
}
