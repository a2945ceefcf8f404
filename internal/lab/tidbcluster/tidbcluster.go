// Package tidbcluster runs a whole TiDB double: one PD double in this process and N TiKV
// double stores, each on its own 127.0.0.1 port and volume(s). The stores run in this process,
// or (Config.Binary) as `fedbr-lab lab tikv` child processes that StopStore kills with SIGKILL, as a
// node loss kills TiKV. Tests use it; lab deployments run one `fedbr-lab lab pd|tikv` process per
// pod instead.
package tidbcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// Config describes a cluster.
type Config struct {
	// Dir holds pd/ and tikv-<id>/ data directories.
	Dir string
	// StoreDirs, when set, maps a store id to its data directory instead of Dir/tikv-<id>
	// (e.g. an AWS-double volume, so the volume's snapshots capture the store). It is read
	// whenever a store starts, so a restore may fill it after StartPD.
	StoreDirs map[uint64]string
	// RaftDirs, when set, gives a store a second volume for its log (TiKV's raft-engine.dir and
	// rocksdb.wal-dir), apart from its data volume; read whenever a store starts.
	RaftDirs map[uint64]string
	// Binary, when set, runs each store as a child process `<Binary> lab tikv ...` (a fedbr
	// binary, or a test binary whose TestMain calls RunChild first). StopStore is then SIGKILL,
	// Store returns nil, and Now must be nil (the children read the real clock).
	Binary string
	// Stores is the number of stores (ids 1..Stores); at least 3.
	Stores int
	// StickyAddrs restarts a store on the address it had before (as a TiKV pod keeps its
	// DNS name across restarts) instead of a fresh port.
	StickyAddrs bool
	// SplitKeys pre-split the key space.
	SplitKeys [][]byte
	// PD tunes the PD double (DataDir and clock are filled in); its
	// GCLifeTime and GCRunInterval drive how soon garbage is collected.
	PD pddouble.Config
	// GCPollInterval is how often each store reads PD's GC safe point and
	// collects at it (0: tikvdouble.DefaultGCPollInterval).
	GCPollInterval time.Duration
	// Tick is the stores' raft tick.
	Tick time.Duration
	// SlowStore, if set, is a store whose followers apply 10x slower.
	SlowStore uint64
	// NoLeaseStore, if set, is a store older than the admin-operation lease: it answers
	// PrepareSnapshotBackup Unimplemented (tikvdouble.Config.NoLease; in-process stores only).
	NoLeaseStore uint64
	// TLS, if set, makes PD and every store serve and dial over TLS with it (pddouble.Config.TLS,
	// tikvdouble.Config.TLS; labtls.Set.Node makes one). With Binary, the store processes read
	// the same from NodeTLSDir, which must then be set.
	TLS *tls.Config
	// NodeTLSDir holds the node's labtls.CAFile, CertFile and KeyFile (labtls.Set.WriteNode):
	// store processes (Binary) get them as --ca, --cert and --key. Only with TLS.
	NodeTLSDir string
	// CompactBytes is the stores' wal compaction threshold (0: default).
	CompactBytes int64
	// Now is the clock of PD and stores; nil means time.Now.
	Now func() time.Time
	// Logger, nil discards.
	Logger *slog.Logger
}

// Cluster is a running in-process TiDB double.
type Cluster struct {
	cfg Config
	PD  *pddouble.Server

	mu     sync.Mutex
	stores map[uint64]*tikvdouble.Store
	procs  map[uint64]*proc  // the running stores in process mode
	addrs  map[uint64]string // last address of each store, for StickyAddrs
}

