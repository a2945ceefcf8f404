package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

const tick = 20 * time.Millisecond

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PD, TiKV and AWS doubles")
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func dialConn(_ context.Context, addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func dialBackup(ctx context.Context, addr string) (brpb.BackupClient, func() error, error) {
	cc, err := dialConn(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	return brpb.NewBackupClient(cc), cc.Close, nil
}

// pdClients opens PD's gRPC and HTTP clients for the test's lifetime.
func pdClients(t *testing.T, c *tidbcluster.Cluster) (pd.Client, pdhttp.Client) {
	t.Helper()
	pc, err := pd.NewClientWithContext(context.Background(), []string{c.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	h := pdhttp.NewClient("fedbr-chain-test", []string{c.PD.URL()})
	t.Cleanup(h.Close)
	return pc, h
}

// awsVolumes creates one instance per store in the AWS double, each with one data volume,
// and returns the store → volume directory map and the clustermeta naming the volumes.
func awsVolumes(t *testing.T, srv *awsdouble.Server, stores int) (map[uint64]string, *meta.Record) {
	t.Helper()
	v := awsStoreVolumes(t, srv, stores, false)
	return v.data, v.rec
}

// RaftEngineType is the volume type (TiKV config key) of a store's raft log volume.
const raftEngineType = "raft-engine.dir"

// storeVolumes are the AWS-double volumes of a cluster's stores.
type storeVolumes struct {
	data, raft map[uint64]string // store → volume directory
	rec        *meta.Record
}

// awsStoreVolumes creates one instance per store in the AWS double with a data volume, and
// with raft also a raft log volume (raft-engine.dir), as a TiKV with storageVolumes has.
func awsStoreVolumes(t *testing.T, srv *awsdouble.Server, stores int, raft bool) storeVolumes {
	t.Helper()
	sv := storeVolumes{data: map[uint64]string{}, raft: map[uint64]string{},
		rec: &meta.Record{TiKV: meta.TiKV{Replicas: stores}, PD: meta.Component{Replicas: 1}}}
	specs := []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}
	if raft {
		specs = append(specs, awsdouble.VolumeSpec{Device: "/dev/xvdc", SizeGiB: 2})
	}
	for id := uint64(1); id <= uint64(stores); id++ {
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: specs,
			Tags: map[string]string{"Name": fmt.Sprintf("tikv-%d", id)}})
		if err != nil {
			t.Fatal(err)
		}
		st := meta.TiKVStore{ID: id, Volumes: []meta.Volume{{ID: in.Volumes[0].ID, Type: meta.DataDirType, MountPath: "/var/lib/tikv"}}}
		sv.data[id] = in.Volumes[0].Dir
		if raft {
			st.Volumes = append(st.Volumes, meta.Volume{ID: in.Volumes[1].ID, Type: raftEngineType, MountPath: "/var/lib/raft"})
			sv.raft[id] = in.Volumes[1].Dir
		}
		sv.rec.TiKV.Stores = append(sv.rec.TiKV.Stores, st)
	}
	return sv
}

// workload is the bank workload moving money on a running cluster.
type workload struct {
	cfg  bank.Config
	log  bank.Log
	stop func()
	wg   sync.WaitGroup
}

func startWorkload(t *testing.T, ctx context.Context, c *tidbcluster.Cluster, cfg bank.Config) *workload {
	t.Helper()
	cl, err := bank.NewClient(ctx, []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	w := &workload{cfg: cfg}
	if err := bank.Load(ctx, cl, cfg, &w.log); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	w.stop = stop
	w.wg.Add(1)
	go func() { defer w.wg.Done(); bank.Run(rctx, cl, cfg, &w.log, 4, 0, 11) }()
	t.Cleanup(w.finish)
	return w
}

// waitCommits waits for n more committed transfers.
func (w *workload) waitCommits(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	start := len(w.log.Txns())
	for len(w.log.Txns()) < start+n {
		select {
		case <-ctx.Done():
			t.Fatalf("workload stalled")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitBefore waits until enough transfers are below any backup ts the pause reads from now on.
func (w *workload) waitBefore(t *testing.T, ctx context.Context, h pdhttp.Client) {
	t.Helper()
	if err := labbr.WaitTransfersBefore(ctx, &w.log, h); err != nil {
		t.Fatal(err)
	}
}

// waitAfter waits until bank.MinTransfers transfers committed after ts, so that the checker has
// enough above it.
func (w *workload) waitAfter(t *testing.T, ctx context.Context, ts uint64) {
	t.Helper()
	if _, err := w.log.WaitAfter(ctx, ts, bank.MinTransfers); err != nil {
		t.Fatalf("workload after the backup ts: %v", err)
	}
}

func (w *workload) finish() {
	w.stop()
	w.wg.Wait()
}

// pauseRun is a pause engine running in the background.
type pauseRun struct {
	stop  context.CancelFunc
	done  chan error
	ready chan pause.Status

	waitOnce sync.Once
	err      error

	mu       sync.Mutex
	statuses []pause.Status
}

// startPause runs pause.Run against c until stop is called.
func startPause(t *testing.T, ctx context.Context, c *tidbcluster.Cluster, cfg pause.Config) *pauseRun {
	t.Helper()
	pc, h := pdClients(t, c)
	pctx, stop := context.WithCancel(ctx)
	p := &pauseRun{stop: stop, done: make(chan error, 1), ready: make(chan pause.Status, 1)}
	go func() {
		p.done <- pause.Run(pctx, pause.Deps{PD: pc, HTTP: h, Dial: dialBackup, Log: t.Logf}, cfg, func(s pause.Status) {
			p.mu.Lock()
			p.statuses = append(p.statuses, s)
			p.mu.Unlock()
			if s.Phase == pause.PhaseReady {
				p.ready <- s
			}
		})
	}()
	t.Cleanup(func() {
		stop()
		_ = p.wait() // the test that cared about the result already checked it
	})
	return p
}

// wait waits for the engine to return and gives its error (any number of times).
func (p *pauseRun) wait() error {
	p.waitOnce.Do(func() { p.err = <-p.done })
	return p.err
}

// waitReady waits for the pause to be Ready.
func (p *pauseRun) waitReady(t *testing.T, ctx context.Context) pause.Status {
	t.Helper()
	select {
	case st := <-p.ready:
		return st
	case err := <-p.done:
		p.waitOnce.Do(func() { p.err = err })
		t.Fatalf("pause ended before Ready: %v", err)
	case <-ctx.Done():
		t.Fatal("pause never Ready")
	}
	return pause.Status{}
}

// since is when the pause first reported phase ph.
func (p *pauseRun) since(ph pause.Phase) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.statuses {
		if s.Phase == ph {
			return s.Since, true
		}
	}
	return time.Time{}, false
}

// phase is the last reported phase.
func (p *pauseRun) phase() pause.Phase {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.statuses) == 0 {
		return ""
	}
	return p.statuses[len(p.statuses)-1].Phase
}

// observe reads what PD holds (GC safepoint, paused schedulers, zeroed limits).
func observe(ctx context.Context, pc pd.Client, pdURL string) (tidb.Held, error) {
	return tidb.Plaintext.ReadHeld(ctx, pdURL)
}

// leasedStores probes every store's PrepareSnapshotBackup lease over the real protocol: a
// short UpdateLease answers whether the previous lease was still valid, and Finish drops the
// probe's own lease at once. A probe aborts any other stream to the store, so it is only used
// once the pause is gone.
func leasedStores(ctx context.Context, pc pd.Client) ([]uint64, error) {
	stores, err := pc.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return nil, err
	}
	var leased []uint64
	for _, st := range stores {
		valid, err := probeLease(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("probe the lease of store %d: %w", st.GetId(), err)
		}
		if valid {
			leased = append(leased, st.GetId())
		}
	}
	return leased, nil
}

func probeLease(ctx context.Context, st *metapb.Store) (bool, error) {
	cc, err := dialConn(ctx, st.GetAddress())
	if err != nil {
		return false, err
	}
	defer func() { _ = cc.Close() }()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := brpb.NewBackupClient(cc).PrepareSnapshotBackup(sctx)
	if err != nil {
		return false, err
	}
	if err := s.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: 1}); err != nil {
		return false, err
	}
	r, err := s.Recv()
	if err != nil {
		return false, err
	}
	if r.GetTy() != brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult {
		return false, fmt.Errorf("unexpected answer %v", r)
	}
	valid := r.GetLastLeaseIsValid()
	if err := s.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish}); err != nil {
		return false, err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) || sctx.Err() == nil {
				return valid, nil
			}
			return false, err
		}
	}
}

