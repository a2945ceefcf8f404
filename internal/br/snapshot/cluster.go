package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"

	"github.com/fedbr/fedbr/internal/tidb"
)

// PD is what the cluster check needs of PD's gRPC API; github.com/tikv/pd/client's Client
// satisfies it.
type PD interface {
	GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error)
	tidb.RegionPD
}

// ResolvedTS is PD's min-resolved-ts.
type ResolvedTS struct {
	TS uint64
	// RealTime is false when PD only has a persisted, possibly stale value (the stores do
	// not report resolved ts): it is then no consistent backup timestamp.
	RealTime bool
}

// PDHTTP is what the step reads over PD's HTTP API; NewPDHTTP adapts the PD HTTP client.
type PDHTTP interface {
	ClusterVersion(ctx context.Context) (string, error)
	MinResolvedTS(ctx context.Context) (ResolvedTS, error)
}

// Dialer opens a TiKV Backup client; close releases the connection.
type Dialer func(ctx context.Context, addr string) (client brpb.BackupClient, close func() error, err error)

// NewPDHTTP adapts github.com/tikv/pd/client/http's Client.
func NewPDHTTP(c pdhttp.Client) PDHTTP { return pdHTTP{c: c} }

type pdHTTP struct{ c pdhttp.Client }

func (p pdHTTP) ClusterVersion(ctx context.Context) (string, error) {
	return p.c.GetClusterVersion(ctx)
}

// MinResolvedTS reads the answer itself: the client turns is_real_time=false into an
// opaque error, and the step must tell that apart from PD being unreachable.
func (p pdHTTP) MinResolvedTS(ctx context.Context) (ResolvedTS, error) {
	var got struct {
		TS       uint64 `json:"min_resolved_ts"`
		RealTime bool   `json:"is_real_time"`
	}
	decoded := false
	c := p.c.WithRespHandler(func(resp *http.Response, res any) error {
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET min-resolved-ts: %s: %s", resp.Status, bytes.TrimSpace(body))
		}
		if err := json.Unmarshal(body, &got); err != nil {
			return fmt.Errorf("decode min-resolved-ts: %w", err)
		}
		decoded = true
		if res != nil {
			_ = json.Unmarshal(body, res)
		}
		return nil
	})
	_, _, err := c.GetMinResolvedTSByStoresIDs(ctx, nil)
	if decoded && !got.RealTime {
		return ResolvedTS{TS: got.TS}, nil
	}
	if err != nil {
		return ResolvedTS{}, err
	}
	return ResolvedTS{TS: got.TS, RealTime: got.RealTime}, nil
}

// waitClusterStill waits until no TiKV reports a pending admin operation and PD's regions
// cover the whole key space, retrying until CheckTimeout.
func (s *snapshotter) waitClusterStill(ctx context.Context) error {
	if s.d.PD == nil || s.d.Dial == nil {
		return errors.New("the cluster check needs PD and TiKV clients")
	}
	s.report(Progress{Phase: PhaseChecking})
	deadline := s.o.Clock.Now().Add(s.o.CheckTimeout)
	for attempt := 1; ; attempt++ {
		err := s.checkClusterStill(ctx)
		if err == nil {
			s.logf("No pending admin operation and no region hole")
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("check the cluster: %w", ctx.Err())
		}
		if !s.o.Clock.Now().Before(deadline) {
			return fmt.Errorf("the cluster did not settle within %s (%d attempts): %w", s.o.CheckTimeout, attempt, err)
		}
		s.logf("Cluster not settled (attempt %d), retrying in %s: %v", attempt, s.o.CheckInterval, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("check the cluster: %w", ctx.Err())
		case <-s.o.Clock.After(s.o.CheckInterval):
		}
	}
}

// checkClusterStill is one attempt of the check. PD's region scan and the stores' admin checks
// are independent: inside the pause window the check takes as long as the slowest of them,
// not their sum.
func (s *snapshotter) checkClusterStill(ctx context.Context) error {
	holes := make(chan error, 1)
	go func() { holes <- s.checkHoles(ctx) }()
	return errors.Join(s.checkAdminAll(ctx), <-holes)
}

