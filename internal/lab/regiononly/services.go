package regiononly

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	tikvpb "github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/tidb/codec"
)

type backupService struct {
	brpb.UnimplementedBackupServer
	s *store
}

type recoverService struct {
	recoverdatapb.UnimplementedRecoverDataServer
	s *store
}

type kvService struct {
	tikvpb.UnimplementedTikvServer
	s *store
}

func (s *store) register() {
	brpb.RegisterBackupServer(s.grpc, &backupService{s: s})
	recoverdatapb.RegisterRecoverDataServer(s.grpc, &recoverService{s: s})
	tikvpb.RegisterTikvServer(s.grpc, &kvService{s: s})
}

// regionError is what TiKV answers a request for r through ctx on this store, or nil.
func (s *store) regionError(r *region, id uint64, epoch *metapb.RegionEpoch) *errorpb.Error {
	if r == nil || s.peerOf(r) == nil {
		return &errorpb.Error{Message: "region not found", RegionNotFound: &errorpb.RegionNotFound{RegionId: id}}
	}
	if l := r.meta.GetPeers()[r.leader]; l.GetStoreId() != s.id {
		return &errorpb.Error{Message: "not leader", NotLeader: &errorpb.NotLeader{RegionId: id, Leader: l}}
	}
	if epoch.GetVersion() != r.meta.GetRegionEpoch().GetVersion() || epoch.GetConfVer() != r.meta.GetRegionEpoch().GetConfVer() {
		return &errorpb.Error{Message: "epoch not match", EpochNotMatch: &errorpb.EpochNotMatch{CurrentRegions: []*metapb.Region{r.meta}}}
	}
	return nil
}

// leaseActive says the PrepareSnapshotBackup lease holds.
func (s *store) leaseActive() bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return time.Now().UnixNano() < s.leaseUntil
}

