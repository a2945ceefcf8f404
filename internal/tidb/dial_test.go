package tidb_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	channelzsvc "google.golang.org/grpc/channelz/service"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

func TestDefaultKeepaliveIsBRs(t *testing.T) {
	if tidb.DefaultKeepalive != (tidb.Keepalive{Time: 10 * time.Second, Timeout: 3 * time.Second}) {
		t.Fatalf("DefaultKeepalive = %+v, want BR's 10s/3s", tidb.DefaultKeepalive)
	}
}

// startKeepaliveTest runs t beside the other keepalive tests (each waits whole keepalive
// periods, gRPC's floor being 10 s) and returns its context and the process's channelz.
func startKeepaliveTest(t *testing.T, periods int) (context.Context, channelz) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skipf("waits %d keepalive periods (gRPC's floor is 10 s)", periods)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(periods)*10*time.Second+time.Minute)
	t.Cleanup(cancel)
	return ctx, startChannelz(t)
}

// channelz answers how many keepalive pings each client connection (socket) of this process
// sent, by the target it was dialed to.
type channelz struct{ c channelzpb.ChannelzClient }

func startChannelz(t *testing.T) channelz {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	channelzsvc.RegisterChannelzServiceToServer(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), tidb.DefaultKeepalive.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return channelz{channelzpb.NewChannelzClient(conn)}
}

// maxPings is the most keepalive pings one live connection to addr has sent.
func (z channelz) maxPings(ctx context.Context, addr string) (int64, error) {
	top, err := z.c.GetTopChannels(ctx, &channelzpb.GetTopChannelsRequest{MaxResults: 1000})
	if err != nil {
		return 0, err
	}
	var most int64
	for _, ch := range top.GetChannel() {
		if !strings.HasSuffix(ch.GetData().GetTarget(), addr) {
			continue
		}
		for _, ref := range ch.GetSubchannelRef() {
			sub, err := z.c.GetSubchannel(ctx, &channelzpb.GetSubchannelRequest{SubchannelId: ref.GetSubchannelId()})
			if err != nil {
				continue // closed meanwhile
			}
			for _, sref := range sub.GetSubchannel().GetSocketRef() {
				sock, err := z.c.GetSocket(ctx, &channelzpb.GetSocketRequest{SocketId: sref.GetSocketId()})
				if err == nil {
					most = max(most, sock.GetSocket().GetData().GetKeepAlivesSent())
				}
			}
		}
	}
	return most, nil
}

// waitPings waits until one connection to addr has sent n keepalive pings.
func (z channelz) waitPings(t *testing.T, ctx context.Context, addr string, n int64) {
	t.Helper()
	for {
		got, err := z.maxPings(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no connection to %s sent %d keepalive pings (most: %d): it was given up, or it never pinged", addr, n, got)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestKeepaliveConnectionsStayUp: the BR steps' connections to PD and TiKV ping while RPCs are
// in flight, and the doubles take those pings: one quiet stream to each stays up across five
// keepalive periods. A server refusing them (gRPC's default allows one ping per 5 minutes)
// ends the connection at the fourth, so no connection would reach five.
func TestKeepaliveConnectionsStayUp(t *testing.T) {
	const periods = 5
	ctx, z := startKeepaliveTest(t, periods) // its context outlives this function, as the parallel subtests do
	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	t.Run("TiKV", func(t *testing.T) {
		t.Parallel()
		addr := cl.Addr(1)
		client, closeConn, err := tidb.Plaintext.DialBackup(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = closeConn() }()
		stream, err := client.PrepareSnapshotBackup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lease := func() {
			t.Helper()
			if err := stream.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("the stream broke: %v", err)
			}
		}
		lease()
		z.waitPings(t, ctx, addr, periods)
		lease() // the quiet stream is still up
		if err := stream.Send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("PD", func(t *testing.T) {
		t.Parallel()
		addr := cl.PDAddr()
		conn, err := grpc.NewClient(addr, tidb.DefaultKeepalive.DialOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		client := pdpb.NewPDClient(conn)
		members, err := client.GetMembers(ctx, &pdpb.GetMembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		stream, err := client.Tso(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tso := func() {
			t.Helper()
			if err := stream.Send(&pdpb.TsoRequest{Header: &pdpb.RequestHeader{ClusterId: members.GetHeader().GetClusterId()}, Count: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("the stream broke: %v", err)
			}
		}
		tso()
		z.waitPings(t, ctx, addr, periods)
		tso()
	})
}

// TestPDClientKeepalive: the PD client the BR steps open pings once PD goes quiet (here a
// proxy that stops passing bytes, as a lost node does), so a dead PD is found in seconds.
func TestPDClientKeepalive(t *testing.T) {
	ctx, z := startKeepaliveTest(t, 1)
	// PD advertises the proxy, so the client's every connection goes through it.
	proxy := startProxy(t)
	cl, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: t.TempDir(), PD: pddouble.Config{AdvertiseURL: "http://" + proxy.addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	proxy.backend.Store(cl.PDAddr())
	pc, err := tidb.Plaintext.NewPDClient(ctx, []string{"http://" + proxy.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	proxy.quiet.Store(true)
	z.waitPings(t, ctx, proxy.addr, 1)
}

// proxy passes TCP connections to backend until quiet is set; then it drops every byte both
// ways, keeping the connections open.
type proxy struct {
	addr    string
	backend atomic.Value // string
	quiet   atomic.Bool
}

func startProxy(t *testing.T) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	p := &proxy{addr: lis.Addr().String()}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				_ = dst.Close()
				return
			}
			if !p.quiet.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					_ = src.Close()
					return
				}
			}
		}
	}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			backend, _ := p.backend.Load().(string)
			b, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
			go pipe(b, c)
			go pipe(c, b)
		}
	}()
	return p
}

// TestKeepaliveDialOptions: a connection made with a Keepalive's dial options pings its peer
// while a stream is open (the test's own parameters: gRPC's 10 s floor, a 1 s timeout).
func TestKeepaliveDialOptions(t *testing.T) {
	ctx, z := startKeepaliveTest(t, 1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), tidb.Keepalive{Time: 10 * time.Second, Timeout: time.Second}.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// A stream held open, so that the connection has an RPC in flight.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	watch, err := healthpb.NewHealthClient(conn).Watch(sctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	z.waitPings(t, ctx, lis.Addr().String(), 1)
	if s := conn.GetState(); s != connectivity.Ready {
		t.Errorf("connection %s after a ping, want Ready", s)
	}
}
