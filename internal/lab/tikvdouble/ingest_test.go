package tikvdouble_test

import (
	"context"
	"strings"
	"testing"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/import_sstpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// TestIngestRefusedUnderTheLease: while a PrepareSnapshotBackup lease holds, an ingest is
// refused with TiKV's snapshot-backup observer's error (ServerIsBusy, reason
// tikvdouble.LeaseRefusal, backoff the lease's remaining time); Finish lifts the refusal (the double then has nothing to
// ingest: Unimplemented).
func TestIngestRefusedUnderTheLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{PD: pddouble.Config{OperatorRate: -1}})
	cc, err := grpc.NewClient(c.Store(1).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	ic := import_sstpb.NewImportSSTClient(cc)
	ingest := func() (*errorpb.Error, error) {
		t.Helper()
		r, err := ic.Ingest(ctx, &import_sstpb.IngestRequest{})
		return r.GetError(), err
	}
	multi := func() (*errorpb.Error, error) {
		t.Helper()
		r, err := ic.MultiIngest(ctx, &import_sstpb.MultiIngestRequest{})
		return r.GetError(), err
	}
	if e, err := ingest(); e != nil || status.Code(err) != codes.Unimplemented {
		t.Fatalf("ingest without a lease: %v %v, want Unimplemented (nothing to ingest)", e, err)
	}
	stream, err := brpb.NewBackupClient(cc).PrepareSnapshotBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *brpb.PrepareSnapshotBackupRequest) {
		t.Helper()
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: 60})
	for name, call := range map[string]func() (*errorpb.Error, error){"Ingest": ingest, "MultiIngest": multi} {
		e, err := call()
		if busy := e.GetServerIsBusy(); err != nil || busy.GetReason() != tikvdouble.LeaseRefusal || busy.GetBackoffMs() == 0 || busy.GetBackoffMs() > 60_000 ||
			!strings.HasPrefix(e.GetMessage(), "Coprocessor required retry after ") {
			t.Errorf("%s under the lease: %v %v, want ServerIsBusy %q with the lease's remaining time", name, e, err, tikvdouble.LeaseRefusal)
		}
	}
	send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish})
	if e, err := ingest(); e != nil || status.Code(err) != codes.Unimplemented {
		t.Fatalf("ingest after Finish: %v %v, want Unimplemented", e, err)
	}
}
