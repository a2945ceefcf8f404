package pddouble

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/clients/router"
	pdhttp "github.com/tikv/pd/client/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// runGC runs the GC worker once, as its loop does every run interval.
func runGC(s *Server) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, _ := s.runGCLocked()
	return sp
}

// TestGCWorkerAdvancesSafePoint: each run moves the GC safe point to the
// TSO's physical time minus the life time, held back by the lowest live
// service safe point, never backwards, and not before bootstrap or while
// snapshot-recovering; GetGCSafePoint (what TiKV polls) answers it.
func TestGCWorkerAdvancesSafePoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := newFakeClock()
	const life = 10 * time.Second
	// The loop's own runs (an hour apart) stay out of the way; runGC drives it.
	s := startPD(t, Config{Now: clock.Now, GCLifeTime: life, GCRunInterval: time.Hour})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	lifeAgo := func() uint64 { return composeTS(clock.Now().Add(-life).UnixMilli(), 0) }

	if sp := runGC(s); sp != 0 {
		t.Fatalf("GC ran on a cluster that is not bootstrapped: safe point %d", sp)
	}
	seedCluster(t, ctx, raw, s.ClusterID())
	want := lifeAgo()
	if sp := runGC(s); sp != want {
		t.Fatalf("safe point after a run = %d, want now - life time = %d", sp, want)
	}
	h := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	if r, err := raw.GetGCSafePoint(ctx, &pdpb.GetGCSafePointRequest{Header: h}); err != nil || r.GetSafePoint() != want {
		t.Fatalf("GetGCSafePoint = %v, %v; want %d", r, err, want)
	}

	// A service safe point (BR's GC pin) holds the worker back while it lives.
	pin := want + 1000
	// PD answers the minimum: gc_worker's, which the run raised to the safe point.
	if min, err := s.updateServiceSafePoint("br", 60, pin); err != nil || min.SafePoint != want || min.ServiceID != GCWorkerService {
		t.Fatalf("pin = %+v, %v; want gc_worker's %d", min, err, want)
	}
	hc := pdhttp.NewClient("test", []string{s.URL()})
	defer hc.Close()
	list, err := hc.GetGCSafePoint(ctx)
	if err != nil || list.GCSafePoint != want || list.MinServiceGcSafepoint != want || len(list.ServiceGCSafepoints) != 2 ||
		list.ServiceGCSafepoints[0].ServiceID != "br" || list.ServiceGCSafepoints[0].SafePoint != pin ||
		list.ServiceGCSafepoints[1].ServiceID != GCWorkerService || list.ServiceGCSafepoints[1].SafePoint != want {
		t.Fatalf("GET /gc/safepoint = %+v, %v", list, err)
	}
	clock.Add(30 * time.Second)
	if sp := runGC(s); sp != pin {
		t.Fatalf("safe point with a pin = %d, want the pin %d", sp, pin)
	}
	if st := s.GCStatus(); st.Target != lifeAgo() || st.SafePoint != pin {
		t.Fatalf("GC status %+v: want target %d held at %d", st, lifeAgo(), pin)
	}
	clock.Add(31 * time.Second) // the pin's TTL ends
	if sp := runGC(s); sp != lifeAgo() {
		t.Fatalf("safe point after the pin expired = %d, want %d", sp, lifeAgo())
	}

	// Never backwards, even when the clock is.
	before := lifeAgo()
	clock.Add(-time.Minute)
	if sp := runGC(s); sp != before {
		t.Fatalf("safe point moved from %d to %d with the clock going back", before, sp)
	}

	// Not while a restore holds the snapshot-recovering mark.
	clock.Add(2 * time.Minute)
	if err := s.setRecovering(true); err != nil {
		t.Fatal(err)
	}
	if sp := runGC(s); sp != before {
		t.Fatalf("safe point moved to %d while snapshot-recovering", sp)
	}
	if err := s.setRecovering(false); err != nil {
		t.Fatal(err)
	}
	if sp := runGC(s); sp != lifeAgo() {
		t.Fatalf("safe point after the mark was lifted = %d, want %d", sp, lifeAgo())
	}

	// The worker reads the TSO, not only the clock: a TSO pushed ahead
	// (reset-ts) moves the safe point with it.
	ahead := clock.Now().Add(time.Hour)
	if err := s.resetTS(composeTS(ahead.UnixMilli(), 0), false); err != nil {
		t.Fatal(err)
	}
	if sp, want := runGC(s), composeTS(ahead.Add(-life).UnixMilli(), 0); sp != want {
		t.Fatalf("safe point with the TSO an hour ahead = %d, want %d", sp, want)
	}
}

