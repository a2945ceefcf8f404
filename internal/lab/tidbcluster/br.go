package tidbcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// This file is a minimal reference of BR's side of the protocol (pause and
// prepare for backup; the data phase of restore), driving the doubles with
// the real clients. It exists to prove the doubles right — the negative
// controls skip one step each — and is not fedbr's BR engine.

// Pause is a held backup preparation: schedulers paused, GC pinned, and a
// PrepareSnapshotBackup lease on every store with every leader applied.
type Pause struct {
	pd      pd.Client
	http    pdhttp.Client
	streams []brpb.Backup_PrepareSnapshotBackupClient
	conns   []*grpc.ClientConn
	paused  []string
}

var pauseSchedulers = []string{"balance-leader-scheduler", "balance-region-scheduler", "balance-hot-region-scheduler"}

// Prepare pauses schedulers and config for ttl, takes the lease on every
// store and waits until every region's leader applied its log.
func Prepare(ctx context.Context, pdAddr string, ttl time.Duration) (*Pause, error) {
	c, err := pd.NewClientWithContext(ctx, []string{pdAddr}, pd.SecurityOption{})
	if err != nil {
		return nil, fmt.Errorf("connect pd: %w", err)
	}
	p := &Pause{pd: c, http: pdhttp.NewClient("lab-br", []string{pdAddr})}
	secs := int64(ttl.Seconds())
	for _, n := range pauseSchedulers {
		if err := p.http.SetSchedulerDelay(ctx, n, secs); err != nil {
			p.Close(ctx)
			return nil, fmt.Errorf("pause %s: %w", n, err)
		}
		p.paused = append(p.paused, n)
	}
	if err := p.http.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0, "schedule.leader-schedule-limit": 0,
		"schedule.region-schedule-limit": 0, "schedule.enable-tikv-split-region": false}, ttl.Seconds()); err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("pause config: %w", err)
	}
	stores, err := c.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("get stores: %w", err)
	}
	byStore := map[uint64]brpb.Backup_PrepareSnapshotBackupClient{}
	for _, st := range stores {
		cc, err := grpc.NewClient(st.GetAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			p.Close(ctx)
			return nil, err
		}
		p.conns = append(p.conns, cc)
		s, err := brpb.NewBackupClient(cc).PrepareSnapshotBackup(context.WithoutCancel(ctx))
		if err != nil {
			p.Close(ctx)
			return nil, fmt.Errorf("prepare store %d: %w", st.GetId(), err)
		}
		if err := s.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: uint64(secs)}); err != nil {
			p.Close(ctx)
			return nil, fmt.Errorf("lease store %d: %w", st.GetId(), err)
		}
		if r, err := s.Recv(); err != nil || r.GetTy() != brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult {
			p.Close(ctx)
			return nil, fmt.Errorf("lease store %d (answer %v): %w", st.GetId(), r, err)
		}
		p.streams = append(p.streams, s)
		byStore[st.GetId()] = s
	}
	if err := p.waitApply(ctx, byStore); err != nil {
		p.Close(ctx)
		return nil, err
	}
	return p, nil
}

// waitApply sends WaitApply for every region to its leader's store until
// the done ranges cover the whole key space.
func (p *Pause) waitApply(ctx context.Context, byStore map[uint64]brpb.Backup_PrepareSnapshotBackupClient) error {
	for attempt := 0; ; attempt++ {
		if attempt > 50 {
			return errors.New("wait apply: retry limit exceeded")
		}
		rs, err := p.pd.ScanRegions(ctx, nil, nil, 0) //nolint:staticcheck // reference implementation, kept as upstream BR scans
		if err != nil {
			return fmt.Errorf("scan regions: %w", err)
		}
		sent := 0
		want := map[uint64]*metapb.Region{}
		for _, r := range rs {
			s := byStore[r.Leader.GetStoreId()]
			if s == nil {
				continue
			}
			want[r.Meta.GetId()] = r.Meta
			if err := s.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_WaitApply, Regions: []*metapb.Region{r.Meta}}); err != nil {
				return fmt.Errorf("wait apply: %w", err)
			}
			sent++
		}
		var done []*metapb.Region
		failed := false
		var mu sync.Mutex
		var wg sync.WaitGroup
		counts := map[brpb.Backup_PrepareSnapshotBackupClient]int{}
		for _, r := range rs {
			if s := byStore[r.Leader.GetStoreId()]; s != nil {
				counts[s]++
			}
		}
		for s, n := range counts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					resp, err := s.Recv()
					mu.Lock()
					if err != nil || resp.GetError() != nil {
						failed = true
					} else if w := want[resp.GetRegion().GetId()]; w != nil {
						done = append(done, w)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		if !failed && sent == len(rs) && covers(done) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// covers reports whether regions tile the whole key space.
func covers(rs []*metapb.Region) bool {
	sort.Slice(rs, func(i, j int) bool { return bytes.Compare(rs[i].GetStartKey(), rs[j].GetStartKey()) < 0 })
	var end []byte
	for i, r := range rs {
		if (i == 0 && len(r.GetStartKey()) != 0) || (i > 0 && !bytes.Equal(r.GetStartKey(), end)) {
			return false
		}
		end = r.GetEndKey()
		if len(end) == 0 {
			return i == len(rs)-1
		}
	}
	return false
}

// ResolvedTS reads PD's min resolved ts (the backup ts).
func (p *Pause) ResolvedTS(ctx context.Context) (uint64, error) {
	ts, _, err := p.http.GetMinResolvedTSByStoresIDs(ctx, nil)
	return ts, err
}

// Close finishes every lease and resumes the schedulers.
func (p *Pause) Close(ctx context.Context) {
	for _, s := range p.streams {
		_ = s.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish})
		for {
			if _, err := s.Recv(); err != nil {
				break
			}
		}
	}
	for _, n := range p.paused {
		_ = p.http.SetSchedulerDelay(ctx, n, 0)
	}
	_ = p.http.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0, "schedule.leader-schedule-limit": 0,
		"schedule.region-schedule-limit": 0, "schedule.enable-tikv-split-region": false}, 0)
	for _, cc := range p.conns {
		_ = cc.Close()
	}
	p.http.Close()
	p.pd.Close()
}

