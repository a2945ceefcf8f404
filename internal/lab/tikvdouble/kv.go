package tikvdouble

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	"github.com/pingcap/kvproto/pkg/raft_serverpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// kvService serves tikvpb.Tikv: transactions, flashback and peer traffic.
type kvService struct {
	tikvpb.UnimplementedTikvServer
	s *Store
}

var errUnavailable = status.Error(codes.Unavailable, "store is unreachable")

// Raft receives peer messages from other stores.
func (k *kvService) Raft(stream tikvpb.Tikv_RaftServer) error {
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&raft_serverpb.Done{})
		}
		if err != nil {
			return err
		}
		if err := k.receive(m); err != nil {
			return err
		}
	}
}

// BatchRaft is Raft with several messages per stream message, which is what
// stores send each other.
func (k *kvService) BatchRaft(stream tikvpb.Tikv_BatchRaftServer) error {
	for {
		b, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&raft_serverpb.Done{})
		}
		if err != nil {
			return err
		}
		for _, m := range b.GetMsgs() {
			if err := k.receive(m); err != nil {
				return err
			}
		}
	}
}

func (k *kvService) receive(m *raft_serverpb.RaftMessage) error {
	if to := m.GetToPeer().GetStoreId(); to != k.s.cfg.StoreID {
		// The sender resolved an address another store now listens on
		// (a restarted store got a new port): end the stream so it
		// resolves again, as TiKV refuses a message for another store.
		return status.Errorf(codes.FailedPrecondition, "store not match: message for store %d reached store %d", to, k.s.cfg.StoreID)
	}
	k.s.onRaftMessage(m)
	return nil
}

func (s *Store) onRaftMessage(m *raft_serverpb.RaftMessage) {
	s.mu.Lock()
	if s.isolatedLocked() {
		s.mu.Unlock()
		return
	}
	p := s.peers[m.GetRegionId()]
	if p != nil && p.selfID != m.GetToPeer().GetId() && !p.uninit &&
		m.GetRegionEpoch().GetConfVer() > p.region.GetRegionEpoch().GetConfVer() {
		// A newer incarnation of this store's peer: ours was removed
		// without hearing of it. Drop it; the next message creates the new one.
		s.destroyPeerLocked(p, true)
		p = nil
	}
	if p != nil && p.uninit && p.selfID != m.GetToPeer().GetId() {
		// An uninitialized peer of an earlier addition that was undone
		// before its snapshot came: it holds nothing, forget it.
		delete(s.peers, m.GetRegionId())
		p = nil
	}
	if p == nil {
		start := !s.created[m.GetRegionId()] && !s.recovery && !m.GetIsTombstone()
		if start {
			s.created[m.GetRegionId()] = true
		}
		s.mu.Unlock()
		if start {
			go s.createPeerFromPD(m)
		}
		return
	}
	s.routeLocked(p, m)
	s.mu.Unlock()
	s.wake()
}

// routeLocked delivers m to the local peer p: a tombstone destroys a peer
// that was removed, a message from a peer that is no longer a member gets
// a tombstone back, a snapshot is installed, the rest is raft.
func (s *Store) routeLocked(p *peer, m *raft_serverpb.RaftMessage) {
	if p.selfID != m.GetToPeer().GetId() {
		return
	}
	if m.GetIsTombstone() {
		if !p.uninit && p.region.GetRegionEpoch().GetConfVer() < m.GetRegionEpoch().GetConfVer() && p.peerByID(m.GetFromPeer().GetId()) != nil {
			s.destroyPeerLocked(p, true)
		}
		return
	}
	if !p.uninit && p.peerByID(m.GetFromPeer().GetId()) == nil && m.GetRegionEpoch().GetConfVer() < p.region.GetRegionEpoch().GetConfVer() {
		s.rd.msgs = append(s.rd.msgs, tombstoneTo(p, m))
		return
	}
	if m.GetMessage().GetMsgType() == eraftpb.MessageType_MsgSnapshot {
		s.installSnapshotLocked(p, m.GetMessage())
		return
	}
	p.step(s.rd, m.GetMessage())
}