// StartPD starts only PD, so a caller can set PD state (e.g. the
// snapshot-recovering mark) before the stores come up.
func StartPD(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Binary != "" && cfg.Now != nil {
		return nil, errors.New("tidbcluster: a fake clock (Now) cannot reach store processes (Binary)")
	}
	if cfg.Binary != "" && cfg.TLS != nil && cfg.NodeTLSDir == "" {
		return nil, errors.New("tidbcluster: TLS reaches store processes (Binary) only through NodeTLSDir")
	}
	if cfg.NodeTLSDir != "" && cfg.TLS == nil {
		return nil, errors.New("tidbcluster: NodeTLSDir without TLS")
	}
	c := &Cluster{cfg: cfg, stores: map[uint64]*tikvdouble.Store{}, procs: map[uint64]*proc{}, addrs: map[uint64]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen pd: %w", err)
	}
	pc := cfg.PD
	pc.DataDir = filepath.Join(cfg.Dir, "pd")
	if pc.Now == nil {
		pc.Now = cfg.Now
	}
	if pc.TLS == nil {
		pc.TLS = cfg.TLS
	}
	if c.PD, err = pddouble.Start(ctx, pc, lis); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts PD and every store, and waits until every region has a leader.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c, err := StartPD(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.StartStores(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// StartStores starts stores 1..Stores concurrently (store 1 bootstraps).
func (c *Cluster) StartStores(ctx context.Context) error {
	errs := make(chan error, c.cfg.Stores)
	for id := uint64(1); id <= uint64(c.cfg.Stores); id++ {
		go func() { errs <- c.StartStore(ctx, id) }()
	}
	for range c.cfg.Stores {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// StoreDir is store id's volume: Config.StoreDirs[id], else Dir/tikv-<id>.
func (c *Cluster) StoreDir(id uint64) string {
	if d, ok := c.cfg.StoreDirs[id]; ok {
		return d
	}
	return filepath.Join(c.cfg.Dir, fmt.Sprintf("tikv-%d", id))
}

// RaftDir is store id's raft volume (Config.RaftDirs[id]), or "" when its log is on its data
// volume.
func (c *Cluster) RaftDir(id uint64) string { return c.cfg.RaftDirs[id] }

// Volumes lists store id's volume directories: data, then raft if it has one.
func (c *Cluster) Volumes(id uint64) []string {
	if d := c.RaftDir(id); d != "" {
		return []string{c.StoreDir(id), d}
	}
	return []string{c.StoreDir(id)}
}

// PDAddr is PD's host:port.
func (c *Cluster) PDAddr() string { return c.PD.Addr() }

// Store returns a running in-process store, or nil (always nil in process mode).
func (c *Cluster) Store(id uint64) *tikvdouble.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stores[id]
}

func (c *Cluster) running() []*tikvdouble.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*tikvdouble.Store, 0, len(c.stores))
	for _, s := range c.stores {
		out = append(out, s)
	}
	return out
}

// StoreIDs lists the running stores.
func (c *Cluster) StoreIDs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []uint64
	for id := range c.stores {
		ids = append(ids, id)
	}
	for id := range c.procs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// StartStore (re)starts store id on its directory and a fresh port (its previous address
// with Config.StickyAddrs).
func (c *Cluster) StartStore(ctx context.Context, id uint64) error {
	addr := "127.0.0.1:0"
	c.mu.Lock()
	if a, ok := c.addrs[id]; ok && c.cfg.StickyAddrs {
		addr = a
	}
	c.mu.Unlock()
	var initial []uint64
	for i := uint64(1); i <= uint64(c.cfg.Stores); i++ {
		initial = append(initial, i)
	}
	if c.cfg.Binary != "" {
		p, err := c.startProcess(ctx, id, addr, initial)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.procs[id] = p
		c.addrs[id] = p.addr
		c.mu.Unlock()
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen store %d: %w", id, err)
	}
	sc := tikvdouble.Config{
		StoreID: id, DataDir: c.StoreDir(id), RaftDir: c.RaftDir(id), PD: c.PD.Addr(), InitialStores: initial,
		SplitKeys: c.cfg.SplitKeys, Tick: c.cfg.Tick, Now: c.cfg.Now, Seed: id, Logger: c.cfg.Logger,
		CompactBytes: c.cfg.CompactBytes, GCPollInterval: c.cfg.GCPollInterval,
	}
	if id == c.cfg.SlowStore {
		sc.SlowApply = 10
	}
	sc.NoLease = id == c.cfg.NoLeaseStore
	sc.TLS = c.cfg.TLS
	s, err := tikvdouble.Start(ctx, sc, lis)
	if err != nil {
		_ = lis.Close()
		return fmt.Errorf("start store %d: %w", id, err)
	}
	c.mu.Lock()
	c.stores[id] = s
	c.addrs[id] = lis.Addr().String()
	c.mu.Unlock()
	return nil
}

// StopStore stops store id: SIGKILL in process mode; in this process, a close that leaves on
// disk what a kill would (stores never buffer acknowledged writes) but never a torn write.
func (c *Cluster) StopStore(id uint64) {
	c.mu.Lock()
	s, p := c.stores[id], c.procs[id]
	delete(c.stores, id)
	delete(c.procs, id)
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	if p != nil {
		p.kill()
	}
}

// Addr is store id's address while it runs, "" otherwise.
func (c *Cluster) Addr(id uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil {
		return p.addr
	}
	if s := c.stores[id]; s != nil {
		return s.Addr()
	}
	return ""
}

// Recovery reports whether store id runs in recovery mode.
func (c *Cluster) Recovery(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil {
		return p.recovery
	}
	return c.stores[id] != nil && c.stores[id].Recovery()
}

// WaitLeaders waits until every region in PD has a leader on a running store.
func (c *Cluster) WaitLeaders(ctx context.Context) error {
	if c.cfg.Binary != "" {
		return c.waitLeadersFromPD(ctx)
	}
	for {
		regions := map[uint64]bool{}
		peers := map[uint64][]string{}
		for _, s := range c.running() {
			for _, r := range s.Regions() {
				id := r.Region.GetId()
				regions[id] = regions[id] || r.Leader
				e := r.Region.GetRegionEpoch()
				peers[id] = append(peers[id], fmt.Sprintf("store %d: %s term %d vote %d leader %d last %d commit %d applied %d epoch %d/%d merging %v",
					s.ID(), r.Role, r.Term, r.Vote, r.LeaderID, r.LastIndex, r.Commit, r.Applied, e.GetVersion(), e.GetConfVer(), r.Merging))
			}
		}
		n := 0
		var leaderless []string
		for id, led := range regions {
			if led {
				n++
			} else {
				leaderless = append(leaderless, fmt.Sprintf("region %d [%s]", id, strings.Join(peers[id], "; ")))
			}
		}
		if n == len(regions) && n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(leaderless)
			return fmt.Errorf("wait for leaders (%d of %d): %w; without a leader: %s", n, len(regions), ctx.Err(), strings.Join(leaderless, ", "))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitGC waits until every running store has collected garbage up to ts
// on its volume (tikvdouble.Store.WaitGC).
func (c *Cluster) WaitGC(ctx context.Context, ts uint64) error {
	if c.cfg.Binary != "" {
		return fmt.Errorf("wait for GC: %w", errProcesses)
	}
	for _, s := range c.running() {
		if err := s.WaitGC(ctx, ts); err != nil {
			return err
		}
	}
	return nil
}

// Close stops everything.
func (c *Cluster) Close() {
	for _, id := range c.StoreIDs() {
		c.StopStore(id)
	}
	if c.PD != nil {
		_ = c.PD.Close()
	}
}

// CopyVolume copies a store's volume as it is now into dst, under the
// volume's exclusive lock: a crash-consistent image, like an EBS snapshot
// restored into a fresh volume.
func CopyVolume(src, dst string) error {
	return copyLocked(src, dst)
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
