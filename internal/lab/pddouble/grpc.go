package pddouble

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pdService adapts Server to the pdpb.PD gRPC service.
type pdService struct {
	pdpb.UnimplementedPDServer
	s *Server
}

func (p *pdService) header() *pdpb.ResponseHeader {
	return &pdpb.ResponseHeader{ClusterId: p.s.ClusterID()}
}

func (p *pdService) errHeader(t pdpb.ErrorType, err error) *pdpb.ResponseHeader {
	h := p.header()
	h.Error = &pdpb.Error{Type: t, Message: err.Error()}
	return h
}

// check rejects requests for another cluster (cluster id 0 = not yet known).
func (p *pdService) check(h *pdpb.RequestHeader) *pdpb.ResponseHeader {
	if id := h.GetClusterId(); id != 0 && id != p.s.ClusterID() {
		return p.errHeader(pdpb.ErrorType_UNKNOWN, errors.New("mismatch cluster id"))
	}
	if !p.s.isBootstrapped() {
		return p.errHeader(pdpb.ErrorType_NOT_BOOTSTRAPPED, errNotBootstrapped)
	}
	return nil
}

func internal(err error) error { return status.Error(codes.Internal, err.Error()) }

func (p *pdService) member() *pdpb.Member {
	return &pdpb.Member{
		Name:          p.s.cfg.Name,
		MemberId:      p.s.ClusterID() ^ 0x5a5a,
		ClientUrls:    []string{p.s.url},
		PeerUrls:      []string{p.s.url},
		BinaryVersion: p.s.cfg.Version,
	}
}

func (p *pdService) GetClusterInfo(context.Context, *pdpb.GetClusterInfoRequest) (*pdpb.GetClusterInfoResponse, error) {
	return &pdpb.GetClusterInfoResponse{Header: p.header(), ServiceModes: []pdpb.ServiceMode{pdpb.ServiceMode_PD_SVC_MODE}}, nil
}

func (p *pdService) GetMembers(context.Context, *pdpb.GetMembersRequest) (*pdpb.GetMembersResponse, error) {
	m := p.member()
	return &pdpb.GetMembersResponse{Header: p.header(), Members: []*pdpb.Member{m}, Leader: m, EtcdLeader: m}, nil
}

func (p *pdService) Tso(stream pdpb.PD_TsoServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if id := req.GetHeader().GetClusterId(); id != 0 && id != p.s.ClusterID() {
			return status.Error(codes.FailedPrecondition, "mismatch cluster id")
		}
		ts, err := p.s.allocTSO(req.GetCount())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		resp := &pdpb.TsoResponse{Header: p.header(), Count: req.GetCount(), Timestamp: ts}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (p *pdService) Bootstrap(_ context.Context, req *pdpb.BootstrapRequest) (*pdpb.BootstrapResponse, error) {
	err := p.s.bootstrap(req.GetStore(), req.GetRegion())
	if errors.Is(err, errAlreadyBootstrapped) {
		return &pdpb.BootstrapResponse{Header: p.errHeader(pdpb.ErrorType_ALREADY_BOOTSTRAPPED, err)}, nil
	}
	if err != nil {
		return nil, internal(err)
	}
	return &pdpb.BootstrapResponse{Header: p.header()}, nil
}

func (p *pdService) IsBootstrapped(context.Context, *pdpb.IsBootstrappedRequest) (*pdpb.IsBootstrappedResponse, error) {
	return &pdpb.IsBootstrappedResponse{Header: p.header(), Bootstrapped: p.s.isBootstrapped()}, nil
}

func (p *pdService) AllocID(context.Context, *pdpb.AllocIDRequest) (*pdpb.AllocIDResponse, error) {
	id, err := p.s.allocID()
	if err != nil {
		return nil, internal(err)
	}
	return &pdpb.AllocIDResponse{Header: p.header(), Id: id}, nil
}

func (p *pdService) IsSnapshotRecovering(context.Context, *pdpb.IsSnapshotRecoveringRequest) (*pdpb.IsSnapshotRecoveringResponse, error) {
	return &pdpb.IsSnapshotRecoveringResponse{Header: p.header(), Marked: p.s.recovering()}, nil
}

func (p *pdService) GetStore(_ context.Context, req *pdpb.GetStoreRequest) (*pdpb.GetStoreResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetStoreResponse{Header: h}, nil
	}
	st := p.s.store(req.GetStoreId())
	if st == nil {
		return &pdpb.GetStoreResponse{Header: p.errHeader(pdpb.ErrorType_UNKNOWN, errors.New("invalid store ID, not found"))}, nil
	}
	return &pdpb.GetStoreResponse{Header: p.header(), Store: st}, nil
}

func (p *pdService) PutStore(_ context.Context, req *pdpb.PutStoreRequest) (*pdpb.PutStoreResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.PutStoreResponse{Header: h}, nil
	}
	if err := p.s.putStore(req.GetStore()); err != nil {
		if errors.Is(err, errStoreTombstone) {
			return &pdpb.PutStoreResponse{Header: p.errHeader(pdpb.ErrorType_STORE_TOMBSTONE, err)}, nil
		}
		return nil, internal(err)
	}
	return &pdpb.PutStoreResponse{Header: p.header()}, nil
}

