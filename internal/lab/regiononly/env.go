package regiononly

import (
	"context"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"

	"github.com/fedbr/fedbr/internal/tidb"
)

// Env is a region-only cluster with the real PD clients on it, for tests and benchmarks.
type Env struct {
	Cluster *Cluster
	PD      pd.Client
	HTTP    pdhttp.Client
	// Keepalive is what the PD client's connections use, and what Dial's do.
	Keepalive tidb.Keepalive
}

// StartEnv starts an Env that ends with t, with the steps' own keepalive; the PD double's data
// goes to a temporary directory.
func StartEnv(t testing.TB, cfg Config) *Env {
	return startEnv(t, cfg, tidb.DefaultKeepalive)
}

// BenchKeepalive is the benchmarks' keepalive: BR's 10 s pings with a minute, not 3 s, to
// answer. A benchmark runs the steps and every double in one process; on a machine where that
// process gets a fraction of a core, a ping's answer can wait longer than 3 s for the CPU,
// and the steps would measure the machine's load, not their own work.
var BenchKeepalive = tidb.Keepalive{Time: 10 * time.Second, Timeout: time.Minute}

// StartBenchEnv starts an Env at the benchmarks' scale (BenchRegions over BenchStores) with
// BenchKeepalive.
func StartBenchEnv(b *testing.B) *Env {
	return startEnv(b, Config{Regions: BenchRegions, Stores: BenchStores}, BenchKeepalive)
}

func startEnv(t testing.TB, cfg Config, k tidb.Keepalive) *Env {
	t.Helper()
	cfg.DataDir = t.TempDir()
	c, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pc, err := pd.NewClientWithContext(t.Context(), []string{c.PDAddr()}, pd.SecurityOption{}, opt.WithGRPCDialOptions(k.DialOption()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	t.Cleanup(hc.Close)
	return &Env{Cluster: c, PD: pc, HTTP: hc, Keepalive: k}
}

// Dial opens a plaintext connection to a store with the Env's keepalive (the steps' dialers
// with DefaultKeepalive, tidb.DialTiKV and tidb.DialBackup, otherwise).
func (e *Env) Dial(_ context.Context, addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, e.Keepalive.DialOptions()...)
}

// DialBackup opens a Backup client to a store, as Dial (connecting at once, as
// tidb.DialBackup); close releases the connection.
func (e *Env) DialBackup(ctx context.Context, addr string) (client brpb.BackupClient, close func() error, err error) {
	cc, err := e.Dial(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	cc.Connect()
	return brpb.NewBackupClient(cc), cc.Close, nil
}
