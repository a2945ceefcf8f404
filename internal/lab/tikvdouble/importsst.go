package tikvdouble

import (
	"context"
	"fmt"
	"time"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/import_sstpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// importService serves import_sstpb.ImportSST. The double stores no SST
// files; what it models is the older snapshot-backup operator's switch:
// SuspendImportRPC denies ingests for a while, so a backup that relies on
// it can be checked for renewing it (already_suspended) in time.
type importService struct {
	import_sstpb.UnimplementedImportSSTServer
	s *Store
}

// SuspendImportRPC suspends (or resumes) imports. As in TiKV a suspension
// sets the deadline to now+duration (it may shorten an earlier one), and the
// answer says whether imports were suspended at the time of the call.
func (i *importService) SuspendImportRPC(_ context.Context, req *import_sstpb.SuspendImportRPCRequest) (*import_sstpb.SuspendImportRPCResponse, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	was := now.Before(s.importSuspendedUntil)
	if req.GetShouldSuspendImports() {
		s.importSuspendedUntil = now.Add(time.Duration(req.GetDurationInSecs()) * time.Second)
		s.log.Info("Suspending imports", "caller", req.GetCaller(), "for", time.Duration(req.GetDurationInSecs())*time.Second)
	} else {
		s.importSuspendedUntil = time.Time{}
	}
	return &import_sstpb.SuspendImportRPCResponse{AlreadySuspended: was}, nil
}

// suspendedError is the refusal of an import while suspended, or nil.
func (s *Store) suspendedError() *errorpb.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := s.importSuspendedUntil.Sub(s.now())
	if left <= 0 {
		return nil
	}
	return &errorpb.Error{
		Message:      "[Suspended] Preparing disk snapshot backup, ingests and some of admin commands are suspended.",
		ServerIsBusy: &errorpb.ServerIsBusy{Reason: "suspended", BackoffMs: uint64(left.Milliseconds())},
	}
}

// LeaseRefusal is the reason TiKV's snapshot-backup observer gives when it refuses to propose
// an ingest (or an admin command) while a PrepareSnapshotBackup lease holds
// (components/raftstore/src/store/snapshot_backup.rs, PrepareDiskSnapObserver.reject: a
// coprocessor RequireDelay error, which raftstore answers as a ServerIsBusy region error with
// this reason and the lease's remaining time as its backoff).
const LeaseRefusal = "[Suspended] Preparing disk snapshot backup, ingests and some of admin commands are suspended."

// leaseError is the refusal of an ingest proposal under the lease, or nil.
func (s *Store) leaseError() *errorpb.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leaseActiveLocked() {
		return nil
	}
	left := max(s.leaseUntil.Unix()-s.now().Unix(), 0) // TiKV counts whole seconds
	return &errorpb.Error{
		Message:      fmt.Sprintf("Coprocessor required retry after %ds, hint: %q", left, LeaseRefusal),
		ServerIsBusy: &errorpb.ServerIsBusy{Reason: LeaseRefusal, BackoffMs: uint64(left) * 1000},
	}
}

// ingestError is why an ingest is refused, or nil: first the suspension (checked as the
// request arrives), then the lease (checked when the ingest is proposed).
func (s *Store) ingestError() *errorpb.Error {
	if e := s.suspendedError(); e != nil {
		return e
	}
	return s.leaseError()
}

// Ingest is refused while imports are suspended or a PrepareSnapshotBackup lease holds;
// otherwise the double has nothing to ingest.
func (i *importService) Ingest(_ context.Context, _ *import_sstpb.IngestRequest) (*import_sstpb.IngestResponse, error) {
	if e := i.s.ingestError(); e != nil {
		return &import_sstpb.IngestResponse{Error: e}, nil
	}
	return nil, status.Error(codes.Unimplemented, "the TiKV double stores no SST files")
}

// MultiIngest is refused like Ingest.
func (i *importService) MultiIngest(_ context.Context, _ *import_sstpb.MultiIngestRequest) (*import_sstpb.IngestResponse, error) {
	if e := i.s.ingestError(); e != nil {
		return &import_sstpb.IngestResponse{Error: e}, nil
	}
	return nil, status.Error(codes.Unimplemented, "the TiKV double stores no SST files")
}
