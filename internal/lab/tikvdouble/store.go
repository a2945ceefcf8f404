package tikvdouble

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/gogo/protobuf/proto"
	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/import_sstpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// Config configures one TiKV double store.
type Config struct {
	// StoreID is this store's fixed id.
	StoreID uint64
	// DataDir is the store's (data) volume: its checkpoint, and its log too when RaftDir is empty.
	DataDir string
	// RaftDir, if set, is a second volume holding the store's log (TiKV's raft-engine.dir with
	// rocksdb.wal-dir beside it); the two volumes must be captured together.
	RaftDir string
	// PD is PD's host:port.
	PD string
	// InitialStores are the stores of the first region; the first of them
	// bootstraps the cluster; at least 3.
	InitialStores []uint64
	// SplitKeys pre-split the initial key space into len+1 regions (sorted raw
	// keys; the regions' boundaries are their encoded forms, as TiKV's are).
	SplitKeys [][]byte
	// AdvertiseAddr is published to PD; empty means the listener address.
	AdvertiseAddr string
	// Now is the clock for leases; nil means time.Now.
	Now func() time.Time
	// Tick is the raft tick; 0 means 50ms.
	Tick time.Duration
	// SlowApply makes this store's followers apply only every SlowApply-th
	// tick (a deliberately slow follower); 0 or 1 means every tick.
	SlowApply int
	// CompactBytes is the wal size that triggers compaction; 0 means 8 MiB.
	CompactBytes int64
	// Seed seeds election timeouts.
	Seed uint64
	// Logger receives the store's log; nil discards it.
	Logger *slog.Logger
	// GCPollInterval is how often the store reads PD's GC safe point and
	// collects garbage at it; 0 means DefaultGCPollInterval.
	GCPollInterval time.Duration
	// NoLease serves the Backup service without PrepareSnapshotBackup, as a
	// TiKV older than the admin-operation lease: the method is answered
	// Unimplemented ("unknown method ..."), its requests never read.
	NoLease bool
	// TLS, if set, is the store's TLS (TiKV's security.ca-path, cert-path, key-path): it serves
	// gRPC over it (with its ClientCAs and ClientAuth: mutual TLS) and dials PD and the other
	// stores with it as a client (its RootCAs and Certificates). PD must serve TLS too.
	TLS *tls.Config
}

// Store is a running TiKV double.
type Store struct {
	cfg  Config
	now  func() time.Time
	log  *slog.Logger
	lis  net.Listener
	addr string
	grpc *grpc.Server
	pdcc *grpc.ClientConn
	pd   pdpb.PDClient
	// clusterID is PD's; recovery is fixed for the life of the process, as in TiKV.
	clusterID uint64
	recovery  bool
	// volumeCluster is the cluster id the volume belongs to (0: none recorded yet).
	volumeCluster uint64
	startTime     time.Time
	// startTS is the start timestamp published to PD.
	startTS   int64
	wal       *wal
	transport *transport
	stop      chan struct{}
	kick      chan struct{}
	wg        sync.WaitGroup
	rng       *rand.Rand
	closeOnce sync.Once
	// crashed is closed, and crashErr set, when the store crashed (crash.go).
	crashed   chan struct{}
	crashOnce sync.Once

	mu         sync.Mutex
	peers      map[uint64]*peer
	kv         *kvStore
	rd         *ready
	replaying  bool
	ticks      int
	applyTick  bool
	callbacks  []func()
	waiters    []*applyWait
	leaseUntil time.Time
	prepGen    uint64
	recoverGen uint64
	// recoverFault, if set, ends every RecoverRegion with it (FailRecoverRegion).
	recoverFault error
	// recoverReceived counts the RecoverRegion requests read.
	recoverReceived uint64
	// keepLeading are the regions the last RecoverRegion asked this store
	// to lead; their peers campaign until they win (TiKV's LeaderKeeper).
	keepLeading map[uint64]bool
	isolated    time.Time
	// rejectedAdmin counts admin operators refused while the lease held.
	rejectedAdmin int
	created       map[uint64]bool
	// flushGen counts completed flush rounds.
	flushGen uint64
	// mergeProposed is, per merging source region, what this store last
	// proposed to end its merge.
	mergeProposed map[uint64]mergeProposal
	// destroyed are the regions whose local peer this process destroyed
	// (merged away or removed); a recovery wait for them is over.
	destroyed map[uint64]bool
	// mergeHold is when HoldMerges' fault injection ends.
	mergeHold time.Time
	// importSuspendedUntil is when SuspendImportRPC's suspension ends.
	importSuspendedUntil time.Time
	// gc is how far the store collected garbage (gc.go).
	gc gcState
	// crashErr is why the store crashed, nil while it runs.
	crashErr error
}

