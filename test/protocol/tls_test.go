package protocol

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

// startTLSCluster runs three TiKV doubles and a PD double that serve (and dial each other)
// only over mutual TLS with a fresh lab CA, and returns the client side as the steps load it
// from --ca, --cert and --key. The caller closes the cluster.
func startTLSCluster(t *testing.T, ctx context.Context) (*tidbcluster.Cluster, tidbcluster.Config, *labtls.Set, *tidb.TLS) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles over TLS")
	}
	set, err := labtls.New(filepath.Join(t.TempDir(), "cluster-client-secret"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := tidb.LoadTLS(set.Paths())
	if err != nil {
		t.Fatal(err)
	}
	cfg := tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("g"), []byte("p")},
		Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}, TLS: set.Node()}
	c, err := tidbcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLeaders(ctx); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, cfg, set, client
}

// TestTLS: on a cluster that speaks only mutual TLS, the steps' one TLS client (tidb.TLS, what
// --ca, --cert and --key load) carries the pause (PD gRPC and HTTP, every TiKV's
// PrepareSnapshotBackup stream), the snapshot step's cluster check (every TiKV, PD's regions)
// and restore-data (PD, every TiKV's RecoverRegion and flashback) on the same volumes restarted
// in recovery mode.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	live, cfg, _, client := startTLSCluster(t, ctx)
	closeLive := sync.OnceFunc(live.Close)
	defer closeLive()
	pc, err := client.NewPDClient(ctx, []string{live.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	hc, err := client.NewPDHTTPClient("fedbr-test", []string{live.PDAddr()})
	if err != nil {
		t.Fatalf("PD's HTTP client over TLS did not start: %v", err)
	}
	defer hc.Close()

	// pause, and the cluster check while it holds.
	pctx, stopPause := context.WithCancel(ctx)
	ready := make(chan pause.Status, 1)
	done := make(chan error, 1)
	go func() {
		done <- pause.Run(pctx, pause.Deps{PD: pc, HTTP: hc, Dial: client.DialBackup, Log: t.Logf},
			pause.Config{TTL: time.Minute, CleanupTimeout: 10 * time.Second}, func(s pause.Status) {
				if s.Phase == pause.PhaseReady {
					ready <- s
				}
			})
	}()
	var paused pause.Status
	select {
	case paused = <-ready:
	case err := <-done:
		t.Fatalf("pause over TLS ended before Ready: %v", err)
	}
	if paused.Stores != 3 {
		t.Errorf("pause leased %d stores, want 3", paused.Stores)
	}
	var log bytes.Buffer
	if err := snapshot.CheckCluster(ctx, snapshot.Deps{PD: pc, Dial: client.DialBackup}, &log); err != nil {
		t.Fatalf("cluster check over TLS: %v\n%s", err, log.String())
	}
	stopPause()
	if err := <-done; err != nil {
		t.Fatalf("pause over TLS, stopped: %v", err)
	}
	physical, logical, err := pc.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(physical)<<18 | uint64(logical)
	closeLive()

	// restore-data: a fresh PD over the same volumes, marked snapshot-recovering, the stores in
	// recovery mode; all over TLS.
	cfg.StoreDirs = map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		cfg.StoreDirs[id] = live.StoreDir(id)
	}
	cfg.Dir = t.TempDir()
	c, err := tidbcluster.StartPD(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rh, err := client.NewPDHTTPClient("fedbr-test", []string{c.PDAddr()})
	if err != nil {
		t.Fatalf("PD's HTTP client over TLS did not start: %v", err)
	}
	defer rh.Close()
	if err := rh.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rh.ResetTS(ctx, ts, true); err != nil {
		t.Fatal(err)
	}
	if err := c.StartStores(ctx); err != nil {
		t.Fatal(err)
	}
	rpc, err := client.NewPDClient(ctx, []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Close()
	res, err := restoredata.Run(ctx, restoredata.Deps{PD: rpc, HTTP: rh, Dial: client.DialTiKV, Log: t.Logf},
		restoredata.Config{ResolvedTS: ts, Stores: 3, Backoff: 100 * time.Millisecond, Poll: 20 * time.Millisecond, WaitStoresTimeout: time.Minute})
	if err != nil {
		t.Fatalf("restore-data over TLS: %v", err)
	}
	if res.Regions < 3 || res.Leaders < 3 {
		t.Errorf("restore-data over TLS planned %d regions and %d leaders, want at least 3 of each", res.Regions, res.Leaders)
	}
}

// TestTLSRefusedWithoutTheCA: a step run without --ca, --cert and --key dials in plaintext and a
// TLS TiKV ends the connection before gRPC's preface; one given another CA's files refuses the
// TiKV's certificate (x509: unknown authority), for TiKV and for PD's HTTP API alike; and
// --cert and --key without --ca are refused before anything is dialled.
func TestTLSRefusedWithoutTheCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, set, client := startTLSCluster(t, ctx)
	defer c.Close()
	_, cert, key := set.Paths()
	if _, err := tidb.LoadTLS("", cert, key); err == nil || !strings.Contains(err.Error(), "--ca, --cert and --key go together") {
		t.Errorf("--cert and --key without --ca = %v, want refused at flag time", err)
	}

	other, err := labtls.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, _ := other.Paths()
	wrong, err := tidb.LoadTLS(otherCA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	kvGet := func(c *tidb.TLS, addr string) error {
		cc, err := c.DialTiKV(ctx, addr)
		if err != nil {
			return err
		}
		defer func() { _ = cc.Close() }()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		_, err = tikvpb.NewTikvClient(cc).KvGet(rctx, &kvrpcpb.GetRequest{Key: []byte("a"), Version: 1})
		return err
	}
	addr := c.Addr(1)
	if err := kvGet(client, addr); err != nil {
		t.Fatalf("the control, with the right CA, failed to connect: %v", err)
	}
	err = kvGet(tidb.Plaintext, addr)
	t.Logf("plaintext to a TLS TiKV: %v", err)
	if err == nil || !strings.Contains(err.Error(), "error reading server preface") {
		t.Errorf("plaintext to a TLS TiKV = %v, want the connection refused before gRPC's preface", err)
	}
	if err := kvGet(wrong, addr); err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("TLS with another CA to TiKV = %v, want x509: certificate signed by unknown authority", err)
	}
	_, err = wrong.ServiceSafePoints(ctx, "https://"+c.PDAddr())
	if err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("TLS with another CA to PD's HTTP API = %v, want x509: certificate signed by unknown authority", err)
	}
	if _, err := client.ServiceSafePoints(ctx, "https://"+c.PDAddr()); err != nil {
		t.Errorf("the control, PD's HTTP API with the right CA: %v", err)
	}
}