// createPeerFromPD creates a local peer for a region PD knows this store
// should hold: an empty initialized one for the initial layout (epoch 1/1,
// no data yet anywhere), otherwise an uninitialized one that waits for the
// leader's snapshot (a peer a conf change added).
func (s *Store) createPeerFromPD(m *raft_serverpb.RaftMessage) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		s.mu.Lock()
		delete(s.created, m.GetRegionId())
		s.mu.Unlock()
	}()
	resp, err := s.pd.GetRegionByID(ctx, &pdpb.GetRegionByIDRequest{Header: s.header(), RegionId: m.GetRegionId()})
	if err != nil || resp.GetRegion() == nil {
		return
	}
	r := resp.GetRegion()
	ok := false
	for _, x := range r.GetPeers() {
		ok = ok || (x.GetStoreId() == s.cfg.StoreID && x.GetId() == m.GetToPeer().GetId())
	}
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers[r.GetId()] != nil {
		return
	}
	for _, p := range s.peers {
		if !p.uninit && overlaps(p.region, r) {
			return
		}
	}
	if e := r.GetRegionEpoch(); e.GetVersion() == 1 && e.GetConfVer() == 1 {
		s.createPeerLocked(r, 0)
		return
	}
	p := newPeer(proto.Clone(r).(*metapb.Region), m.GetToPeer().GetId(), 0)
	p.uninit, p.timeout = true, s.electionTimeout()
	s.peers[r.GetId()] = p
}

func overlaps(a, b *metapb.Region) bool {
	return (len(a.GetEndKey()) == 0 || bytes.Compare(b.GetStartKey(), a.GetEndKey()) < 0) &&
		(len(b.GetEndKey()) == 0 || bytes.Compare(a.GetStartKey(), b.GetEndKey()) < 0)
}

// checkLocked finds the leader peer serving ctx for keys.
// access says whether a request may touch a region in flashback.
type access int

const (
	// normal requests are refused while a region is in flashback.
	normal access = iota
	// flashbackOp requests are the flashback itself.
	flashbackOp
)

func (s *Store) checkLocked(c *kvrpcpb.Context, keys [][]byte, a access) (*peer, *errorpb.Error) {
	p := s.peers[c.GetRegionId()]
	if e := s.regionErrorLocked(p, c.GetRegionId(), c.GetRegionEpoch()); e != nil {
		return nil, e
	}
	for _, k := range keys {
		if !keyInRegion(p.region, k) {
			return nil, &errorpb.Error{Message: "key not in region", KeyNotInRegion: &errorpb.KeyNotInRegion{
				Key: k, RegionId: p.region.GetId(), StartKey: p.region.GetStartKey(), EndKey: p.region.GetEndKey()}}
		}
	}
	// A leader that has not applied its own term's first entry serves nothing yet (TiKV's
	// leader waits until its applied term is its term): its region state may be older than
	// entries it already committed — a restarted store's new leader still "in flashback" while
	// the flashback's finish sits in its log — so the flashback state is judged only after.
	if p.applied < p.termStart {
		return nil, &errorpb.Error{Message: "leader has not applied its term yet", ServerIsBusy: &errorpb.ServerIsBusy{Reason: "leader not ready"}}
	}
	if p.region.GetIsInFlashback() && a != flashbackOp {
		return nil, &errorpb.Error{Message: "flashback in progress", FlashbackInProgress: &errorpb.FlashbackInProgress{
			RegionId: p.region.GetId(), FlashbackStartTs: p.region.GetFlashbackStartTs()}}
	}
	return p, nil
}

// propose runs cmd through the region's log and waits for it to apply.
// The result's regionErr is set when the region cannot serve it.
func (s *Store) propose(ctx context.Context, c *kvrpcpb.Context, keys [][]byte, cmd command, a access) (applyResult, error) {
	s.mu.Lock()
	if s.isolatedLocked() {
		s.mu.Unlock()
		return applyResult{}, errUnavailable
	}
	p, rerr := s.checkLocked(c, keys, a)
	if rerr == nil && prepareMergeLoggedLocked(p) {
		rerr = errMerging(p.region.GetId())
	}
	if rerr != nil {
		s.mu.Unlock()
		return applyResult{regionErr: rerr}, nil
	}
	pr, err := s.proposeLocked(p, cmd)
	s.mu.Unlock()
	if err != nil {
		return applyResult{}, err
	}
	res, err := s.wait(ctx, pr)
	if err != nil {
		return applyResult{}, err
	}
	if res.notLeader {
		res.regionErr = &errorpb.Error{Message: res.err, NotLeader: &errorpb.NotLeader{RegionId: c.GetRegionId()}}
	}
	return res, nil
}

func (k *kvService) KvPrewrite(ctx context.Context, req *kvrpcpb.PrewriteRequest) (*kvrpcpb.PrewriteResponse, error) {
	c := &prewriteCmd{Primary: encode(req.GetPrimaryLock()), StartTS: req.GetStartVersion(), TTL: req.GetLockTtl()}
	var keys [][]byte
	for _, m := range req.GetMutations() {
		key := encode(m.GetKey())
		c.Mutations = append(c.Mutations, mutation{Op: m.GetOp(), Key: key, Value: m.GetValue()})
		keys = append(keys, key)
	}
	res, err := k.s.propose(ctx, req.GetContext(), keys, command{Prewrite: c}, normal)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.PrewriteResponse{RegionError: res.regionErr, Errors: rawKeyErrors(res.keyErrs)}, nil
}