// sync returns once everything queued before the call is on disk.
func (s *Store) sync(ctx context.Context) error {
	s.mu.Lock()
	target := s.flushGen + 2
	s.mu.Unlock()
	for {
		s.wake()
		s.mu.Lock()
		done := s.flushGen >= target
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return errors.New("store stopped")
		case <-time.After(time.Millisecond):
		}
	}
}

// proposal is a client command waiting for its entry to apply.
type proposal struct {
	term uint64
	done chan applyResult
}

func (pr *proposal) finish(r applyResult) {
	select {
	case pr.done <- r:
	default:
	}
}

// applyResult is what executing one entry returned to its proposer.
type applyResult struct {
	regionErr *errorpb.Error
	keyErrs   []*kvrpcpb.KeyError
	status    txnStatus
	notLeader bool
	err       string
	// retry stops the apply loop before this entry: it cannot apply yet.
	retry bool
}

// command is the payload of a log entry.
type command struct {
	Prewrite         *prewriteCmd      `json:"pw,omitempty"`
	Commit           *commitCmd        `json:"cm,omitempty"`
	Rollback         *rollbackCmd      `json:"rb,omitempty"`
	Split            *splitCmd         `json:"sp,omitempty"`
	PrepareFlashback *uint64           `json:"pf,omitempty"`
	CheckTxn         *checkTxnCmd      `json:"ct,omitempty"`
	ResolveLock      *resolveLockCmd   `json:"rl,omitempty"`
	Flashback        *flashbackCmd     `json:"fb,omitempty"`
	ChangePeer       *changePeerCmd    `json:"cp,omitempty"`
	PrepareMerge     *prepareMergeCmd  `json:"pm,omitempty"`
	CommitMerge      *commitMergeCmd   `json:"cmg,omitempty"`
	RollbackMerge    *rollbackMergeCmd `json:"rbm,omitempty"`
}

// splitCmd splits a region at Key; the right half gets the new ids.
type splitCmd struct {
	Key        []byte   `json:"k"`
	Version    uint64   `json:"v"`
	NewRegion  uint64   `json:"r"`
	NewPeerIDs []uint64 `json:"p"`
}

// Start opens the volume, replays it, registers with PD (bootstrapping the
// cluster if this is the first initial store) and serves on lis.
func Start(ctx context.Context, cfg Config, lis net.Listener) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick == 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.CompactBytes == 0 {
		cfg.CompactBytes = 8 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.GCPollInterval <= 0 {
		cfg.GCPollInterval = DefaultGCPollInterval
	}
	s := &Store{
		cfg: cfg, now: cfg.Now, log: cfg.Logger.With("store", cfg.StoreID), lis: lis,
		stop: make(chan struct{}), kick: make(chan struct{}, 1), crashed: make(chan struct{}),
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.StoreID)),
		peers: map[uint64]*peer{}, kv: newKVStore(), rd: &ready{}, created: map[uint64]bool{},
		mergeProposed: map[uint64]mergeProposal{}, destroyed: map[uint64]bool{},
		startTime: cfg.Now(),
		startTS:   cfg.Now().Unix(),
	}
	s.addr = cfg.AdvertiseAddr
	if s.addr == "" {
		s.addr = lis.Addr().String()
	}
	w, err := openWAL(cfg.StoreID, cfg.DataDir, cfg.RaftDir)
	if err != nil {
		return nil, err
	}
	s.wal = w
	if err := s.replay(w.recs); err != nil {
		return nil, err
	}
	w.recs = nil
	s.transport = newTransport(s)
	if err := s.connectPD(ctx); err != nil {
		s.transport.close()
		return nil, err
	}
	// gRPC's default limits (4 MiB received); keepalive pings from clients are accepted every
	// 5 s (gRPC's default refuses pings more often than every 5 minutes and ends such a
	// connection, where TiKV takes BR's 10 s pings).
	opts := []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true})}
	if cfg.NoLease {
		opts = append(opts, grpc.InTapHandle(refusePrepareSnapshotBackup))
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	tikvpb.RegisterTikvServer(s.grpc, &kvService{s: s})
	brpb.RegisterBackupServer(s.grpc, &backupService{s: s})
	import_sstpb.RegisterImportSSTServer(s.grpc, &importService{s: s})
	if s.recovery {
		recoverdatapb.RegisterRecoverDataServer(s.grpc, &recoverService{s: s})
	}
	s.wg.Add(4)
	go func() { defer s.wg.Done(); _ = s.grpc.Serve(lis) }()
	go func() { defer s.wg.Done(); s.run() }()
	go func() { defer s.wg.Done(); s.pdLoop() }()
	go func() { defer s.wg.Done(); s.gcLoop() }()
	s.log.Info("Store started", "addr", s.addr, "recovery", s.recovery, "regions", len(s.peers))
	return s, nil
}

