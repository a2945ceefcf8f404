// Package restoredata is the data phase of a volume-snapshot restore: with every TiKV started
// in recovery mode on restored volumes, it waits for the backup's TiKV stores to come up, holds
// GC below the backup's resolved ts and PD's schedulers paused, reads each store's region
// metadata, plans one leader per region (internal/recovery), raises PD's id allocator past
// every restored id, makes the planned peers leaders (RecoverRegion), flashes the whole key
// space back to the resolved ts, lifts PD's snapshot-recovering mark, and lets GC and the
// schedulers go.
//
// The planning stages are retried as a whole on transient failure (a TiKV restarting, a stream
// aborted by a newer task); a store that restarts after its RecoverRegion gets its plan again;
// flashback is idempotent per region and retries region by region as long as it progresses.
package restoredata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	tikvpb "github.com/pingcap/kvproto/pkg/tikvpb"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/recovery"
	"github.com/fedbr/fedbr/internal/tidb"
)

// PD is what the data phase needs of PD's gRPC API; github.com/tikv/pd/client's Client
// satisfies it.
type PD interface {
	tidb.GCReader
	GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error)
	GetTS(ctx context.Context) (int64, int64, error)
	tidb.RegionPD
}

// PDHTTP is what the data phase needs of PD's HTTP API; github.com/tikv/pd/client/http's Client
// satisfies it.
type PDHTTP interface {
	pause.SchedulePD
	ResetBaseAllocID(ctx context.Context, id uint64) error
	SetSnapshotRecoveringMark(ctx context.Context) error
	DeleteSnapshotRecoveringMark(ctx context.Context) error
}

// Dialer opens a gRPC connection to a TiKV (kvproto's clients take a *grpc.ClientConn).
type Dialer func(ctx context.Context, addr string) (*grpc.ClientConn, error)

// Config tunes the data phase.
type Config struct {
	// ResolvedTS is the backup's resolved ts: the data is flashed back to it.
	ResolvedTS uint64
	// Stores is the number of TiKV stores of the whole cluster the backup had (its backupmeta's
	// tikv.replicas): the phase waits until PD lists that many (less MaxMissingStores), and
	// fails when they do not come up, so a restore never silently runs on part of the cluster.
	Stores int
	// MaxMissingStores tolerates stores that do not come up (tolerateSingleTiKVOutage: 1).
	MaxMissingStores int
	// WaitStoresTimeout bounds the wait for the stores (TiKV in recovery mode takes minutes to
	// start), and how long flashback goes on without progress — a store that restarted must
	// come back within it (default 30m).
	WaitStoresTimeout time.Duration
	// Poll is how often PD's store list is read while waiting for the stores and while
	// watching them for restarts (default 2s).
	Poll time.Duration
	// HoldTTL bounds the GC hold and the scheduler pause kept over the phase: a killed step
	// lets both lapse within it (default 5m, BR's).
	HoldTTL time.Duration
	// Attempts bounds whole-procedure retries of the planning stages (default 5).
	Attempts int
	// Backoff is the wait between attempts and between region retries (default 1s).
	Backoff time.Duration
	// Concurrency bounds parallel region requests during flashback (default 16).
	Concurrency int
	// LeaderTimeout bounds an attempt's wait for its planned leaders, times the attempt's
	// number (default 2m: 2, 4, 6 … minutes). TiKV only campaigns for a planned peer, so one
	// whose log is behind a quorum's never wins and the wait would never end; its campaigns
	// raise the other peers' terms to its own, so the next attempt's fresh metas rank the
	// region's peers by their logs and plan a leader that can win.
	LeaderTimeout time.Duration
	// Unsafe removes safeguards, for negative controls only: tests set it to show that the
	// checker catches each safeguard's absence. No fedbr command sets it.
	Unsafe Unsafe
}

// Unsafe lists the data phase's safeguards that a negative control can remove.
type Unsafe struct {
	// EncodedKeys sends PD's region boundaries to TiKV as they are (memcomparable-encoded)
	// instead of decoding them into the raw keys TiKV takes: the key space is walked in PD's
	// encoded form throughout, as an engine without the decoding would.
	EncodedKeys bool
	// NoFlashback skips prepare-flashback and flashback: data newer than ResolvedTS stays.
	NoFlashback bool
	// WorstLeaders asks, for every region, the peer with the shortest log to lead instead of
	// the planner's choice.
	WorstLeaders bool
	// NoReplan does not watch the stores for restarts: a store that restarts after its
	// RecoverRegion keeps the regions it was to lead leaderless.
	NoReplan bool
}

