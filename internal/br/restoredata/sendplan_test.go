package restoredata

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/recovery"
)

// refusingTiKV ends every RecoverRegion at once, before reading the plan.
type refusingTiKV struct {
	recoverdatapb.UnimplementedRecoverDataServer
}

func (*refusingTiKV) RecoverRegion(recoverdatapb.RecoverData_RecoverRegionServer) error {
	return status.Error(codes.FailedPrecondition, "store is not in recovery mode")
}

// TestSendPlanReadsTheStatusOfAStreamEndedEarly: a store that ends its RecoverRegion stream
// while the plan is still being sent makes Send return io.EOF, which says nothing; the step
// fails with the store's own status instead. The plan is large enough (megabytes) that the
// sender is still sending when the store's answer arrives.
func TestSendPlanReadsTheStatusOfAStreamEndedEarly(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	recoverdatapb.RegisterRecoverDataServer(srv, &refusingTiKV{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	r := &run{conns: map[uint64]*conn{}, d: Deps{Dial: func(_ context.Context, addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}}}
	defer r.close()
	cmds := make([]recovery.Command, 500_000)
	for i := range cmds {
		cmds[i] = recovery.Command{RegionID: uint64(i + 1), AsLeader: true}
	}
	err = r.sendStore(context.Background(), &metapb.Store{Id: 7, Address: lis.Addr().String()}, cmds)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "store is not in recovery mode") || !strings.Contains(err.Error(), "store 7") {
		t.Fatalf("sendStore to a store that refused the stream = %v, want its FailedPrecondition status naming store 7", err)
	}
}