// PrepareSnapshotBackup holds the lease and answers wait-applies. As in TiKV, every request
// takes effect when it arrives (a lease renewal is never held up behind wait-apply answers the
// client has not read yet) and the answers queue for the stream, without bound.
func (b *backupService) PrepareSnapshotBackup(stream brpb.Backup_PrepareSnapshotBackupServer) error {
	var (
		mu      sync.Mutex
		outbox  []*brpb.PrepareSnapshotBackupResponse
		last    bool  // the outbox ends the stream (Finish answered)
		recvErr error // the stream's end as read
		ready   = make(chan struct{}, 1)
	)
	post := func(resps []*brpb.PrepareSnapshotBackupResponse, end bool, err error) {
		mu.Lock()
		outbox = append(outbox, resps...)
		last = last || end
		if err != nil && recvErr == nil {
			recvErr = err
		}
		mu.Unlock()
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				post(nil, false, err)
				return
			}
			resps, end, err := b.handle(r)
			post(resps, end, err)
			if end || err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-ready:
		}
		mu.Lock()
		resps, end, err := outbox, last, recvErr
		outbox = nil
		mu.Unlock()
		for _, r := range resps {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		switch {
		case end:
			return nil
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// handle applies one request and returns its answers; end says the stream ends after them
// (Finish), an error ends it at once.
func (b *backupService) handle(r *brpb.PrepareSnapshotBackupRequest) ([]*brpb.PrepareSnapshotBackupResponse, bool, error) {
	s := b.s
	switch r.GetTy() {
	case brpb.PrepareSnapshotBackupRequestType_UpdateLease:
		s.leaseMu.Lock()
		valid := time.Now().UnixNano() < s.leaseUntil
		s.leaseUntil = time.Now().Add(time.Duration(r.GetLeaseInSeconds()) * time.Second).UnixNano()
		s.leaseMu.Unlock()
		return []*brpb.PrepareSnapshotBackupResponse{{Ty: brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult, LastLeaseIsValid: valid}}, false, nil
	case brpb.PrepareSnapshotBackupRequestType_WaitApply:
		if !s.leaseActive() {
			return nil, false, status.Error(codes.FailedPrecondition, "the lease has expired, you may not send `wait_apply` because it is no meaning")
		}
		out := make([]*brpb.PrepareSnapshotBackupResponse, 0, len(r.GetRegions()))
		for _, region := range r.GetRegions() {
			s.c.mu.Lock()
			rg := s.c.byID(region.GetId())
			e := s.regionError(rg, region.GetId(), region.GetRegionEpoch())
			s.c.mu.Unlock()
			if e == nil {
				rg.waitApplied.Add(1)
			}
			out = append(out, &brpb.PrepareSnapshotBackupResponse{Ty: brpb.PrepareSnapshotBackupEventType_WaitApplyDone, Region: region, Error: e})
		}
		return out, false, nil
	case brpb.PrepareSnapshotBackupRequestType_Finish:
		s.leaseMu.Lock()
		valid := time.Now().UnixNano() < s.leaseUntil
		s.leaseUntil = 0
		s.leaseMu.Unlock()
		return []*brpb.PrepareSnapshotBackupResponse{{Ty: brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult, LastLeaseIsValid: valid}}, true, nil
	}
	return nil, false, nil
}

// CheckPendingAdminOp reports every region the store leads, none with an admin operation
// pending (region-only stores run none).
func (b *backupService) CheckPendingAdminOp(_ *brpb.CheckAdminRequest, stream brpb.Backup_CheckPendingAdminOpServer) error {
	s := b.s
	for _, i := range s.regions {
		r := s.c.regions[i]
		s.c.mu.Lock()
		leads := r.meta.GetPeers()[r.leader].GetStoreId() == s.id
		s.c.mu.Unlock()
		if !leads {
			continue
		}
		if err := stream.Send(&brpb.CheckAdminResponse{Region: r.meta}); err != nil {
			return err
		}
	}
	return nil
}

// The log of every peer: the leader's is the longest, so the planner chooses it.
const (
	lastLogTerm = 6
	commitIndex = 1000
)

// ReadRegionMeta streams one meta per peer the store holds.
func (r *recoverService) ReadRegionMeta(req *recoverdatapb.ReadRegionMetaRequest, stream recoverdatapb.RecoverData_ReadRegionMetaServer) error {
	s := r.s
	if req.GetStoreId() != s.id {
		return status.Errorf(codes.InvalidArgument, "%v: asked for store %d, this is store %d", errWrongStore, req.GetStoreId(), s.id)
	}
	for _, i := range s.regions {
		rg := s.c.regions[i]
		s.c.mu.Lock()
		leader := rg.meta.GetPeers()[rg.leader].GetStoreId() == s.id
		s.c.mu.Unlock()
		last := uint64(commitIndex)
		if leader {
			last += 2
		}
		p := s.peerOf(rg)
		m := &recoverdatapb.RegionMeta{RegionId: rg.meta.GetId(), PeerId: p.GetId(), LastLogTerm: lastLogTerm, LastIndex: last,
			CommitIndex: commitIndex, Version: rg.meta.GetRegionEpoch().GetVersion(), StartKey: rg.meta.GetStartKey(), EndKey: rg.meta.GetEndKey()}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// RecoverRegion makes every planned peer on this store lead at once and tells PD.
func (r *recoverService) RecoverRegion(stream recoverdatapb.RecoverData_RecoverRegionServer) error {
	s := r.s
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&recoverdatapb.RecoverRegionResponse{StoreId: s.id})
		}
		if err != nil {
			return err
		}
		if !req.GetAsLeader() {
			continue
		}
		rg := s.c.byID(req.GetRegionId())
		var p *metapb.Peer
		if rg != nil {
			p = s.peerOf(rg)
		}
		if p == nil {
			return stream.SendAndClose(&recoverdatapb.RecoverRegionResponse{StoreId: s.id,
				Error: &recoverdatapb.Error{Msg: "region not found on this store"}})
		}
		s.c.mu.Lock()
		for i, q := range rg.meta.GetPeers() {
			if q == p {
				rg.leader = i
			}
		}
		s.c.mu.Unlock()
		if err := s.c.PD.SetLeader(rg.meta.GetId(), p); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
}

// check finds the led region of a flashback request and checks its first key, encoded as
// TiKV encodes a raw key, against the region.
func (k *kvService) check(c *kvrpcpb.Context, rawStart []byte) (*region, *errorpb.Error) {
	s := k.s
	r := s.c.byID(c.GetRegionId())
	if e := s.regionError(r, c.GetRegionId(), c.GetRegionEpoch()); e != nil {
		return nil, e
	}
	key := codec.EncodeBytes(rawStart)
	m := r.meta
	if bytes.Compare(key, m.GetStartKey()) < 0 || len(m.GetEndKey()) > 0 && bytes.Compare(key, m.GetEndKey()) >= 0 {
		return nil, &errorpb.Error{Message: "key not in region", KeyNotInRegion: &errorpb.KeyNotInRegion{
			Key: key, RegionId: m.GetId(), StartKey: m.GetStartKey(), EndKey: m.GetEndKey()}}
	}
	return r, nil
}

func (k *kvService) KvPrepareFlashbackToVersion(_ context.Context, req *kvrpcpb.PrepareFlashbackToVersionRequest) (*kvrpcpb.PrepareFlashbackToVersionResponse, error) {
	k.s.c.mu.Lock()
	defer k.s.c.mu.Unlock()
	r, e := k.check(req.GetContext(), req.GetStartKey())
	if e != nil {
		return &kvrpcpb.PrepareFlashbackToVersionResponse{RegionError: e}, nil
	}
	r.inFlashback = true
	return &kvrpcpb.PrepareFlashbackToVersionResponse{}, nil
}

func (k *kvService) KvFlashbackToVersion(_ context.Context, req *kvrpcpb.FlashbackToVersionRequest) (*kvrpcpb.FlashbackToVersionResponse, error) {
	k.s.c.mu.Lock()
	defer k.s.c.mu.Unlock()
	r, e := k.check(req.GetContext(), req.GetStartKey())
	if e != nil {
		return &kvrpcpb.FlashbackToVersionResponse{RegionError: e}, nil
	}
	if !r.inFlashback {
		return &kvrpcpb.FlashbackToVersionResponse{RegionError: &errorpb.Error{
			Message: "region is not prepared for the flashback", FlashbackNotPrepared: &errorpb.FlashbackNotPrepared{RegionId: r.meta.GetId()}}}, nil
	}
	r.inFlashback, r.flashedBack = false, true
	return &kvrpcpb.FlashbackToVersionResponse{}, nil
}