// ErrLeadersNotElected fails the data phase when, after every attempt, some planned leader
// still did not lead: raft's vote rule keeps a peer whose log is behind a quorum's from
// winning, so a wrong plan stalls instead of overwriting committed entries.
var ErrLeadersNotElected = errors.New("the planned leaders were not all elected")

// Deps are the clients the data phase uses.
type Deps struct {
	PD   PD
	HTTP PDHTTP
	Dial Dialer
	Log  func(format string, args ...any)
	// Report receives the machine-readable status on every phase change and attempt; nil
	// drops it.
	Report func(Status)
}

// Status is the state of the data phase, for the member's status.steps.
type Status struct {
	Phase string `json:"phase"`
	// ResolvedTS is the ts the data is flashed back to.
	ResolvedTS uint64 `json:"resolvedTS,omitempty"`
	// Attempt is the current attempt of the planning stages (from RecoveringRegions on).
	Attempt int `json:"attempt,omitempty"`
	// Regions is the number of regions planned, once known.
	Regions int `json:"regions,omitempty"`
	// Error says why the data phase failed (phase Failed only).
	Error string `json:"error,omitempty"`
	// StartedAt and CompletedAt bound the step's own work on PD and TiKV, so whoever ran it
	// can tell that work from the orchestration around it.
	StartedAt   time.Time `json:"startedAt,omitzero"`
	CompletedAt time.Time `json:"completedAt,omitzero"`
}

// Phases reported in Status, in the order they happen.
const (
	// PhaseStarting: checking the configuration.
	PhaseStarting = report.PhaseStarting
	// PhaseWaitingForStores: waiting for the backup's TiKV stores to come up.
	PhaseWaitingForStores = report.PhaseWaitingForStores
	// PhaseRecoveringRegions: reading region metas, planning leaders, raising PD's id
	// allocator and making the leaders; retried as a whole (Attempt).
	PhaseRecoveringRegions = report.PhaseRecoveringRegions
	// PhaseFlashingBack: flashing every region back to ResolvedTS, then lifting PD's
	// snapshot-recovering mark.
	PhaseFlashingBack = report.PhaseFlashingBack
	// PhaseCompleted: the cluster holds exactly the data at ResolvedTS.
	PhaseCompleted = report.PhaseCompleted
	// PhaseFailed: the data phase failed (see Error).
	PhaseFailed = report.PhaseFailed
)

// Result summarises a data phase.
type Result struct {
	// ResolvedTS is the ts every region was flashed back to (the Config's): the agent reports it
	// as its member's status.restoredTS, which the manager checks against what it decided.
	ResolvedTS   uint64   `json:"resolvedTS"`
	Regions      int      `json:"regions"`
	Leaders      int      `json:"leaders"`
	Dropped      int      `json:"droppedRegions"`
	MaxAllocID   uint64   `json:"maxAllocID"`
	RestoreTS    uint64   `json:"restoreTS"`
	Attempts     int      `json:"attempts"`
	MissingStore []uint64 `json:"missingStores,omitempty"`
}

// Run runs the data phase.
func Run(ctx context.Context, d Deps, cfg Config) (Result, error) {
	if d.Report == nil {
		d.Report = func(Status) {}
	}
	started := time.Now()
	report := func(phase string, res *Result, err error) {
		st := Status{Phase: phase, ResolvedTS: cfg.ResolvedTS, Attempt: res.Attempts, Regions: res.Regions, StartedAt: started}
		if err != nil {
			st.Error = err.Error()
		}
		if phase == PhaseCompleted {
			st.CompletedAt = time.Now()
		}
		d.Report(st)
	}
	report(PhaseStarting, &Result{}, nil)
	res, err := runPhases(ctx, d, cfg, func(phase string, res *Result) { report(phase, res, nil) })
	if err != nil {
		report(PhaseFailed, &res, err)
	} else {
		report(PhaseCompleted, &res, nil)
	}
	return res, err
}