func (p *pdService) GetAllStores(_ context.Context, req *pdpb.GetAllStoresRequest) (*pdpb.GetAllStoresResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetAllStoresResponse{Header: h}, nil
	}
	return &pdpb.GetAllStoresResponse{Header: p.header(), Stores: p.s.allStores(req.GetExcludeTombstoneStores())}, nil
}

func (p *pdService) StoreHeartbeat(_ context.Context, req *pdpb.StoreHeartbeatRequest) (*pdpb.StoreHeartbeatResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.StoreHeartbeatResponse{Header: h}, nil
	}
	if err := p.s.storeHeartbeat(req.GetStats().GetStoreId(), req.GetStats().GetStartTime()); err != nil {
		return &pdpb.StoreHeartbeatResponse{Header: p.errHeader(pdpb.ErrorType_UNKNOWN, err)}, nil
	}
	return &pdpb.StoreHeartbeatResponse{Header: p.header(), ClusterVersion: p.s.cfg.Version}, nil
}

func (p *pdService) RegionHeartbeat(stream pdpb.PD_RegionHeartbeatServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h := p.check(req.GetHeader()); h != nil {
			if err := stream.Send(&pdpb.RegionHeartbeatResponse{Header: h}); err != nil {
				return err
			}
			continue
		}
		e := &regionEntry{
			Region:  proto.Clone(req.GetRegion()).(*metapb.Region),
			Leader:  req.GetLeader(),
			Term:    req.GetTerm(),
			Keys:    req.GetApproximateKeys(),
			Pending: req.GetPendingPeers(),
		}
		op, err := p.s.regionHeartbeat(e)
		if err != nil {
			return internal(err)
		}
		if op != nil {
			if err := stream.Send(op); err != nil {
				return err
			}
		}
	}
}

func regionResponse(h *pdpb.ResponseHeader, e *regionEntry) *pdpb.GetRegionResponse {
	resp := &pdpb.GetRegionResponse{Header: h}
	if e != nil {
		resp.Region = proto.Clone(e.Region).(*metapb.Region)
		resp.Leader = e.Leader
	}
	return resp
}

func (p *pdService) GetRegion(_ context.Context, req *pdpb.GetRegionRequest) (*pdpb.GetRegionResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetRegionResponse{Header: h}, nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return regionResponse(p.header(), p.s.regions.find(req.GetRegionKey())), nil
}

func (p *pdService) GetPrevRegion(_ context.Context, req *pdpb.GetRegionRequest) (*pdpb.GetRegionResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetRegionResponse{Header: h}, nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return regionResponse(p.header(), p.s.regions.prev(req.GetRegionKey())), nil
}

func (p *pdService) GetRegionByID(_ context.Context, req *pdpb.GetRegionByIDRequest) (*pdpb.GetRegionResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetRegionResponse{Header: h}, nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return regionResponse(p.header(), p.s.regions.byID[req.GetRegionId()]), nil
}

func toPDRegion(e *regionEntry) *pdpb.Region {
	return &pdpb.Region{Region: proto.Clone(e.Region).(*metapb.Region), Leader: e.Leader}
}

func (p *pdService) ScanRegions(_ context.Context, req *pdpb.ScanRegionsRequest) (*pdpb.ScanRegionsResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.ScanRegionsResponse{Header: h}, nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	resp := &pdpb.ScanRegionsResponse{Header: p.header()}
	for _, e := range p.s.regions.scan(req.GetStartKey(), req.GetEndKey(), int(req.GetLimit())) {
		r := toPDRegion(e)
		resp.Regions = append(resp.Regions, r)
		resp.RegionMetas = append(resp.RegionMetas, r.Region)
		leader := e.Leader
		if leader == nil {
			leader = &metapb.Peer{} // repeated fields cannot hold nil
		}
		resp.Leaders = append(resp.Leaders, leader)
	}
	return resp, nil
}

func (p *pdService) BatchScanRegions(_ context.Context, req *pdpb.BatchScanRegionsRequest) (*pdpb.BatchScanRegionsResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.BatchScanRegionsResponse{Header: h}, nil
	}
	// PD's own checks, in its words: the ranges must come sorted, none starting
	// before the previous one's end (an empty end counts as the empty key, as
	// in PD), and none starting after its own end.
	ranges := req.GetRanges()
	for i, kr := range ranges {
		if i > 0 && bytes.Compare(kr.GetStartKey(), ranges[i-1].GetEndKey()) < 0 {
			return &pdpb.BatchScanRegionsResponse{Header: p.errHeader(pdpb.ErrorType_UNKNOWN, errors.New("invalid key range, ranges overlapped"))}, nil
		}
		if len(kr.GetEndKey()) > 0 && bytes.Compare(kr.GetStartKey(), kr.GetEndKey()) > 0 {
			return &pdpb.BatchScanRegionsResponse{Header: p.errHeader(pdpb.ErrorType_UNKNOWN, errors.New("invalid key range, start key > end key"))}, nil
		}
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	resp := &pdpb.BatchScanRegionsResponse{Header: p.header()}
	limit := int(req.GetLimit())
	var last uint64
	for _, kr := range ranges {
		left := 0
		if limit > 0 {
			if left = limit - len(resp.Regions); left <= 0 {
				break
			}
			left++ // the first may be the previous range's last region
		}
		for _, e := range p.s.regions.scan(kr.GetStartKey(), kr.GetEndKey(), left) {
			if limit > 0 && len(resp.Regions) >= limit {
				break
			}
			if e.Region.GetId() != last { // a region spanning two ranges is reported once
				last = e.Region.GetId()
				resp.Regions = append(resp.Regions, toPDRegion(e))
			}
		}
	}
	return resp, nil
}

