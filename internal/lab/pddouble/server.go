package pddouble

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
)

// Config configures a PD double.
type Config struct {
	// DataDir holds the persisted state; it is created if missing.
	DataDir string
	// Name is the member name reported by GetMembers.
	Name string
	// AdvertiseURL is the client URL published to clients
	// ("http://127.0.0.1:2379"); empty means derived from the listener.
	AdvertiseURL string
	// Now is the clock every TTL is measured on; nil means time.Now.
	Now func() time.Time
	// Seed seeds the schedulers' choices, so a run can be replayed.
	Seed uint64
	// OperatorRate is the chance, per region heartbeat, that an active
	// scheduler hands the region an operator; 0 means 0.05.
	OperatorRate float64
	// SplitKeys is the approximate key count above which the region scheduler
	// asks a region to split; 0 means 64.
	SplitKeys uint64
	// MergeKeys is the key count under which two neighbours may be merged;
	// 0 means 8.
	MergeKeys uint64
	// MoveReplicas lets balance-region move replicas between stores (add a
	// peer on a less loaded store, then remove one). It is off by default so
	// that lab clusters keep their replica placement unless a test asks for
	// peer moves.
	MoveReplicas bool
	// ShuffleRegionRate is the chance that a balance-region step moves a
	// replica even though the stores are balanced (PD's
	// shuffle-region-scheduler), so peer moves keep happening in the
	// background; 0 means replicas only move to even out the stores. It
	// implies MoveReplicas.
	ShuffleRegionRate float64
	// Version is reported by /version and /config/cluster-version; empty
	// means 8.5.0 (7.5.0 with API APIv75).
	Version string
	// API is the gRPC surface served: APIv85 (empty means it) or APIv75,
	// PD v7.5's, which has no BatchScanRegions (it answers Unimplemented
	// exactly as a server without the method does).
	API string
	// GCLifeTime is how far the GC worker keeps the GC safe point behind
	// the TSO (TiDB's tidb_gc_life_time); 0 means DefaultGCLifeTime, a
	// negative value turns the worker off (the safe point then moves only
	// by UpdateGCSafePoint).
	GCLifeTime time.Duration
	// GCRunInterval is how often the GC worker runs (tidb_gc_run_interval);
	// 0 means DefaultGCRunInterval.
	GCRunInterval time.Duration
	// MinResolvedTSPersistenceInterval is PD's
	// pd-server.min-resolved-ts-persistence-interval, which GET
	// /min-resolved-ts reports: 0 means 1s (PD's default), a negative value
	// means 0, PD's "off", and then is_real_time is false (omitted).
	MinResolvedTSPersistenceInterval time.Duration
	// TLS, if set, serves gRPC and HTTP over TLS on the one port (with its ClientCAs and
	// ClientAuth: mutual TLS, as PD with security.cacert-path, cert-path and key-path) and
	// advertises an https:// URL. gRPC and HTTP are told apart by request, as PD's embedded
	// etcd does over TLS: HTTP/2 requests of content type application/grpc go to gRPC.
	TLS *tls.Config
}

// The gRPC surfaces Config.API selects.
const (
	// APIv85 is PD v8.5's API, the default.
	APIv85 = "v8.5"
	// APIv75 is PD v7.5's, the oldest fedbr supports: no BatchScanRegions.
	APIv75 = "v7.5"
)

// Server is a running PD double.
type Server struct {
	cfg  Config
	now  func() time.Time
	grpc *grpc.Server
	http *http.Server
	lis  net.Listener
	url  string
	// clusterID never changes after start; kept outside mu.
	clusterID uint64

	mu      sync.Mutex
	st      *state
	regions *regionTree
	// regionOnly: the regions came from LoadRegions and are not persisted.
	regionOnly bool
	// dirty state (a region's shape or leader changed) is saved within
	// flushEvery; softDirty state (liveness, key counts, resolved ts) at
	// most every softFlushEvery, so heartbeats do not rewrite the state
	// file ten times a second.
	dirty, softDirty bool
	lastSave         time.Time
	rng              *rand.Rand
	// nextID is the last id handed out; st.NextID is the persisted end of
	// the reserved batch.
	nextID uint64
	// TSO: last handed-out physical (ms) and logical parts.
	physical int64
	logical  int64

	// adminOps are the operators added through PD's operator API, by region (operators.go).
	adminOps map[uint64]*adminOp

	// gcTarget and gcRuns are the GC worker's last target and run count.
	gcTarget uint64
	gcRuns   int

	// saves counts state file writes (tests and benches read it).
	saves int
	// encoded numbers state images; written is the newest on disk. writeMu
	// (taken after mu when both are held) orders the writes.
	encoded, written uint64
	writeMu          sync.Mutex

	stop chan struct{}
	wg   sync.WaitGroup
}

