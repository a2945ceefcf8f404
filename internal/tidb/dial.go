package tidb

import (
	"time"

	"google.golang.org/grpc"
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
	return (*TLS)(nil).DialOptions(k)
}