// RestoreOptions shapes the reference data phase.
type RestoreOptions struct {
	// ResolvedTS is the backup ts to flash back to.
	ResolvedTS uint64
	// SkipFlashback is a negative control: leave data newer than ResolvedTS.
	SkipFlashback bool
	// WorstLeader is a negative control: elect the peer with the lowest
	// (term, last index) instead of the highest.
	WorstLeader bool
	// ResolveKV uses the v6.3 data phase (WaitApply, then ResolveKvData on
	// every store) instead of flashback.
	ResolveKV bool
}

// RecoverData runs BR's data phase against stores started in recovery
// mode: read region metas, elect one leader per region, reset PD's id
// allocator, RecoverRegion, flashback to the resolved ts, unmark PD.
//
//nolint:gocyclo // a reference walk through BR's data phase, kept in one piece on purpose
func RecoverData(ctx context.Context, pdAddr string, o RestoreOptions) error {
	c, err := pd.NewClientWithContext(ctx, []string{pdAddr}, pd.SecurityOption{})
	if err != nil {
		return fmt.Errorf("connect pd: %w", err)
	}
	defer c.Close()
	h := pdhttp.NewClient("lab-br", []string{pdAddr})
	defer h.Close()
	stores, err := c.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return fmt.Errorf("get stores: %w", err)
	}
	type meta struct {
		m     *recoverdatapb.RegionMeta
		store uint64
	}
	byRegion := map[uint64][]meta{}
	conns := map[uint64]*grpc.ClientConn{}
	defer func() {
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	var maxID uint64
	for _, st := range stores {
		cc, err := grpc.NewClient(st.GetAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		conns[st.GetId()] = cc
		maxID = max(maxID, st.GetId())
		rs, err := recoverdatapb.NewRecoverDataClient(cc).ReadRegionMeta(ctx, &recoverdatapb.ReadRegionMetaRequest{StoreId: st.GetId()})
		if err != nil {
			return fmt.Errorf("read region meta of store %d: %w", st.GetId(), err)
		}
		for {
			m, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read region meta of store %d: %w", st.GetId(), err)
			}
			byRegion[m.GetRegionId()] = append(byRegion[m.GetRegionId()], meta{m, st.GetId()})
			maxID = max(maxID, m.GetRegionId(), m.GetPeerId())
		}
	}
	// Leader per region: highest (term, last index); overlaps: higher version wins.
	type choice struct {
		best  meta
		start []byte
		end   []byte
	}
	var cands []choice
	for _, ms := range byRegion {
		sort.Slice(ms, func(i, j int) bool {
			a, b := ms[i].m, ms[j].m
			if a.GetLastLogTerm() != b.GetLastLogTerm() {
				return a.GetLastLogTerm() > b.GetLastLogTerm()
			}
			return a.GetLastIndex() > b.GetLastIndex()
		})
		best := ms[0]
		if o.WorstLeader {
			best = ms[len(ms)-1]
		}
		cands = append(cands, choice{best: best, start: best.m.GetStartKey(), end: best.m.GetEndKey()})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].best.m.GetVersion() > cands[j].best.m.GetVersion() })
	var accepted []choice
	for _, cd := range cands {
		ok := true
		for _, a := range accepted {
			if (len(a.end) == 0 || bytes.Compare(cd.start, a.end) < 0) && (len(cd.end) == 0 || bytes.Compare(a.start, cd.end) < 0) {
				ok = false
			}
		}
		if ok {
			accepted = append(accepted, cd)
		}
	}
	if err := h.ResetBaseAllocID(ctx, maxID); err != nil {
		return fmt.Errorf("reset alloc id: %w", err)
	}
	plan := map[uint64][]uint64{}
	for _, a := range accepted {
		plan[a.best.store] = append(plan[a.best.store], a.best.m.GetRegionId())
	}
	errs := make(chan error, len(plan))
	for st, ids := range plan {
		go func() {
			rr, err := recoverdatapb.NewRecoverDataClient(conns[st]).RecoverRegion(ctx)
			if err == nil {
				for _, id := range ids {
					if err = rr.Send(&recoverdatapb.RecoverRegionRequest{RegionId: id, AsLeader: true}); err != nil {
						break
					}
				}
			}
			if err == nil {
				_, err = rr.CloseAndRecv()
			}
			if err != nil {
				err = fmt.Errorf("recover regions on store %d: %w", st, err)
			}
			errs <- err
		}()
	}
	for range plan {
		if err := <-errs; err != nil {
			return err
		}
	}
	switch {
	case o.SkipFlashback:
	case o.ResolveKV:
		if err := resolveKV(ctx, conns, o.ResolvedTS); err != nil {
			return err
		}
	default:
		if err := flashback(ctx, c, conns, o.ResolvedTS); err != nil {
			return err
		}
	}
	if err := h.DeleteSnapshotRecoveringMark(ctx); err != nil {
		return fmt.Errorf("unmark: %w", err)
	}
	return nil
}