// Addr is the address the store serves on.
func (s *Store) Addr() string { return s.addr }

// ID is the store id.
func (s *Store) ID() uint64 { return s.cfg.StoreID }

// Recovery reports whether the store started in recovery mode.
func (s *Store) Recovery() bool { return s.recovery }

// Close stops the store. Everything acknowledged is already on disk, so this
// is also what kill -9 leaves behind.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.grpc.Stop()
		s.wg.Wait()
		s.transport.close()
		_ = s.pdcc.Close()
	})
	return nil
}

// Isolate makes the store unreachable for d: it drops raft traffic both ways
// and answers client RPCs with Unavailable.
func (s *Store) Isolate(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isolated = s.now().Add(d)
}

// clientCreds are the credentials the store dials PD and its peers with: Config.TLS, or
// plaintext.
func (s *Store) clientCreds() grpc.DialOption {
	if s.cfg.TLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(s.cfg.TLS))
}

func (s *Store) isolatedLocked() bool { return s.now().Before(s.isolated) }

func (s *Store) connectPD(ctx context.Context) error {
	cc, err := grpc.NewClient(s.cfg.PD, s.clientCreds())
	if err != nil {
		return fmt.Errorf("dial pd %s: %w", s.cfg.PD, err)
	}
	s.pdcc, s.pd = cc, pdpb.NewPDClient(cc)
	var members *pdpb.GetMembersResponse
	for {
		members, err = s.pd.GetMembers(ctx, &pdpb.GetMembersRequest{})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reach pd %s: %w", s.cfg.PD, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.clusterID = members.GetHeader().GetClusterId()
	// Like TiKV: an RPC error reading the mark counts as "not marked".
	if rec, err := s.pd.IsSnapshotRecovering(ctx, &pdpb.IsSnapshotRecoveringRequest{Header: s.header()}); err == nil {
		s.recovery = rec.GetMarked()
	}
	if err := s.adoptClusterID(); err != nil {
		return err
	}
	// BR's reboot watcher compares start timestamps: make every start
	// visible even when two fall in the same second.
	if old, err := s.pd.GetStore(ctx, &pdpb.GetStoreRequest{Header: s.header(), StoreId: s.cfg.StoreID}); err == nil && old.GetStore().GetStartTimestamp() >= s.startTS {
		s.startTS = old.GetStore().GetStartTimestamp() + 1
	}
	if err := s.bootstrap(ctx); err != nil {
		return err
	}
	st := &metapb.Store{Id: s.cfg.StoreID, Address: s.addr, PeerAddress: s.addr, StartTimestamp: s.startTS, Version: "8.5.0"}
	resp, err := s.pd.PutStore(ctx, &pdpb.PutStoreRequest{Header: s.header(), Store: st})
	if err != nil {
		return fmt.Errorf("put store %d: %w", s.cfg.StoreID, err)
	}
	if e := resp.GetHeader().GetError(); e != nil {
		return fmt.Errorf("put store %d: %s", s.cfg.StoreID, e.GetMessage())
	}
	return nil
}

func (s *Store) header() *pdpb.RequestHeader {
	return &pdpb.RequestHeader{ClusterId: s.clusterID, SenderId: s.cfg.StoreID}
}

func (s *Store) allocID(ctx context.Context) (uint64, error) {
	r, err := s.pd.AllocID(ctx, &pdpb.AllocIDRequest{Header: s.header()})
	if err != nil {
		return 0, fmt.Errorf("alloc id: %w", err)
	}
	return r.GetId(), nil
}

// bootstrap lays out the initial regions when PD is not bootstrapped. The
// first initial store allocates len(SplitKeys)+1 regions whose peers are
// spread round-robin over the initial stores, bootstraps PD with the first
// and reports the rest; every store then creates its own peers from PD and
// the peers elect leaders. In recovery mode a store bootstraps a fresh PD
// with a throw-away region that the restored regions replace.
func (s *Store) bootstrap(ctx context.Context) error {
	b, err := s.pd.IsBootstrapped(ctx, &pdpb.IsBootstrappedRequest{Header: s.header()})
	if err != nil {
		return fmt.Errorf("is bootstrapped: %w", err)
	}
	if s.recovery {
		if !b.GetBootstrapped() {
			return s.bootstrapPD(ctx, []*metapb.Region{{RegionEpoch: &metapb.RegionEpoch{}, Peers: []*metapb.Peer{{StoreId: s.cfg.StoreID}}}})
		}
		return nil
	}
	if len(s.peers) > 0 || len(s.cfg.InitialStores) < 3 {
		return nil
	}
	if !b.GetBootstrapped() && s.cfg.InitialStores[0] == s.cfg.StoreID {
		var regions []*metapb.Region
		bounds := [][]byte{nil}
		for _, k := range s.cfg.SplitKeys {
			bounds = append(bounds, codec.EncodeBytes(k))
		}
		for i, start := range bounds {
			r := &metapb.Region{StartKey: start, RegionEpoch: &metapb.RegionEpoch{ConfVer: 1, Version: 1}}
			if i+1 < len(bounds) {
				r.EndKey = bounds[i+1]
			}
			for j := range 3 {
				r.Peers = append(r.Peers, &metapb.Peer{StoreId: s.cfg.InitialStores[(i+j)%len(s.cfg.InitialStores)]})
			}
			regions = append(regions, r)
		}
		if err := s.bootstrapPD(ctx, regions); err != nil {
			return err
		}
	}
	return s.join(ctx)
}

// bootstrapPD allocates ids for regions, bootstraps PD with the first and
// reports the others.
func (s *Store) bootstrapPD(ctx context.Context, regions []*metapb.Region) error {
	for _, r := range regions {
		var err error
		if r.Id, err = s.allocID(ctx); err != nil {
			return err
		}
		for _, x := range r.Peers {
			if x.Id, err = s.allocID(ctx); err != nil {
				return err
			}
		}
	}
	st := &metapb.Store{Id: s.cfg.StoreID, Address: s.addr, StartTimestamp: s.startTS}
	resp, err := s.pd.Bootstrap(ctx, &pdpb.BootstrapRequest{Header: s.header(), Store: st, Region: regions[0]})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if e := resp.GetHeader().GetError(); e != nil {
		if e.GetType() == pdpb.ErrorType_ALREADY_BOOTSTRAPPED {
			return nil
		}
		return fmt.Errorf("bootstrap: %s", e.GetMessage())
	}
	if len(regions) == 1 {
		return nil
	}
	hb, err := s.pd.RegionHeartbeat(ctx)
	if err != nil {
		return fmt.Errorf("report initial regions: %w", err)
	}
	for _, r := range regions[1:] {
		if err := hb.Send(&pdpb.RegionHeartbeatRequest{Header: s.header(), Region: r}); err != nil {
			return fmt.Errorf("report initial regions: %w", err)
		}
	}
	if err := hb.CloseSend(); err != nil {
		return fmt.Errorf("report initial regions: %w", err)
	}
	_, _ = hb.Recv() // wait for PD to finish the stream
	return nil
}

// join creates this store's peers of the initial layout, once PD has all of it.
func (s *Store) join(ctx context.Context) error {
	want := len(s.cfg.SplitKeys) + 1
	for {
		resp, err := s.pd.ScanRegions(ctx, &pdpb.ScanRegionsRequest{Header: s.header()}) //nolint:staticcheck // a store's bootstrap uses the plain scan real TiKV also issues
		if err == nil && resp.GetHeader().GetError() == nil && len(resp.GetRegions()) >= want {
			s.mu.Lock()
			for _, r := range resp.GetRegions() {
				mine := false
				for _, x := range r.GetRegion().GetPeers() {
					mine = mine || x.GetStoreId() == s.cfg.StoreID
				}
				if mine && r.GetRegion().GetRegionEpoch().GetVersion() == 1 && s.peers[r.GetRegion().GetId()] == nil {
					s.createPeerLocked(r.GetRegion(), 0)
				}
			}
			s.mu.Unlock()
			s.flush()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join the initial layout: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createPeerLocked adds a local peer of region and persists its meta.
func (s *Store) createPeerLocked(r *metapb.Region, term uint64) *peer {
	r = proto.Clone(r).(*metapb.Region)
	var self uint64
	for _, x := range r.GetPeers() {
		if x.GetStoreId() == s.cfg.StoreID {
			self = x.GetId()
		}
	}
	p := newPeer(r, self, term)
	p.timeout = s.electionTimeout()
	s.peers[r.GetId()] = p
	if !s.replaying {
		s.rd.recs = append(s.rd.recs, record{Kind: "region", Region: r.GetId(), Meta: r, FirstIndex: 1, Term: term})
	}
	return p
}

func (s *Store) electionTimeout() int { return 10 + s.rng.IntN(10) }

// replay rebuilds memory from the volume's records.
func (s *Store) replay(recs []record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replaying = true
	defer func() { s.replaying = false }()
	// Records of a destroyed peer may precede its tombstone in the same
	// round; after it, only a new incarnation's "region" record counts.
	tomb := map[uint64]bool{}
	for _, r := range recs {
		p := s.peers[r.Region]
		if p == nil && tomb[r.Region] && r.Kind != "region" && r.Kind != "kv" && r.Kind != "clear" && r.Kind != "resolve" {
			continue
		}
		switch r.Kind {
		case "region":
			delete(tomb, r.Region)
			if r.FirstIndex > 0 || p == nil {
				p = s.createPeerLocked(r.Meta, r.Term)
				p.firstIndex, p.snapTerm, p.applied = max(r.FirstIndex, 1), r.SnapTerm, r.Applied
				p.vote, p.commit = r.Vote, r.Commit
				p.log = nil
			} else {
				p.region = r.Meta
			}
			p.merging = r.Merge
		case "tombstone":
			delete(s.peers, r.Region)
			tomb[r.Region] = true
		case "clear":
			s.kv.clearRange(r.Start, r.End)
		case "entries":
			if p == nil {
				return fmt.Errorf("replay: entries for unknown region %d", r.Region)
			}
			p.appendEntries(r.Entries)
		case "hard":
			if p != nil {
				p.term, p.vote, p.commit = r.Term, r.Vote, r.Commit
			}
		case "apply":
			if p == nil {
				return fmt.Errorf("replay: apply for unknown region %d", r.Region)
			}
			for i := p.applied + 1; i <= r.Applied; i++ {
				e := p.entryAt(i)
				if e == nil {
					return fmt.Errorf("replay: region %d entry %d missing", r.Region, i)
				}
				s.execLocked(p, e)
				if s.peers[r.Region] != p {
					break // the entry destroyed the peer
				}
			}
			p.applied = max(p.applied, r.Applied)
		case "kv":
			m := s.kv.getOrCreate(r.Key)
			*m = *r.Value
		case "resolve":
			s.kv.resolveKV(r.TS)
		case "gc":
			s.replayGCLocked(r.TS)
		case "ident":
			s.volumeCluster = r.ClusterID
		}
	}
	for _, p := range s.peers {
		p.persisted = p.lastIndex()
		p.commit = max(p.commit, p.applied)
		p.applyQueued, p.durableApplied = p.applied, p.applied
	}
	return nil
}

// run is the store loop: it persists what the peers produced, sends their
// messages, then applies what committed (raft's Ready/Advance order).
func (s *Store) run() {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-t.C:
			s.tick()
		}
		s.flush()
		s.maybeCompact()
	}
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Store) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	slow := max(s.cfg.SlowApply, 1)
	s.applyTick = s.ticks%slow == 0
	for id, p := range s.peers {
		switch {
		case p.uninit:
			if p.idle++; p.idle > uninitTicks {
				delete(s.peers, id) // nobody sent it a snapshot: a stale message created it
			}
		case p.role == leader:
			p.heartbeat(s.rd, s.ticks%heartbeatTicks == 0)
			if !s.recovery {
				p.checkQuorum(s.rd)
			}
		case s.recovery && !s.keepLeading[id]:
			// Elections are BR's job in recovery mode.
		default:
			if p.role == candidate {
				p.requestVotes(s.rd)
			}
			p.elapsed++
			if p.elapsed > p.timeout && p.selfID != 0 {
				p.timeout = s.electionTimeout()
				if s.recovery {
					p.campaign(s.rd) // recovery mode has no pre-vote
				} else {
					p.preCampaign(s.rd)
				}
			}
		}
	}
	s.driveMergesLocked()
}

// uninitTicks is how long an uninitialized peer waits for its snapshot.
const uninitTicks = 400

type mark struct {
	p    *peer
	last uint64
}

// flush runs one Ready/Advance round with a single fsync: the records the
// peers produced (including the apply marks of the previous round) are
// persisted, then messages go out, then whatever committed is applied.
// Apply marks ride on the next round's fsync; losing one in a crash only
// means the committed entries are applied again on restart.
func (s *Store) flush() {
	s.mu.Lock()
	for _, n := range s.rd.snaps {
		if s.peers[n.p.region.GetId()] == n.p && n.p.role == leader {
			s.sendSnapshotLocked(n.p, n.to)
		}
	}
	s.rd.snaps = nil
	rd := s.rd
	s.rd = &ready{}
	var marks, applied []mark
	for _, p := range s.peers {
		if p.dirty {
			marks = append(marks, mark{p, p.lastIndex()})
			p.dirty = false
		}
		if p.applyQueued > p.durableApplied {
			applied = append(applied, mark{p, p.applyQueued})
		}
	}
	s.mu.Unlock()
	if err := s.wal.append(rd.recs); err != nil {
		s.log.Error("Persisting raft state failed", "err", err)
		return
	}
	s.transport.send(rd.msgs)

	s.mu.Lock()
	for _, m := range applied {
		m.p.durableApplied = max(m.p.durableApplied, m.last)
	}
	for _, m := range marks {
		m.p.persisted = min(m.last, m.p.lastIndex())
	}
	for _, p := range s.peers {
		if p.role == leader {
			before := p.commit
			p.maybeCommit(s.rd)
			if p.commit > before {
				p.broadcast(s.rd)
			}
		}
	}
	s.applyLocked()
	s.applyTick = false
	s.checkWaitersLocked()
	cbs := s.callbacks
	s.callbacks = nil
	more := len(s.rd.recs) > 0 || len(s.rd.msgs) > 0
	s.flushGen++
	s.mu.Unlock()
	for _, cb := range cbs {
		cb()
	}
	if more {
		s.wake()
	}
}

// applyLocked executes committed entries: leaders at once, followers on
// their (possibly slow) apply ticks, and queues the apply marks.
func (s *Store) applyLocked() {
	for id, p := range s.peers {
		if p.uninit || (p.role != leader && !s.applyTick) {
			continue
		}
		upto := min(p.commit, p.persisted)
		if upto <= p.applied {
			continue
		}
		for i := p.applied + 1; i <= upto; i++ {
			e := p.entryAt(i)
			if e == nil {
				break
			}
			res := s.execLocked(p, e)
			if res.retry {
				break
			}
			if s.peers[id] != p {
				break // destroyed by its own removal
			}
			p.applied = i
			if pr, ok := p.pending[i]; ok {
				delete(p.pending, i)
				if pr.term != e.Term {
					res = applyResult{notLeader: true, err: "entry overwritten by a new leader"}
				}
				r := res
				s.callbacks = append(s.callbacks, func() { pr.finish(r) })
			}
		}
		if s.peers[id] != p {
			continue
		}
		s.rd.recs = append(s.rd.recs, record{Kind: "apply", Region: p.region.GetId(), Applied: p.applied})
		p.applyQueued = p.applied
	}
}

// execLocked runs one entry's command against the store's state.
func (s *Store) execLocked(p *peer, e *entry) applyResult {
	if len(e.Data) == 0 {
		return applyResult{}
	}
	var c command
	if err := json.Unmarshal(e.Data, &c); err != nil {
		return applyResult{err: fmt.Sprintf("decode entry %d: %v", e.Index, err)}
	}
	switch {
	case c.Prewrite != nil:
		return applyResult{keyErrs: s.kv.prewrite(c.Prewrite)}
	case c.Commit != nil:
		if ke := s.kv.commit(c.Commit); ke != nil {
			return applyResult{keyErrs: []*kvrpcpb.KeyError{ke}}
		}
	case c.Rollback != nil:
		if ke := s.kv.rollback(c.Rollback); ke != nil {
			return applyResult{keyErrs: []*kvrpcpb.KeyError{ke}}
		}
	case c.Split != nil:
		return s.execSplitLocked(p, c.Split)
	case c.ChangePeer != nil:
		return s.execChangePeerLocked(p, c.ChangePeer)
	case c.PrepareMerge != nil:
		return s.execPrepareMergeLocked(p, c.PrepareMerge, e.Index)
	case c.CommitMerge != nil:
		return s.execCommitMergeLocked(p, c.CommitMerge)
	case c.RollbackMerge != nil:
		return s.execRollbackMergeLocked(p, c.RollbackMerge)
	case c.CheckTxn != nil:
		return applyResult{status: s.kv.checkTxn(c.CheckTxn)}
	case c.ResolveLock != nil:
		s.kv.resolveLock(c.ResolveLock, p.region.GetStartKey(), p.region.GetEndKey())
	case c.PrepareFlashback != nil:
		p.region.IsInFlashback, p.region.FlashbackStartTs = true, *c.PrepareFlashback
		s.persistRegionLocked(p)
	case c.Flashback != nil:
		s.kv.flashback(c.Flashback)
		p.region.IsInFlashback, p.region.FlashbackStartTs = false, 0
		s.persistRegionLocked(p)
	}
	return applyResult{}
}

func (s *Store) persistRegionLocked(p *peer) {
	if !s.replaying {
		s.rd.recs = append(s.rd.recs, record{Kind: "region", Region: p.region.GetId(), Meta: proto.Clone(p.region).(*metapb.Region), Merge: cloneMerge(p.merging)})
	}
}

func cloneMerge(m *mergeState) *mergeState {
	if m == nil {
		return nil
	}
	return &mergeState{Target: proto.Clone(m.Target).(*metapb.Region), Index: m.Index}
}

// execSplitLocked splits p's region; the right half becomes a new region
// whose peers sit on the same stores. Both epochs' versions grow.
func (s *Store) execSplitLocked(p *peer, c *splitCmd) applyResult {
	r := p.region
	if r.GetRegionEpoch().GetVersion() != c.Version || !keyInRegion(r, c.Key) || bytes.Equal(c.Key, r.GetStartKey()) {
		return applyResult{err: "stale split"}
	}
	right := proto.Clone(r).(*metapb.Region)
	right.Id, right.StartKey = c.NewRegion, c.Key
	for i, x := range right.Peers {
		x.Id = c.NewPeerIDs[i]
	}
	r.EndKey = append([]byte(nil), c.Key...)
	r.RegionEpoch.Version++
	right.RegionEpoch.Version = r.RegionEpoch.Version
	if o := s.peers[right.GetId()]; o != nil && o.uninit {
		delete(s.peers, right.GetId()) // the split initializes it, as in TiKV
	}
	if s.peers[right.GetId()] != nil {
		// Replay: the new peer's own region record came first (it is
		// written while the split applies, before the parent's apply mark).
		return applyResult{}
	}
	// Every replica of the new region starts from the same empty state at
	// term 0, whenever its store applies the split; the parent's leader
	// store campaigns at once. Taking the parent's term and leadership
	// instead would let two stores lead the new region in one term (the
	// parent's leadership may have moved before another store applied the
	// split) and overwrite each other's committed entries.
	np := s.createPeerLocked(right, 0)
	if p.role == leader && !s.replaying {
		np.campaign(s.rd)
	}
	return applyResult{}
}

func keyInRegion(r *metapb.Region, k []byte) bool {
	return bytes.Compare(r.GetStartKey(), k) <= 0 && (len(r.GetEndKey()) == 0 || bytes.Compare(k, r.GetEndKey()) < 0)
}

// leaseActiveLocked reports whether a PrepareSnapshotBackup lease holds.
func (s *Store) leaseActiveLocked() bool { return s.now().Before(s.leaseUntil) }

// errAdminSuspended is returned for admin commands refused under the lease.

// proposeLocked appends cmd to p's log as leader and returns the waiter.
func (s *Store) proposeLocked(p *peer, c command) (*proposal, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	e := entry{Index: p.lastIndex() + 1, Term: p.term, Data: data}
	p.log = append(p.log, e)
	p.dirty = true
	s.rd.recs = append(s.rd.recs, record{Kind: "entries", Region: p.region.GetId(), Entries: []entry{e}})
	pr := &proposal{term: p.term, done: make(chan applyResult, 1)}
	p.pending[e.Index] = pr
	p.broadcast(s.rd)
	s.wake()
	return pr, nil
}

// regionError checks that p can serve a request for ctx as leader.
func (s *Store) regionErrorLocked(p *peer, regionID uint64, epoch *metapb.RegionEpoch) *errorpb.Error {
	if p == nil {
		return &errorpb.Error{Message: "region not found", RegionNotFound: &errorpb.RegionNotFound{RegionId: regionID}}
	}
	if p.uninit {
		return &errorpb.Error{Message: "region not initialized", RegionNotFound: &errorpb.RegionNotFound{RegionId: regionID}}
	}
	if p.merging != nil {
		return errMerging(regionID)
	}
	if p.role != leader {
		return &errorpb.Error{Message: "not leader", NotLeader: &errorpb.NotLeader{RegionId: regionID, Leader: p.leaderPeer()}}
	}
	if epoch != nil && (epoch.GetVersion() != p.region.GetRegionEpoch().GetVersion() || epoch.GetConfVer() != p.region.GetRegionEpoch().GetConfVer()) {
		return &errorpb.Error{Message: "epoch not match", EpochNotMatch: &errorpb.EpochNotMatch{CurrentRegions: []*metapb.Region{proto.Clone(p.region).(*metapb.Region)}}}
	}
	return nil
}

// wait blocks for a proposal's result.
func (s *Store) wait(ctx context.Context, pr *proposal) (applyResult, error) {
	select {
	case r := <-pr.done:
		return r, nil
	case <-ctx.Done():
		return applyResult{}, ctx.Err()
	case <-s.stop:
		return applyResult{}, errors.New("store stopped")
	}
}

// maybeCompact rewrites the wal when it grew large: region states, the
// MVCC data and the log entries some peer may still need.
func (s *Store) maybeCompact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recovery || s.wal.size < s.cfg.CompactBytes || s.leaseActiveLocked() {
		return
	}
	var recs []record
	for id, p := range s.peers {
		if p.uninit {
			continue
		}
		keep := p.applied
		if p.merging != nil {
			keep = 0 // CommitMerge carries the source's log: keep it whole
		}
		if p.role == leader {
			for _, x := range p.region.GetPeers() {
				if x.GetId() != p.selfID {
					keep = min(keep, p.match[x.GetId()])
				}
			}
		}
		if keep >= p.firstIndex {
			t, _ := p.termAt(keep)
			p.log = append([]entry(nil), p.log[keep+1-p.firstIndex:]...)
			p.firstIndex, p.snapTerm = keep+1, t
		}
		recs = append(recs, record{Kind: "region", Region: id, Meta: p.region, FirstIndex: p.firstIndex, SnapTerm: p.snapTerm,
			Applied: p.applied, Term: p.term, Vote: p.vote, Commit: p.commit, Merge: p.merging})
		if len(p.log) > 0 {
			recs = append(recs, record{Kind: "entries", Region: id, Entries: p.log})
		}
	}
	for _, k := range s.kv.sorted {
		recs = append(recs, record{Kind: "kv", Key: []byte(k), Value: s.kv.keys[k]})
	}
	if s.gc.applied > 0 {
		recs = append(recs, record{Kind: "gc", TS: s.gc.applied})
	}
	if s.volumeCluster != 0 {
		recs = append(recs, record{Kind: "ident", ClusterID: s.volumeCluster})
	}
	if err := s.wal.rewrite(recs); err != nil {
		s.log.Error("Compacting wal failed", "err", err)
		return
	}
	// The new file holds everything in memory, so records still queued are
	// redundant (and a queued "new peer" record would wrongly reset a peer
	// on replay): drop them and treat the rewrite as this round's flush.
	s.rd.recs = nil
	for _, p := range s.peers {
		p.persisted, p.dirty = p.lastIndex(), false
		p.applyQueued, p.durableApplied = p.applied, p.applied
	}
	s.wake()
}

// RegionState is one local peer as a test or operator sees it.
type RegionState struct {
	Region          *metapb.Region
	Leader          bool
	Term, LastIndex uint64
	Commit, Applied uint64
	// Merging is set on a merge source between PrepareMerge and its end.
	Merging bool
	// Vote, LeaderID and Role say where an election stands (for diagnostics).
	Vote, LeaderID uint64
	Role           string
}

// Regions lists the store's peers.
func (s *Store) Regions() []RegionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RegionState, 0, len(s.peers))
	for _, p := range s.peers {
		if p.uninit {
			continue
		}
		out = append(out, RegionState{Region: proto.Clone(p.region).(*metapb.Region), Leader: p.role == leader,
			Term: p.term, LastIndex: p.lastIndex(), Commit: p.commit, Applied: p.applied, Merging: p.merging != nil,
			Vote: p.vote, LeaderID: p.leaderID, Role: p.role.String()})
	}
	return out
}

// RejectedAdmin counts scheduler operators refused under a backup lease.
func (s *Store) RejectedAdmin() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejectedAdmin
}