// runPhases runs the data phase, reporting each phase as it starts.
func runPhases(ctx context.Context, d Deps, cfg Config, report func(phase string, res *Result)) (_ Result, retErr error) {
	if cfg.ResolvedTS == 0 {
		return Result{}, errors.New("resolved ts is 0: read it from the backup's backupmeta")
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.LeaderTimeout <= 0 {
		cfg.LeaderTimeout = 2 * time.Minute
	}
	if cfg.WaitStoresTimeout <= 0 {
		cfg.WaitStoresTimeout = 30 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.HoldTTL <= 0 {
		cfg.HoldTTL = 5 * time.Minute
	}
	if d.Log == nil {
		d.Log = func(string, ...any) {}
	}
	r := &run{d: d, cfg: cfg, conns: map[uint64]*conn{}, regions: tidb.NewRegionScanner(d.PD, tidb.RegionScanOptions{Log: d.Log})}
	defer r.close()
	// restore-volumes marked PD snapshot-recovering; an earlier attempt of this step that got as
	// far as lifting the mark and was then killed before it reported leaves it lifted, and PD
	// resets its id allocator only while it is marked. Marking again (idempotent in PD) makes
	// the whole phase safe to run again: the TiKVs stay in recovery mode until restore-finish
	// restarts them, and flashback to the same ts is idempotent per region.
	if err := d.HTTP.SetSnapshotRecoveringMark(ctx); err != nil {
		return Result{}, fmt.Errorf("mark PD snapshot-recovering: %w", err)
	}
	report(PhaseWaitingForStores, &Result{})
	stores, err := r.waitStores(ctx)
	if err != nil {
		return Result{}, err
	}
	// PD must not move a region or its leader away from the planned ones, and GC must keep
	// every version the flashback reads: at the resolved ts and above.
	h, err := pause.HoldGCAndSchedules(ctx, pause.HolderDeps{PD: d.PD, HTTP: d.HTTP, Log: d.Log},
		pause.HolderConfig{TS: cfg.ResolvedTS, TTL: cfg.HoldTTL, Stores: len(stores)})
	if err != nil {
		return Result{}, fmt.Errorf("hold GC and PD's schedulers: %w", err)
	}
	defer func() {
		// Lifted on failure and on SIGTERM too: ctx may be done, the lift gets its own bound.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.HoldTTL)
		defer cancel()
		retErr = errors.Join(retErr, h.Release(lctx))
	}()
	res, err := r.recoverAndFlashBack(h.Context(), report)
	return res, h.Cause(err)
}

// recoverAndFlashBack runs the attempts of the planning stages, then the flashback, then lifts
// PD's snapshot-recovering mark.
func (r *run) recoverAndFlashBack(ctx context.Context, report func(phase string, res *Result)) (Result, error) {
	defer r.close() // the watcher stops with the phase, before GC and the schedulers go
	d, cfg := r.d, r.cfg
	res := Result{ResolvedTS: cfg.ResolvedTS}
	var err error
	for res.Attempts = 1; res.Attempts <= cfg.Attempts; res.Attempts++ {
		report(PhaseRecoveringRegions, &res)
		if err = r.recoverRegions(ctx, &res); err == nil {
			break
		}
		if ctx.Err() != nil {
			return res, err
		}
		d.Log("Recovering regions failed (attempt %d of %d), retrying from the region metas: %v", res.Attempts, cfg.Attempts, err)
		r.close()
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(cfg.Backoff):
		}
	}
	if err != nil {
		return res, fmt.Errorf("recover regions: %w", err)
	}

	physical, logical, err := d.PD.GetTS(ctx)
	if err != nil {
		return res, fmt.Errorf("get restore ts: %w", err)
	}
	if res.RestoreTS, err = tidb.ComposeTS(physical, logical); err != nil {
		return res, fmt.Errorf("get restore ts: %w", err)
	}
	if res.RestoreTS <= cfg.ResolvedTS {
		return res, fmt.Errorf("PD's TSO %d is not above the resolved ts %d: restore-volumes must reset it first", res.RestoreTS, cfg.ResolvedTS)
	}
	report(PhaseFlashingBack, &res)
	if cfg.Unsafe.NoFlashback {
		d.Log("Skipping the flashback (negative control)")
	} else {
		d.Log("Flashing back every region to %d (restore ts %d)", cfg.ResolvedTS, res.RestoreTS)
		if err := r.flashback(ctx, res.RestoreTS); err != nil {
			return res, fmt.Errorf("flashback: %w", err)
		}
	}
	if err := d.HTTP.DeleteSnapshotRecoveringMark(ctx); err != nil {
		return res, fmt.Errorf("lift PD's snapshot-recovering mark: %w", err)
	}
	d.Log("Data phase done: %d regions, %d dropped, flashed back to %d", res.Regions, res.Dropped, cfg.ResolvedTS)
	return res, nil
}

type conn struct {
	cc *grpc.ClientConn
}

type run struct {
	d   Deps
	cfg Config
	// watcher watches the stores of the current attempt's plan for restarts.
	watcher *watcher
	mu      sync.Mutex
	conns   map[uint64]*conn
	// stores are the TiKV stores as last listed, by id: where each is dialled.
	stores map[uint64]*metapb.Store
	// regions scans PD's regions in pages.
	regions *tidb.RegionScanner
}

// close stops the watcher and closes every connection (between attempts and at the end).
func (r *run) close() {
	r.watcher.close()
	r.watcher = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.conns {
		_ = c.cc.Close()
		delete(r.conns, id)
	}
}

func (r *run) dial(ctx context.Context, s *metapb.Store) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[s.GetId()]; ok {
		return c.cc, nil
	}
	cc, err := r.d.Dial(ctx, s.GetAddress())
	if err != nil {
		return nil, fmt.Errorf("dial store %d at %s: %w", s.GetId(), s.GetAddress(), err)
	}
	r.conns[s.GetId()] = &conn{cc: cc}
	return cc, nil
}

