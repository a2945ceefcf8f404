package tidb

import (
	"context"
	"fmt"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Keepalive is how a connection to PD or TiKV finds out that its peer is gone while RPCs are
// in flight: it pings every Time and gives the connection up when a ping is not answered
// within Timeout. Without it a stream to a TiKV that vanished (node lost, network cut) waits
// for the kernel's TCP timeout, minutes, before it fails.
type Keepalive struct {
	Time, Timeout time.Duration
}

// DefaultKeepalive is what every connection the BR steps open uses: BR's own defaults, a ping
// every 10 s, 3 s to answer. gRPC pings no more often than every 10 s whatever Time says.
var DefaultKeepalive = Keepalive{Time: 10 * time.Second, Timeout: 3 * time.Second}

// DialOption is the keepalive as a gRPC dial option. Pings go out only while RPCs are in
// flight: PD's and TiKV's servers refuse pings on idle connections by default.
func (k Keepalive) DialOption() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: k.Time, Timeout: k.Timeout})
}

// DialOptions are the options of a plaintext connection with this keepalive.
func (k Keepalive) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), k.DialOption()}
}

// DialTiKV opens a plaintext connection to a TiKV store with DefaultKeepalive. It connects
// lazily: ctx bounds nothing here, the first RPC's context bounds connecting.
func DialTiKV(_ context.Context, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, DefaultKeepalive.DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dial TiKV %s: %w", addr, err)
	}
	return conn, nil
}

// DialBackup opens a Backup client to a TiKV store (DialTiKV), connecting in the background
// at once rather than at the first RPC; close releases the connection.
func DialBackup(ctx context.Context, addr string) (client brpb.BackupClient, close func() error, err error) {
	conn, err := DialTiKV(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	conn.Connect()
	return brpb.NewBackupClient(conn), conn.Close, nil
}

// NewPDClient connects PD's gRPC client (plaintext) with DefaultKeepalive on its connections.
// The client keeps ctx as its background context: pass one that outlives the step's
// cancellation when lifting must still reach PD, and Close it.
func NewPDClient(ctx context.Context, addrs []string) (pd.Client, error) {
	return pd.NewClientWithContext(ctx, addrs, pd.SecurityOption{}, opt.WithGRPCDialOptions(DefaultKeepalive.DialOption()))
}
