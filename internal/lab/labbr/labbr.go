// Package labbr drives a lab cluster of PD and TiKV doubles (internal/lab/tidbcluster) through
// fedbr's own BR engine: the pause (internal/br/pause) and the data phase of a restore
// (internal/br/restoredata), with their test-only Unsafe switches for negative controls. The lab
// has no second implementation of either; it keeps only what fedbr does not do but the doubles
// must serve: the v6.3 data phase (ResolveKvData) of older BR clients.
package labbr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// Paused is fedbr's pause (internal/br/pause, the engine that ships) held on a cluster until
// Stop. The lab has no second implementation of it.
type Paused struct {
	// BackupTS is the ts the pause pinned: PD's min resolved ts when it was taken.
	BackupTS uint64
	stop     context.CancelFunc
	done     chan error
	pd       pd.Client
	http     pdhttp.Client
}

// Pause runs fedbr's pause against the cluster at pdAddr until it is Ready (GC pinned, every
// store leased and applied, schedulers paused).
func Pause(ctx context.Context, pdAddr string, cfg pause.Config, logf func(string, ...any)) (*Paused, error) {
	c, err := pd.NewClientWithContext(ctx, []string{pdAddr}, pd.SecurityOption{})
	if err != nil {
		return nil, fmt.Errorf("connect pd: %w", err)
	}
	p := &Paused{done: make(chan error, 1), pd: c, http: pdhttp.NewClient("lab-pause", []string{pdAddr})}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	ready := make(chan uint64, 1)
	dial := func(_ context.Context, addr string) (brpb.BackupClient, func() error, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		return brpb.NewBackupClient(cc), cc.Close, nil
	}
	go func() {
		p.done <- pause.Run(pctx, pause.Deps{PD: c, HTTP: p.http, Dial: dial, Log: logf}, cfg, func(st pause.Status) {
			if st.Phase == pause.PhaseReady {
				select {
				case ready <- st.BackupTS:
				default:
				}
			}
		})
	}()
	select {
	case p.BackupTS = <-ready:
		return p, nil
	case err := <-p.done:
		p.done <- err
		_ = p.Stop()
		return nil, fmt.Errorf("pause ended before it was ready: %w", err)
	case <-ctx.Done():
		_ = p.Stop()
		return nil, ctx.Err()
	}
}

// Stop lifts the pause and returns how it ended.
func (p *Paused) Stop() error {
	p.stop()
	err := <-p.done
	p.http.Close()
	p.pd.Close()
	return err
}

// RestoreOptions shapes the data phase of Restore.
type RestoreOptions struct {
	// ResolvedTS is the backup ts to flash back to.
	ResolvedTS uint64
	// Unsafe are fedbr's own negative-control switches (restoredata.Unsafe).
	Unsafe restoredata.Unsafe
	// LeaderTimeout and Attempts bound restore-data's wait for planned leaders (0: its
	// defaults).
	LeaderTimeout time.Duration
	Attempts      int
	// Stores is the backup's TiKV count restore-data waits for (0: whatever PD lists), and
	// WaitStoresTimeout bounds that wait and a flashback without progress (0: its default).
	Stores            int
	WaitStoresTimeout time.Duration
	// Poll spaces restore-data's reads of PD's store list (0: 100ms, the lab's pace).
	Poll time.Duration
	// Report receives restore-data's status on every phase change; nil drops it.
	Report func(restoredata.Status)
	// ResolveKV ends with the v6.3 data phase (WaitApply, then ResolveKvData on every store)
	// instead of flashback: it exercises the TiKV double's legacy services, which BR clients
	// of that era call. fedbr never does.
	ResolveKV bool
	// Log receives restore-data's progress lines; nil drops them.
	Log func(format string, args ...any)
}