// restored is a cluster started on restored volumes.
type restored struct {
	c   *tidbcluster.Cluster
	pc  pd.Client
	h   pdhttp.Client
	cfg tidbcluster.Config
}

// startRestoredPD starts a fresh PD double for a restore (stores come later, on dirs, as
// processes).
func startRestoredPD(t *testing.T, ctx context.Context, stores int, dirs map[uint64]string) *restored {
	t.Helper()
	return startRestoredPDWith(t, ctx, tidbcluster.Config{Stores: stores, StoreDirs: dirs, Binary: fedbr(t)})
}

// startRestoredPDWith starts a fresh PD double for a restore of the stores cfg names (Dir, Tick
// and PD are filled in).
func startRestoredPDWith(t *testing.T, ctx context.Context, cfg tidbcluster.Config) *restored {
	t.Helper()
	cfg.Dir, cfg.Tick, cfg.PD = t.TempDir(), tick, pddouble.Config{OperatorRate: -1}
	c, err := tidbcluster.StartPD(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pc, h := pdClients(t, c)
	return &restored{c: c, pc: pc, h: h, cfg: cfg}
}

// restoreData runs the restore-data engine against the stores in recovery mode.
func (r *restored) restoreData(t *testing.T, ctx context.Context, ts uint64, logf func(string, ...any)) (restoredata.Result, error) {
	t.Helper()
	return restoredata.Run(ctx, restoredata.Deps{PD: r.pc, HTTP: r.h, Dial: dialConn, Log: logf},
		restoredata.Config{ResolvedTS: ts, Stores: r.cfg.Stores, Backoff: 200 * time.Millisecond})
}

// restartAndCheck restarts every store in normal mode and runs the bank checker at ts.
func (r *restored) restartAndCheck(t *testing.T, ctx context.Context, cfg bank.Config, txns []bank.Txn, ts uint64) error {
	t.Helper()
	for _, id := range r.c.StoreIDs() {
		r.c.StopStore(id)
	}
	if err := r.c.StartStores(ctx); err != nil {
		return err
	}
	if err := r.c.WaitLeaders(ctx); err != nil {
		return err
	}
	cl, err := bank.NewClient(ctx, []string{r.c.PDAddr()})
	if err != nil {
		return err
	}
	defer cl.Close()
	cl.LockWait = 500 * time.Millisecond
	now, err := cl.TS(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return bank.Check(cctx, cl, cfg, txns, ts, now)
}

// serveAWS serves the AWS double with the production provider.
func serveAWS(t *testing.T, opts awsdouble.Options) awsdoubletest.Lab {
	t.Helper()
	return awsdoubletest.Serve(t, opts, "")
}