// tsoWindow is how far ahead of the clock PD persists its TSO upper bound, so
// a restart never hands out a timestamp it already gave.
const tsoWindow = 3 * time.Second

// Start loads (or creates) the state in cfg.DataDir and serves gRPC and HTTP
// on lis until Close.
func Start(ctx context.Context, cfg Config, lis net.Listener) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Name == "" {
		cfg.Name = "pd-0"
	}
	if cfg.OperatorRate == 0 {
		cfg.OperatorRate = 0.05
	}
	if cfg.SplitKeys == 0 {
		cfg.SplitKeys = 64
	}
	if cfg.MergeKeys == 0 {
		cfg.MergeKeys = 8
	}
	switch cfg.API {
	case "", APIv85:
		cfg.API = APIv85
		if cfg.Version == "" {
			cfg.Version = "8.5.0"
		}
	case APIv75:
		if cfg.Version == "" {
			cfg.Version = "7.5.0"
		}
	default:
		return nil, fmt.Errorf("pd api %q: want %s or %s", cfg.API, APIv85, APIv75)
	}
	if cfg.GCLifeTime == 0 {
		cfg.GCLifeTime = DefaultGCLifeTime
	}
	if cfg.MinResolvedTSPersistenceInterval == 0 {
		cfg.MinResolvedTSPersistenceInterval = time.Second
	}
	if cfg.GCRunInterval <= 0 {
		cfg.GCRunInterval = DefaultGCRunInterval
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create pd data dir: %w", err)
	}
	st, err := loadState(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = newState(uint64(cfg.Now().UnixNano())>>8 | 1)
	}
	s := &Server{
		cfg:      cfg,
		now:      cfg.Now,
		st:       st,
		regions:  newRegionTree(),
		adminOps: map[uint64]*adminOp{},
		rng:      rand.New(rand.NewPCG(cfg.Seed, st.ClusterID)),
		lis:      lis,
		stop:     make(chan struct{}),

		clusterID: st.ClusterID,
	}
	for _, e := range st.Regions {
		s.regions.put(e)
	}
	st.Regions = nil
	s.url = cfg.AdvertiseURL
	if s.url == "" {
		s.url = "http://" + lis.Addr().String()
		if cfg.TLS != nil {
			s.url = "https://" + lis.Addr().String()
		}
	}
	s.nextID = st.NextID
	// Never reuse a timestamp from before the restart.
	s.physical = int64(st.MaxTSO >> physicalShift)
	s.logical = 0
	if err := s.persist(); err != nil {
		return nil, err
	}

	// gRPC's default limits (4 MiB received), as PD's server; and, as PD's embedded etcd,
	// keepalive pings from clients are accepted every 5 s (gRPC's default refuses pings more
	// often than every 5 minutes and ends such a connection).
	opts := []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true})}
	if missing := missingMethods(cfg.API); len(missing) > 0 {
		opts = append(opts, grpc.InTapHandle(refuseMethods(missing)))
	}
	s.grpc = grpc.NewServer(opts...)
	pdpb.RegisterPDServer(s.grpc, &pdService{s: s})
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		tc.NextProtos = []string{"h2", "http/1.1"}
		s.http = &http.Server{Handler: s.tlsHandler(s.httpHandler(), missingMethods(cfg.API)), ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(2)
		go func() { defer s.wg.Done(); _ = s.http.Serve(tls.NewListener(lis, tc)) }()
	} else {
		s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
		gl, hl := splitListener(lis)
		s.wg.Add(3)
		go func() { defer s.wg.Done(); _ = s.grpc.Serve(gl) }()
		go func() { defer s.wg.Done(); _ = s.http.Serve(hl) }()
	}
	go func() { defer s.wg.Done(); s.flushLoop() }()
	if cfg.GCLifeTime > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.gcLoop() }()
	}
	return s, nil
}