// checkAdminAll checks every TiKV store for pending admin operations, all at once.
func (s *snapshotter) checkAdminAll(ctx context.Context) error {
	all, err := s.d.PD.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return fmt.Errorf("list stores: %w", err)
	}
	var stores []*metapb.Store
	for _, st := range all {
		if !tidb.IsTiFlash(st) {
			stores = append(stores, st)
		}
	}
	if len(stores) == 0 {
		return errors.New("PD lists no TiKV store")
	}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() { errs[i] = s.checkAdmin(ctx, st) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// dialStores opens a connection to every TiKV store ahead of the check: an armed step does it
// while it waits for the backup ts, so the check inside the pause window finds them open.
// Best effort: a store it cannot reach now is dialled again by the check, which reports it.
func (s *snapshotter) dialStores(ctx context.Context) {
	all, err := s.d.PD.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return
	}
	for _, st := range all {
		if !tidb.IsTiFlash(st) {
			_, _ = s.store(ctx, st.GetAddress())
		}
	}
}

// store returns the Backup client of the store at addr, dialling it once per step.
func (s *snapshotter) store(ctx context.Context, addr string) (brpb.BackupClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[addr]; ok {
		return c, nil
	}
	c, closeConn, err := s.d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if s.conns == nil {
		s.conns = map[string]brpb.BackupClient{}
	}
	s.conns[addr] = c
	s.closers = append(s.closers, closeConn)
	return c, nil
}

// closeStores closes the connections store opened.
func (s *snapshotter) closeStores() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		_ = c()
	}
	s.conns, s.closers = nil, nil
}

// checkAdmin reads one store's CheckPendingAdminOp stream to its end.
func (s *snapshotter) checkAdmin(ctx context.Context, st *metapb.Store) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client, err := s.store(ctx, st.GetAddress())
	if err != nil {
		return fmt.Errorf("connect to store %d at %s: %w", st.GetId(), st.GetAddress(), err)
	}
	stream, err := client.CheckPendingAdminOp(ctx, &brpb.CheckAdminRequest{})
	if err != nil {
		return fmt.Errorf("check pending admin operations on store %d: %w", st.GetId(), err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check pending admin operations on store %d: %w", st.GetId(), err)
		}
		switch {
		case resp.GetError() != nil:
			return fmt.Errorf("store %d: %s", st.GetId(), resp.GetError().GetMsg())
		case resp.GetRegion() == nil:
			return fmt.Errorf("store %d answered without a region", st.GetId())
		case resp.GetHasPendingAdmin():
			return fmt.Errorf("region %d on store %d has a pending admin operation", resp.GetRegion().GetId(), st.GetId())
		}
	}
}

// checkHoles scans PD's regions, page by page, and requires them to tile the key space from
// the first key to the last, with no gap and no overlap.
func (s *snapshotter) checkHoles(ctx context.Context) error {
	next, done := []byte{}, false
	err := s.regionScanner().Pages(ctx, []router.KeyRange{{}}, func(regions []*router.Region) error {
		if done {
			return fmt.Errorf("regions overlap after the end of the key space (region %d starts at %q)", regions[0].Meta.GetId(), regions[0].Meta.GetStartKey())
		}
		metas := make([]*metapb.Region, len(regions))
		for i, r := range regions {
			metas[i] = r.Meta
		}
		end, err := tidb.Tiles(next, metas)
		if err != nil {
			return err
		}
		next, done = end, len(end) == 0
		return nil
	})
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("no region covers the key %q", next)
	}
	return nil
}

// regionScanner is the step's one scanner of PD's regions, made on first use: it remembers
// for the step's life whether PD serves BatchScanRegions.
func (s *snapshotter) regionScanner() *tidb.RegionScanner {
	s.scanOnce.Do(func() { s.regions = tidb.NewRegionScanner(s.d.PD, tidb.RegionScanOptions{Log: s.logf}) })
	return s.regions
}

// CheckCluster is one attempt of the step's cluster check on its own — no TiKV reports a
// pending admin operation and PD's regions tile the key space — over d's PD and Dial, logging
// to log. The step repeats it until the cluster settles.
func CheckCluster(ctx context.Context, d Deps, log io.Writer) error {
	s := &snapshotter{d: d, o: Options{Progress: log}}
	defer s.closeStores()
	return s.checkClusterStill(ctx)
}