func firstErr(es []*kvrpcpb.KeyError) *kvrpcpb.KeyError {
	if len(es) > 0 {
		return es[0]
	}
	return nil
}

func (k *kvService) KvCommit(ctx context.Context, req *kvrpcpb.CommitRequest) (*kvrpcpb.CommitResponse, error) {
	keys := encodeAll(req.GetKeys())
	c := &commitCmd{Keys: keys, StartTS: req.GetStartVersion(), CommitTS: req.GetCommitVersion()}
	res, err := k.s.propose(ctx, req.GetContext(), keys, command{Commit: c}, normal)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.CommitResponse{RegionError: res.regionErr, Error: firstErr(rawKeyErrors(res.keyErrs)), CommitVersion: req.GetCommitVersion()}, nil
}

func (k *kvService) KvBatchRollback(ctx context.Context, req *kvrpcpb.BatchRollbackRequest) (*kvrpcpb.BatchRollbackResponse, error) {
	keys := encodeAll(req.GetKeys())
	c := &rollbackCmd{Keys: keys, StartTS: req.GetStartVersion()}
	res, err := k.s.propose(ctx, req.GetContext(), keys, command{Rollback: c}, normal)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.BatchRollbackResponse{RegionError: res.regionErr, Error: firstErr(rawKeyErrors(res.keyErrs))}, nil
}

func (k *kvService) KvCheckTxnStatus(ctx context.Context, req *kvrpcpb.CheckTxnStatusRequest) (*kvrpcpb.CheckTxnStatusResponse, error) {
	primary := encode(req.GetPrimaryKey())
	c := &checkTxnCmd{Primary: primary, LockTS: req.GetLockTs(), CurrentTS: req.GetCurrentTs(), RollbackIfNotExist: req.GetRollbackIfNotExist()}
	res, err := k.s.propose(ctx, req.GetContext(), [][]byte{primary}, command{CheckTxn: c}, normal)
	if err != nil {
		return nil, err
	}
	st := res.status
	return &kvrpcpb.CheckTxnStatusResponse{RegionError: res.regionErr, Error: rawKeyError(st.Err), LockTtl: st.TTL, CommitVersion: st.CommitTS, Action: st.Action}, nil
}

func (k *kvService) KvResolveLock(ctx context.Context, req *kvrpcpb.ResolveLockRequest) (*kvrpcpb.ResolveLockResponse, error) {
	keys := encodeAll(req.GetKeys())
	c := &resolveLockCmd{StartTS: req.GetStartVersion(), CommitTS: req.GetCommitVersion(), Keys: keys}
	res, err := k.s.propose(ctx, req.GetContext(), keys, command{ResolveLock: c}, normal)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.ResolveLockResponse{RegionError: res.regionErr}, nil
}

func (k *kvService) KvGet(_ context.Context, req *kvrpcpb.GetRequest) (*kvrpcpb.GetResponse, error) {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isolatedLocked() {
		return nil, errUnavailable
	}
	key := encode(req.GetKey())
	if _, rerr := s.checkLocked(req.GetContext(), [][]byte{key}, normal); rerr != nil {
		return &kvrpcpb.GetResponse{RegionError: rerr}, nil
	}
	v, ke := s.kv.read(key, req.GetVersion())
	return &kvrpcpb.GetResponse{Error: rawKeyError(ke), Value: v, NotFound: v == nil && ke == nil}, nil
}

func (k *kvService) KvScan(_ context.Context, req *kvrpcpb.ScanRequest) (*kvrpcpb.ScanResponse, error) {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isolatedLocked() {
		return nil, errUnavailable
	}
	start := encode(req.GetStartKey())
	p, rerr := s.checkLocked(req.GetContext(), [][]byte{start}, normal)
	if rerr != nil {
		return &kvrpcpb.ScanResponse{RegionError: rerr}, nil
	}
	end := p.region.GetEndKey()
	if e := codec.EncodeBoundary(req.GetEndKey()); len(e) > 0 && (len(end) == 0 || bytes.Compare(e, end) < 0) {
		end = e
	}
	resp := &kvrpcpb.ScanResponse{}
	for _, key := range s.kv.rangeKeys(start, end) {
		if req.GetLimit() > 0 && uint32(len(resp.Pairs)) >= req.GetLimit() {
			break
		}
		v, ke := s.kv.read([]byte(key), req.GetVersion())
		if ke != nil {
			resp.Error = rawKeyError(ke)
			return resp, nil
		}
		if v != nil {
			resp.Pairs = append(resp.Pairs, &kvrpcpb.KvPair{Key: decode([]byte(key)), Value: v})
		}
	}
	return resp, nil
}