func (p *pdService) AskBatchSplit(_ context.Context, req *pdpb.AskBatchSplitRequest) (*pdpb.AskBatchSplitResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.AskBatchSplitResponse{Header: h}, nil
	}
	if !p.s.tikvSplitEnabled() {
		// As PD: with schedule.enable-tikv-split-region off (BR's scheduler pause turns it
		// off) no TiKV may split, whoever asked for the split.
		return &pdpb.AskBatchSplitResponse{Header: p.errHeader(pdpb.ErrorType_UNKNOWN, errTiKVSplitDisabled)}, nil
	}
	resp := &pdpb.AskBatchSplitResponse{Header: p.header()}
	for range req.GetSplitCount() {
		id := &pdpb.SplitID{}
		var err error
		if id.NewRegionId, err = p.s.allocID(); err != nil {
			return nil, internal(err)
		}
		for range req.GetRegion().GetPeers() {
			pid, err := p.s.allocID()
			if err != nil {
				return nil, internal(err)
			}
			id.NewPeerIds = append(id.NewPeerIds, pid)
		}
		resp.Ids = append(resp.Ids, id)
	}
	return resp, nil
}

func (p *pdService) ReportBatchSplit(_ context.Context, req *pdpb.ReportBatchSplitRequest) (*pdpb.ReportBatchSplitResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.ReportBatchSplitResponse{Header: h}, nil
	}
	return &pdpb.ReportBatchSplitResponse{Header: p.header()}, nil
}

func (p *pdService) GetClusterConfig(_ context.Context, req *pdpb.GetClusterConfigRequest) (*pdpb.GetClusterConfigResponse, error) {
	return &pdpb.GetClusterConfigResponse{Header: p.header(), Cluster: &metapb.Cluster{Id: p.s.ClusterID(), MaxPeerCount: 3}}, nil
}

func (p *pdService) GetGCSafePoint(_ context.Context, req *pdpb.GetGCSafePointRequest) (*pdpb.GetGCSafePointResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.GetGCSafePointResponse{Header: h}, nil
	}
	return &pdpb.GetGCSafePointResponse{Header: p.header(), SafePoint: p.s.gcSafePoint()}, nil
}

func (p *pdService) UpdateGCSafePoint(_ context.Context, req *pdpb.UpdateGCSafePointRequest) (*pdpb.UpdateGCSafePointResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.UpdateGCSafePointResponse{Header: h}, nil
	}
	sp, err := p.s.updateGCSafePoint(req.GetSafePoint())
	if err != nil {
		return nil, internal(err)
	}
	return &pdpb.UpdateGCSafePointResponse{Header: p.header(), NewSafePoint: sp}, nil
}

func (p *pdService) UpdateServiceGCSafePoint(_ context.Context, req *pdpb.UpdateServiceGCSafePointRequest) (*pdpb.UpdateServiceGCSafePointResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.UpdateServiceGCSafePointResponse{Header: h}, nil
	}
	min, err := p.s.updateServiceSafePoint(string(req.GetServiceId()), req.GetTTL(), req.GetSafePoint())
	if errors.Is(err, errRemoveGCWorker) || errors.Is(err, errGCWorkerFiniteTTL) {
		return nil, status.Error(codes.Unknown, err.Error()) // PD returns the plain error
	}
	if err != nil {
		return nil, internal(err)
	}
	// As PD: the answer names the minimum's service and its remaining TTL.
	ttl := int64(math.MaxInt64) - p.s.now().Unix()
	if !min.Expire.IsZero() {
		ttl = min.Expire.Unix() - p.s.now().Unix()
	}
	return &pdpb.UpdateServiceGCSafePointResponse{Header: p.header(), ServiceId: []byte(min.ServiceID), TTL: ttl, MinSafePoint: min.SafePoint}, nil
}

func (p *pdService) ReportMinResolvedTS(_ context.Context, req *pdpb.ReportMinResolvedTsRequest) (*pdpb.ReportMinResolvedTsResponse, error) {
	if h := p.check(req.GetHeader()); h != nil {
		return &pdpb.ReportMinResolvedTsResponse{Header: h}, nil
	}
	p.s.reportResolvedTS(req.GetStoreId(), req.GetMinResolvedTs())
	return &pdpb.ReportMinResolvedTsResponse{Header: p.header()}, nil
}