// resolveKV waits for every store's leaders to apply, then deletes
// everything newer than ts on every store.
func resolveKV(ctx context.Context, conns map[uint64]*grpc.ClientConn, ts uint64) error {
	for id, cc := range conns {
		rc := recoverdatapb.NewRecoverDataClient(cc)
		if _, err := rc.WaitApply(ctx, &recoverdatapb.WaitApplyRequest{StoreId: id}); err != nil {
			return fmt.Errorf("wait apply on store %d: %w", id, err)
		}
	}
	for id, cc := range conns {
		s, err := recoverdatapb.NewRecoverDataClient(cc).ResolveKvData(ctx, &recoverdatapb.ResolveKvDataRequest{ResolvedTs: ts})
		if err != nil {
			return fmt.Errorf("resolve kv data on store %d: %w", id, err)
		}
		for {
			if _, err := s.Recv(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("resolve kv data on store %d: %w", id, err)
			}
		}
	}
	return nil
}

// flashback runs prepare then flashback on every region's leader.
func flashback(ctx context.Context, c pd.Client, conns map[uint64]*grpc.ClientConn, version uint64) error {
	p, l, err := c.GetTS(ctx)
	if err != nil {
		return err
	}
	restoreTS := uint64(p)<<18 | uint64(l)
	for _, phase := range []string{"prepare", "flashback"} {
		key := []byte{}
		for {
			r, err := c.GetRegion(ctx, key)
			if err != nil || r == nil || r.Leader == nil || r.Leader.GetStoreId() == 0 {
				if err := sleep(ctx); err != nil {
					return fmt.Errorf("%s at %q: locate: %w", phase, key, err)
				}
				continue
			}
			kv := tikvpb.NewTikvClient(conns[r.Leader.GetStoreId()])
			rc := &kvrpcpb.Context{RegionId: r.Meta.GetId(), RegionEpoch: r.Meta.GetRegionEpoch(), Peer: r.Leader}
			// PD's boundaries are encoded; TiKV takes raw keys.
			start, err := codec.DecodeBoundary(r.Meta.GetStartKey())
			if err != nil {
				return err
			}
			end, err := codec.DecodeBoundary(r.Meta.GetEndKey())
			if err != nil {
				return err
			}
			var rerr interface{ GetMessage() string }
			if phase == "prepare" {
				resp, err := kv.KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{Context: rc, StartKey: start, EndKey: end, StartTs: restoreTS - 1, Version: version})
				if err != nil {
					return fmt.Errorf("prepare flashback: %w", err)
				}
				if resp.GetRegionError() != nil {
					rerr = resp.GetRegionError()
				}
			} else {
				resp, err := kv.KvFlashbackToVersion(ctx, &kvrpcpb.FlashbackToVersionRequest{Context: rc, StartKey: start, EndKey: end, StartTs: restoreTS - 1, CommitTs: restoreTS, Version: version})
				if err != nil {
					return fmt.Errorf("flashback: %w", err)
				}
				if resp.GetRegionError() != nil && resp.GetRegionError().GetFlashbackNotPrepared() == nil {
					rerr = resp.GetRegionError()
				}
			}
			if rerr != nil {
				if err := sleep(ctx); err != nil {
					return fmt.Errorf("%s region %d: %s: %w", phase, r.Meta.GetId(), rerr.GetMessage(), err)
				}
				continue
			}
			if len(r.Meta.GetEndKey()) == 0 {
				break
			}
			key = r.Meta.GetEndKey()
		}
	}
	return nil
}

func sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}