func (k *kvService) KvPrepareFlashbackToVersion(ctx context.Context, req *kvrpcpb.PrepareFlashbackToVersionRequest) (*kvrpcpb.PrepareFlashbackToVersionResponse, error) {
	ts := req.GetStartTs()
	// TiKV locks the range's first key at start_ts, so that key must be in the region.
	res, err := k.s.propose(ctx, req.GetContext(), [][]byte{encode(req.GetStartKey())}, command{PrepareFlashback: &ts}, flashbackOp)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.PrepareFlashbackToVersionResponse{RegionError: res.regionErr}, nil
}

func (k *kvService) KvFlashbackToVersion(ctx context.Context, req *kvrpcpb.FlashbackToVersionRequest) (*kvrpcpb.FlashbackToVersionResponse, error) {
	s := k.s
	s.mu.Lock()
	p := s.peers[req.GetContext().GetRegionId()]
	if p != nil && !p.region.GetIsInFlashback() {
		s.mu.Unlock()
		return &kvrpcpb.FlashbackToVersionResponse{RegionError: &errorpb.Error{
			Message:              "region is not prepared for the flashback",
			FlashbackNotPrepared: &errorpb.FlashbackNotPrepared{RegionId: p.region.GetId()},
		}}, nil
	}
	first := encode(req.GetStartKey())
	var start, end []byte
	if p != nil {
		start, end = clip(p.region, first, codec.EncodeBoundary(req.GetEndKey()))
	}
	var crash error
	if p != nil && p.role == leader {
		// TiKV's read phase, on the leader, asserts that nothing was committed after the
		// flashback's commit ts; a failed assertion panics the whole process.
		crash = s.checkFlashbackLocked(start, end, req.GetCommitTs())
	}
	s.mu.Unlock()
	if crash != nil {
		s.crash(crash)
		return nil, status.Error(codes.Unavailable, "store crashed")
	}
	c := &flashbackCmd{Start: start, End: end, Version: req.GetVersion(), StartTS: req.GetStartTs(), CommitTS: req.GetCommitTs()}
	res, err := s.propose(ctx, req.GetContext(), [][]byte{first}, command{Flashback: c}, flashbackOp)
	if err != nil {
		return nil, err
	}
	return &kvrpcpb.FlashbackToVersionResponse{RegionError: res.regionErr}, nil
}

// clip intersects [start, end) with the region's range.
func clip(r *metapb.Region, start, end []byte) ([]byte, []byte) {
	if bytes.Compare(start, r.GetStartKey()) < 0 {
		start = r.GetStartKey()
	}
	if re := r.GetEndKey(); len(re) > 0 && (len(end) == 0 || bytes.Compare(re, end) < 0) {
		end = re
	}
	return append([]byte(nil), start...), end
}

// Keys arrive raw, as TiKV's transactional API takes them, and are encoded at
// once (TiKV's Key::from_raw): the MVCC data, the region boundaries and every
// comparison between them are in the encoded form, so a client that sends
// PD's (encoded) boundaries as keys gets what a real TiKV gives it.
func encode(raw []byte) []byte { return codec.EncodeBytes(raw) }

func encodeAll(raw [][]byte) [][]byte {
	out := make([][]byte, len(raw))
	for i, k := range raw {
		out[i] = encode(k)
	}
	return out
}

// decode turns a stored key back into the raw key clients know.
func decode(enc []byte) []byte {
	raw, _, err := codec.DecodeBytes(enc)
	if err != nil {
		return enc // only encoded keys are ever stored
	}
	return raw
}

// rawKeyError rewrites the keys a key error names into raw keys.
func rawKeyError(e *kvrpcpb.KeyError) *kvrpcpb.KeyError {
	if e == nil {
		return nil
	}
	if l := e.GetLocked(); l != nil {
		l.Key, l.PrimaryLock = decode(l.GetKey()), decode(l.GetPrimaryLock())
	}
	if c := e.GetConflict(); c != nil {
		c.Key, c.Primary = decode(c.GetKey()), decode(c.GetPrimary())
	}
	if n := e.GetTxnNotFound(); n != nil {
		n.PrimaryKey = decode(n.GetPrimaryKey())
	}
	if a := e.GetAlreadyExist(); a != nil {
		a.Key = decode(a.GetKey())
	}
	return e
}

func rawKeyErrors(es []*kvrpcpb.KeyError) []*kvrpcpb.KeyError {
	for _, e := range es {
		rawKeyError(e)
	}
	return es
}