// URL is the client URL clients should use ("http://host:port").
func (s *Server) URL() string { return s.url }

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClusterID is this PD's cluster id.
func (s *Server) ClusterID() uint64 { return s.clusterID }

// Close stops serving and writes the state a last time.
func (s *Server) Close() error {
	close(s.stop)
	s.grpc.Stop()
	_ = s.http.Close()
	_ = s.lis.Close()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistLocked()
}

// Save cadences of the flush loop.
const (
	flushEvery     = 100 * time.Millisecond
	softFlushEvery = time.Second
)

// flushLoop writes state marked dirty by high-rate updates (heartbeats).
func (s *Server) flushLoop() {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			due := s.dirty || (s.softDirty && time.Since(s.lastSave) >= softFlushEvery)
			if !due {
				s.mu.Unlock()
				continue
			}
			b, seq, err := s.encodeLocked()
			if err == nil {
				s.markSavedLocked()
			}
			s.mu.Unlock()
			// The write (and its fsync) happens outside mu, so a slow disk
			// does not stall TSO and region lookups behind a heartbeat.
			if err == nil {
				_ = s.write(b, seq)
			}
		}
	}
}

func (s *Server) persist() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persistLocked()
}

// persistLocked writes the state now; callers that must not answer before
// the state is durable (ids, TSO window, config) use it.
func (s *Server) persistLocked() error {
	b, seq, err := s.encodeLocked()
	if err != nil {
		return err
	}
	if err := s.write(b, seq); err != nil {
		return err
	}
	s.markSavedLocked()
	return nil
}

// encodeLocked renders the state and numbers the image, so that an older
// image never overwrites a newer one (see write).
func (s *Server) encodeLocked() ([]byte, uint64, error) {
	if !s.regionOnly {
		s.st.Regions = append(s.st.Regions[:0], s.regions.sorted...)
	}
	b, err := json.Marshal(s.st)
	s.st.Regions = nil
	if err != nil {
		return nil, 0, fmt.Errorf("encode pd state: %w", err)
	}
	s.encoded++
	return b, s.encoded, nil
}

func (s *Server) markSavedLocked() {
	s.dirty, s.softDirty = false, false
	s.lastSave = time.Now()
	s.saves++
}

// write stores image seq unless a newer one is already on disk.
func (s *Server) write(b []byte, seq uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if seq <= s.written {
		return nil
	}
	if err := writeState(s.cfg.DataDir, b); err != nil {
		return err
	}
	s.written = seq
	return nil
}

// tlsHandler serves gRPC and HTTP on one TLS port: an HTTP/2 request of content type
// application/grpc is gRPC (a method of missing answered as by a server without it), anything
// else PD's HTTP API.
func (s *Server) tlsHandler(api http.Handler, missing map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			api.ServeHTTP(w, r)
			return
		}
		if missing[r.URL.Path] {
			// A trailers-only response: the status in the headers, no message.
			svc, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", strconv.Itoa(int(codes.Unimplemented)))
			w.Header().Set("Grpc-Message", fmt.Sprintf("unknown method %v for service %v", method, svc))
			w.WriteHeader(http.StatusOK)
			return
		}
		s.grpc.ServeHTTP(w, r)
	})
}

// splitListener routes each accepted connection by its first bytes: an
// HTTP/2 preface goes to gRPC, anything else to the HTTP server. PD serves
// both on one port, and the PD HTTP client finds the HTTP address through
// the gRPC member list, so they must share it.
func splitListener(l net.Listener) (net.Listener, net.Listener) {
	g := &chanListener{addr: l.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	h := &chanListener{addr: l.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		defer g.close()
		defer h.close()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go route(c, g, h)
		}
	}()
	return g, h
}

func route(c net.Conn, g, h *chanListener) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	head, err := br.Peek(3)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	target := h
	if string(head) == "PRI" {
		target = g
	}
	select {
	case target.ch <- pc:
	case <-target.done:
		_ = c.Close()
	}
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *chanListener) Close() error { l.close(); return nil }

func (l *chanListener) Addr() net.Addr { return l.addr }

var errNotBootstrapped = errors.New("cluster is not bootstrapped")