// recoverRegions collects the metas, plans, raises PD's id allocator and makes the planned
// leaders. Any failure makes the caller start over from fresh metas.
func (r *run) recoverRegions(ctx context.Context, res *Result) error {
	stores, err := r.listStores(ctx)
	if err != nil {
		return err
	}
	metas, answered, err := r.readMetas(ctx, stores)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(stores))
	for _, s := range stores {
		ids = append(ids, s.GetId())
	}
	plan, err := recovery.Plan(recovery.Input{Stores: ids, Metas: metas, Reported: answered, MaxMissingStores: r.cfg.MaxMissingStores})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if r.cfg.Unsafe.WorstLeaders {
		plan = worstLeaders(plan, metas)
	}
	res.Regions, res.Dropped, res.MaxAllocID, res.MissingStore = plan.Regions, len(plan.Dropped), plan.MaxAllocID, plan.MissingStores
	res.Leaders = 0
	for _, n := range plan.Leaders {
		res.Leaders += n
	}
	r.d.Log("Planned %d regions (%d stale ones dropped) over %d stores; raising PD's id allocator to %d", plan.Regions, len(plan.Dropped), len(stores), plan.MaxAllocID)
	if err := r.d.HTTP.ResetBaseAllocID(ctx, plan.MaxAllocID); err != nil {
		return fmt.Errorf("raise PD's id allocator to %d: %w", plan.MaxAllocID, err)
	}
	r.watcher = r.watch(ctx, plan)
	wait := r.cfg.LeaderTimeout * time.Duration(max(res.Attempts, 1))
	sctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = r.sendPlan(sctx, stores, plan)
	// The bound is judged by the clock, not by sctx.Err(): TiKV ends the stream at the deadline
	// it was sent, and its answer can arrive before sctx's own timer has fired.
	if d, _ := sctx.Deadline(); err != nil && ctx.Err() == nil && !time.Now().Before(d) {
		return fmt.Errorf("%w: not all led and applied within %s (a planned peer whose log is behind cannot win its election): %w", ErrLeadersNotElected, wait, err)
	}
	return err
}

// listStores lists the TiKV stores, checks their number against the backup and records them.
func (r *run) listStores(ctx context.Context) ([]*metapb.Store, error) {
	out, err := tidb.TiKVStores(ctx, r.d.PD)
	if err != nil {
		return nil, err
	}
	if len(out) < r.cfg.Stores-r.cfg.MaxMissingStores {
		return nil, fmt.Errorf("PD knows %d TiKV stores, the backup had %d (at most %d may be missing)", len(out), r.cfg.Stores, r.cfg.MaxMissingStores)
	}
	r.setStores(out)
	return out, nil
}