// TestGCWorkerRunsOnItsOwn: with the defaults' machinery (no test hook),
// the safe point moves by itself every run interval and survives a restart.
func TestGCWorkerRunsOnItsOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startPD(t, Config{DataDir: dir, GCLifeTime: time.Millisecond, GCRunInterval: 10 * time.Millisecond})
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())
	c, err := pd.NewClientWithContext(ctx, []string{s.URL()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, l, err := c.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := composeTS(p, l)
	// BR's way of reading the GC safe point: UpdateGCSafePoint(0).
	var sp uint64
	for sp <= now-composeTS(time.Second.Milliseconds(), 0) {
		if sp, err = c.UpdateGCSafePoint(ctx, 0); err != nil { // BR reads the safe point this way
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("GC safe point stuck at %d", sp)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := startPD(t, Config{DataDir: dir, GCLifeTime: -1})
	defer func() { _ = s2.Close() }()
	if got := s2.gcSafePoint(); got < sp {
		t.Fatalf("GC safe point after a restart = %d, want at least %d", got, sp)
	}
}

// TestAPIv75HasNoBatchScanRegions: PD v7.5 has no BatchScanRegions; the real
// PD client gets Unimplemented, the same status a server without the method
// gives any method it does not know, and ScanRegions still serves.
func TestAPIv75HasNoBatchScanRegions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startPD(t, Config{API: APIv75})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())
	c, err := pd.NewClientWithContext(ctx, []string{s.URL()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	_, err = c.BatchScanRegions(ctx, []router.KeyRange{{StartKey: []byte(""), EndKey: []byte("")}}, 10)
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("BatchScanRegions on v7.5 = %v (code %v), want Unimplemented", err, status.Code(err))
	}
	rs, err := c.ScanRegions(ctx, []byte(""), []byte(""), 10) //nolint:staticcheck // the v7.5 scan
	if err != nil || len(rs) != 2 {
		t.Fatalf("ScanRegions on v7.5 = %v, %v", rs, err)
	}

	// Byte for byte what gRPC answers for a method its server does not have.
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	unknown := cc.Invoke(ctx, "/pdpb.PD/NoSuchMethod", &pdpb.BatchScanRegionsRequest{}, &pdpb.BatchScanRegionsResponse{})
	_, missing := raw.BatchScanRegions(ctx, &pdpb.BatchScanRegionsRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()}})
	want := strings.ReplaceAll(status.Convert(unknown).Message(), "NoSuchMethod", "BatchScanRegions")
	if status.Code(unknown) != codes.Unimplemented || status.Code(missing) != codes.Unimplemented || status.Convert(missing).Message() != want {
		t.Fatalf("missing method answers %v; a server without a method answers %v", missing, unknown)
	}

	h := pdhttp.NewClient("test", []string{s.URL()})
	defer h.Close()
	if v, err := h.GetPDVersion(ctx); err != nil || !strings.Contains(v, "7.5.0") {
		t.Fatalf("version = %q, %v; want 7.5", v, err)
	}
}

func TestUnknownAPIRefused(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	if s, err := Start(context.Background(), Config{DataDir: t.TempDir(), API: "v6.5"}, lis); err == nil {
		_ = s.Close()
		t.Fatal("an unknown API version was accepted")
	}
}

// TestGRPCKeepsDefaultReceiveLimit: like PD, the double refuses a request
// over gRPC's default 4 MiB with ResourceExhausted and serves one under it.
func TestGRPCKeepsDefaultReceiveLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startPD(t, Config{})
	defer func() { _ = s.Close() }()
	raw := rawClient(t, s)
	seedCluster(t, ctx, raw, s.ClusterID())
	h := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	if _, err := raw.GetRegion(ctx, &pdpb.GetRegionRequest{Header: h, RegionKey: make([]byte, 3<<20)}); err != nil {
		t.Fatalf("a 3 MiB request: %v", err)
	}
	_, err := raw.GetRegion(ctx, &pdpb.GetRegionRequest{Header: h, RegionKey: make([]byte, 5<<20)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 5 MiB request = %v, want ResourceExhausted", err)
	}
}