// RecoverData runs fedbr's data phase (internal/br/restoredata, the engine that ships) against
// stores started in recovery mode. The lab has no second implementation of it.
func RecoverData(ctx context.Context, pdAddr string, o RestoreOptions) error {
	c, err := pd.NewClientWithContext(ctx, []string{pdAddr}, pd.SecurityOption{})
	if err != nil {
		return fmt.Errorf("connect pd: %w", err)
	}
	defer c.Close()
	h := pdhttp.NewClient("lab-restore", []string{pdAddr})
	defer h.Close()
	unsafe := o.Unsafe
	if o.ResolveKV {
		unsafe.NoFlashback = true
	}
	dial := func(_ context.Context, addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	poll := o.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	if _, err := restoredata.Run(ctx, restoredata.Deps{PD: c, HTTP: h, Dial: dial, Log: o.Log, Report: o.Report}, restoredata.Config{
		ResolvedTS: o.ResolvedTS, Backoff: 200 * time.Millisecond, LeaderTimeout: o.LeaderTimeout, Attempts: o.Attempts, Unsafe: unsafe,
		Stores: o.Stores, WaitStoresTimeout: o.WaitStoresTimeout, Poll: poll,
	}); err != nil {
		return fmt.Errorf("restore-data: %w", err)
	}
	if !o.ResolveKV {
		return nil
	}
	// The stores stay in recovery mode until they restart, so the legacy services still answer.
	stores, err := c.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return fmt.Errorf("get stores: %w", err)
	}
	conns := map[uint64]*grpc.ClientConn{}
	defer func() {
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	for _, st := range stores {
		if conns[st.GetId()], err = dial(ctx, st.GetAddress()); err != nil {
			return err
		}
	}
	return resolveKV(ctx, conns, o.ResolvedTS)
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

// Restore starts a cluster on restored volumes (cfg.Dir/tikv-<id> must
// hold them): a fresh PD marked snapshot-recovering with its TSO pushed past
// the backup ts, stores in recovery mode, BR's data phase, then a restart
// of every store in normal mode.
func Restore(ctx context.Context, cfg tidbcluster.Config, o RestoreOptions) (*tidbcluster.Cluster, error) {
	c, err := tidbcluster.StartRecovering(ctx, cfg, o.ResolvedTS)
	if err != nil {
		return nil, err
	}
	if err := RecoverData(ctx, c.PDAddr(), o); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Restart(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// WaitResolved waits until PD's min resolved ts reaches ts and returns it.
func WaitResolved(ctx context.Context, h pdhttp.Client, ts uint64) (uint64, error) {
	for {
		r, _, err := h.GetMinResolvedTSByStoresIDs(ctx, nil)
		if err == nil && r >= ts {
			return r, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return 0, fmt.Errorf("min resolved ts stuck below %d: %w (last answer: %w)", ts, ctx.Err(), err)
			}
			return 0, fmt.Errorf("min resolved ts stuck below %d at %d: %w", ts, r, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitTransfersBefore waits until bank.MinTransfers transfers of log committed and PD's min
// resolved ts passed them, so that a backup ts read from then on has enough transfers below it
// for the checker.
func WaitTransfersBefore(ctx context.Context, log *bank.Log, h pdhttp.Client) error {
	last, err := log.WaitAfter(ctx, 0, bank.MinTransfers)
	if err != nil {
		return fmt.Errorf("transfers before the backup: %w", err)
	}
	_, err = WaitResolved(ctx, h, last)
	return err
}

// TSAfterCaptures is the backup ts a tool that holds nothing reads once its captures are done:
// PD's min resolved ts once it passed a transfer of log whose commit ts is above a ts read now,
// after the last capture. That transfer committed after every capture, so no capture holds it;
// a transfer merely logged after the last capture may have committed before it (its answer was
// on the way).
func TSAfterCaptures(ctx context.Context, cl *bank.Client, log *bank.Log, h pdhttp.Client) (uint64, error) {
	after, err := cl.TS(ctx)
	if err != nil {
		return 0, fmt.Errorf("read a ts after the captures: %w", err)
	}
	last, err := log.WaitAfter(ctx, after, 1)
	if err != nil {
		return 0, fmt.Errorf("a transfer committed after the captures: %w", err)
	}
	return WaitResolved(ctx, h, last)
}