// readMetas reads every store's region metas concurrently, and lists the stores that answered
// (an empty store answers with no meta). A store that cannot answer is left out: the planner
// decides whether that is tolerable.
//
// The metas are what restore-data holds most of: three per region. They go into one Metas a
// batch at a time as they arrive, their keys shared (a region's peers report the same two keys,
// and a region's end is the next one's start), so a million regions cost about a third of what
// a list per store, then one of all, with every key as the stores sent it, did (issue 44).
func (r *run) readMetas(ctx context.Context, stores []*metapb.Store) (*recovery.Metas, []uint64, error) {
	var (
		mu       sync.Mutex
		metas    = &recovery.Metas{}
		keys     = map[string][]byte{}
		answered []uint64
		wg       sync.WaitGroup
		errs     []error
	)
	add := func(batch []recovery.RegionMeta) {
		mu.Lock()
		defer mu.Unlock()
		for i := range batch {
			batch[i].StartKey, batch[i].EndKey = intern(keys, batch[i].StartKey), intern(keys, batch[i].EndKey)
		}
		metas.Append(batch...)
	}
	failed := map[uint64]bool{}
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.readStore(ctx, s, add)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				failed[s.GetId()] = true
				return
			}
			answered = append(answered, s.GetId())
		}()
	}
	wg.Wait()
	if len(errs) > r.cfg.MaxMissingStores {
		return nil, nil, errors.Join(errs...)
	}
	for _, err := range errs {
		r.d.Log("Leaving a store out (tolerated): %v", err)
	}
	if len(failed) > 0 {
		// A store left out counts as missing: none of the metas it sent before it broke is a peer.
		metas.Keep(func(m *recovery.RegionMeta) bool { return !failed[m.StoreID] })
	}
	return metas, answered, nil
}

// intern returns the copy of key held in keys, adding key when there is none.
func intern(keys map[string][]byte, key []byte) []byte {
	if k, ok := keys[string(key)]; ok {
		return k
	}
	keys[string(key)] = key
	return key
}

// metaBatch is how many metas a store's reader collects before adding them to the rest.
const metaBatch = 1024

// readStore reads one store's region metas and hands them to add a batch at a time. A store
// whose stream breaks may have added some already: the caller drops them.
func (r *run) readStore(ctx context.Context, s *metapb.Store, add func([]recovery.RegionMeta)) error {
	cc, err := r.dial(ctx, s)
	if err != nil {
		return err
	}
	stream, err := recoverdatapb.NewRecoverDataClient(cc).ReadRegionMeta(ctx, &recoverdatapb.ReadRegionMetaRequest{StoreId: s.GetId()})
	if err != nil {
		return fmt.Errorf("read region metas of store %d: %w", s.GetId(), err)
	}
	batch := make([]recovery.RegionMeta, 0, metaBatch)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			add(batch)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read region metas of store %d: %w", s.GetId(), err)
		}
		batch = append(batch, recovery.RegionMeta{
			StoreID: s.GetId(), RegionID: m.GetRegionId(), PeerID: m.GetPeerId(),
			LastLogTerm: m.GetLastLogTerm(), LastIndex: m.GetLastIndex(), CommitIndex: m.GetCommitIndex(),
			Version: m.GetVersion(), Tombstone: m.GetTombstone(), StartKey: m.GetStartKey(), EndKey: m.GetEndKey(),
		})
		if len(batch) == metaBatch {
			add(batch)
			batch = batch[:0]
		}
	}
}

