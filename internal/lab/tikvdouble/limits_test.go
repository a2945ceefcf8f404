package tikvdouble_test

import (
	"context"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// TestGRPCKeepsDefaultReceiveLimit: like TiKV's server with gRPC's default
// limit, a store refuses a request over 4 MiB with ResourceExhausted and
// reads one under it.
func TestGRPCKeepsDefaultReceiveLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{PD: pddouble.Config{OperatorRate: -1}})
	cc, err := grpc.NewClient(c.Store(1).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	kv := tikvpb.NewTikvClient(cc)
	if _, err := kv.KvGet(ctx, &kvrpcpb.GetRequest{Key: make([]byte, 3<<20), Version: 1}); err != nil {
		t.Fatalf("a 3 MiB request: %v", err)
	}
	_, err = kv.KvGet(ctx, &kvrpcpb.GetRequest{Key: make([]byte, 5<<20), Version: 1})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 5 MiB request = %v, want ResourceExhausted", err)
	}
}