// sendPlan sends every store its RecoverRegion commands; each call returns once the store's
// planned leaders lead and applied their whole log.
func (r *run) sendPlan(ctx context.Context, stores []*metapb.Store, plan recovery.Result) error {
	byID := map[uint64]*metapb.Store{}
	for _, s := range stores {
		byID[s.GetId()] = s
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for id, cmds := range plan.Commands {
		if plan.Leaders[id] == 0 {
			continue // nothing to lead: TiKV ignores follower entries anyway
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.sendStore(ctx, byID[id], cmds); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			r.watcher.sent(byID[id])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// noReplayBuffer turns off gRPC's replay buffer for a store's RecoverRegion stream. Until a
// stream's server answers, gRPC keeps every message sent on it to replay on a transparent
// retry, up to 256 KiB of their encoded size; a RecoverRegion command encodes to a few bytes, so
// a store's whole plan stayed held, each message with its buffers: 470 MiB over a million
// regions (a heap profile of bench-scale, issue 44). A stream that breaks fails the attempt,
// which reads the metas again anyway.
const noReplayBuffer = 0

func (r *run) sendStore(ctx context.Context, s *metapb.Store, cmds []recovery.Command) error {
	cc, err := r.dial(ctx, s)
	if err != nil {
		return err
	}
	stream, err := recoverdatapb.NewRecoverDataClient(cc).RecoverRegion(ctx, grpc.MaxRetryRPCBufferSize(noReplayBuffer))
	if err != nil {
		return fmt.Errorf("recover regions on store %d: %w", s.GetId(), err)
	}
	for _, c := range cmds {
		if err := stream.Send(&recoverdatapb.RecoverRegionRequest{RegionId: c.RegionID, AsLeader: c.AsLeader, Tombstone: c.Tombstone}); err != nil {
			if errors.Is(err, io.EOF) {
				// The store ended the stream before reading the whole plan: io.EOF only says
				// so, the stream's status says why.
				break
			}
			return fmt.Errorf("send recovery plan to store %d: %w", s.GetId(), err)
		}
	}
	return recoverRegionStatus(s.GetId(), stream)
}

// recoverRegionStatus half-closes a RecoverRegion stream and reads the store's final answer:
// its gRPC status, or the error in its response. Either fails the store's recovery.
func recoverRegionStatus(id uint64, stream recoverdatapb.RecoverData_RecoverRegionClient) error {
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("recover regions on store %d: %w", id, err)
	}
	if e := resp.GetError(); e != nil {
		msg := e.GetMsg()
		if msg == "" {
			msg = "an error without a message"
		}
		return fmt.Errorf("recover regions on store %d: the store answered %s", id, msg)
	}
	return nil
}

// flashback runs prepare, then flashback, over the whole key space, region by region on each
// region's leader, reloading a range from PD when its region moved.
func (r *run) flashback(ctx context.Context, restoreTS uint64) error {
	stores, err := r.d.PD.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return fmt.Errorf("list stores: %w", err)
	}
	r.setStores(stores)
	for _, prepare := range []bool{true, false} {
		step := "flashback"
		if prepare {
			step = "prepare flashback"
		}
		if err := r.overKeySpace(ctx, func(ctx context.Context, kv tikvpb.TikvClient, rc *kvrpcpb.Context, start, end []byte) (regionErr string, err error) {
			if prepare {
				resp, err := kv.KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{
					Context: rc, StartKey: start, EndKey: end, StartTs: restoreTS - 1, Version: r.cfg.ResolvedTS})
				if err != nil {
					return "", err
				}
				if err := outsideRegion(resp.GetRegionError(), rc, start, end); err != nil {
					return "", err
				}
				return regionError(resp.GetRegionError(), resp.GetError()), nil
			}
			resp, err := kv.KvFlashbackToVersion(ctx, &kvrpcpb.FlashbackToVersionRequest{
				Context: rc, StartKey: start, EndKey: end, StartTs: restoreTS - 1, CommitTs: restoreTS, Version: r.cfg.ResolvedTS})
			if err != nil {
				return "", err
			}
			if resp.GetRegionError().GetFlashbackNotPrepared() != nil {
				return "", nil // already flashed back and finished by an earlier attempt
			}
			if err := outsideRegion(resp.GetRegionError(), rc, start, end); err != nil {
				return "", err
			}
			return regionError(resp.GetRegionError(), resp.GetError()), nil
		}); err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		r.d.Log("%s done", step)
	}
	return nil
}

// worstLeaders is the WorstLeaders negative control: every region that has a planned leader is
// led instead by its peer with the shortest log (lowest last index), the one raft's vote rule
// refuses when the others are ahead.
func worstLeaders(plan recovery.Result, metas *recovery.Metas) recovery.Result {
	worst := map[uint64]recovery.RegionMeta{}
	for i := range metas.Len() {
		m := *metas.At(i)
		if w, ok := worst[m.RegionID]; !ok || m.LastIndex < w.LastIndex {
			worst[m.RegionID] = m
		}
	}
	out := plan
	out.Commands, out.Leaders = map[uint64][]recovery.Command{}, map[uint64]int{}
	for store, cmds := range plan.Commands {
		for _, c := range cmds {
			if c.AsLeader {
				c.AsLeader = false
				w := worst[c.RegionID]
				out.Commands[w.StoreID] = append(out.Commands[w.StoreID], recovery.Command{RegionID: c.RegionID, AsLeader: true})
				out.Leaders[w.StoreID]++
			}
			if !c.AsLeader && (c.Tombstone || worst[c.RegionID].StoreID != store) {
				out.Commands[store] = append(out.Commands[store], c)
			}
		}
	}
	return out
}
