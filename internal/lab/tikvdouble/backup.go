package tikvdouble

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/gogo/protobuf/proto"
	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// backupService serves backup.Backup: the snapshot-backup preparation.
type backupService struct {
	brpb.UnimplementedBackupServer
	s *Store
}

// applyWait is one region's wait-apply: done once the peer applied
// target, failed when the region's term changes or it disappears.
type applyWait struct {
	region uint64
	target uint64
	term   uint64
	done   func(*errorpb.Error)
}

// registerWaitLocked starts the strict wait-apply of BR's prepare for r.
func (s *Store) registerWaitLocked(r *metapb.Region, done func(*errorpb.Error)) {
	p := s.peers[r.GetId()]
	if p == nil || p.uninit {
		done(&errorpb.Error{Message: "region not found", RegionNotFound: &errorpb.RegionNotFound{RegionId: r.GetId()}})
		return
	}
	e := r.GetRegionEpoch()
	if e.GetVersion() != p.region.GetRegionEpoch().GetVersion() || e.GetConfVer() != p.region.GetRegionEpoch().GetConfVer() {
		done(&errorpb.Error{Message: "epoch not match", EpochNotMatch: &errorpb.EpochNotMatch{CurrentRegions: []*metapb.Region{proto.Clone(p.region).(*metapb.Region)}}})
		return
	}
	w := &applyWait{region: r.GetId(), target: p.lastIndex(), term: p.term, done: done}
	if p.durableApplied >= w.target {
		done(nil)
		return
	}
	s.waiters = append(s.waiters, w)
}

func (s *Store) checkWaitersLocked() {
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		p := s.peers[w.region]
		var res *errorpb.Error
		switch {
		case p == nil:
			res = &errorpb.Error{Message: "region not found", RegionNotFound: &errorpb.RegionNotFound{RegionId: w.region}}
		case p.term != w.term:
			res = &errorpb.Error{Message: "term changed during wait apply", StaleCommand: &errorpb.StaleCommand{}}
		case p.durableApplied >= w.target:
		default:
			kept = append(kept, w)
			continue
		}
		done := w.done
		s.callbacks = append(s.callbacks, func() { done(res) })
	}
	s.waiters = kept
}

// refusePrepareSnapshotBackup turns PrepareSnapshotBackup away before any
// handler runs, with the status gRPC gives a method its server does not know
// (Config.NoLease).
func refusePrepareSnapshotBackup(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != "/backup.Backup/PrepareSnapshotBackup" {
		return ctx, nil
	}
	return ctx, status.Errorf(codes.Unimplemented, "unknown method PrepareSnapshotBackup for service backup.Backup")
}

// PrepareSnapshotBackup holds the admin-op lease and answers wait-applies.
// A new stream aborts the previous one; closing the stream leaves the lease
// to expire by itself; Finish resets it.
func (b *backupService) PrepareSnapshotBackup(stream brpb.Backup_PrepareSnapshotBackupServer) error {
	s := b.s
	s.mu.Lock()
	s.prepGen++
	gen := s.prepGen
	s.mu.Unlock()

	reqs := make(chan *brpb.PrepareSnapshotBackupRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	events := make(chan *brpb.PrepareSnapshotBackupResponse, 1024)
	aborted := time.NewTicker(s.cfg.Tick)
	defer aborted.Stop()
	for {
		select {
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-aborted.C:
			s.mu.Lock()
			cur := s.prepGen
			s.mu.Unlock()
			if cur != gen {
				return status.Error(codes.Canceled, "the loop has been aborted by server")
			}
		case ev := <-events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case r := <-reqs:
			switch r.GetTy() {
			case brpb.PrepareSnapshotBackupRequestType_UpdateLease:
				s.mu.Lock()
				valid := s.leaseActiveLocked()
				if until := s.now().Add(time.Duration(r.GetLeaseInSeconds()) * time.Second); until.After(s.leaseUntil) {
					s.leaseUntil = until
				}
				s.mu.Unlock()
				if err := stream.Send(&brpb.PrepareSnapshotBackupResponse{Ty: brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult, LastLeaseIsValid: valid}); err != nil {
					return err
				}
			case brpb.PrepareSnapshotBackupRequestType_WaitApply:
				s.mu.Lock()
				if !s.leaseActiveLocked() {
					s.mu.Unlock()
					return status.Error(codes.FailedPrecondition, "the lease has expired, you may not send `wait_apply` because it is no meaning")
				}
				for _, region := range r.GetRegions() {
					region := region
					s.registerWaitLocked(region, func(e *errorpb.Error) {
						ev := &brpb.PrepareSnapshotBackupResponse{Ty: brpb.PrepareSnapshotBackupEventType_WaitApplyDone, Region: region, Error: e}
						go func() {
							select {
							case events <- ev:
							case <-stream.Context().Done():
							}
						}()
					})
				}
				s.mu.Unlock()
				s.wake()
			case brpb.PrepareSnapshotBackupRequestType_Finish:
				s.mu.Lock()
				valid := s.leaseActiveLocked()
				s.leaseUntil = time.Time{}
				s.mu.Unlock()
				return stream.Send(&brpb.PrepareSnapshotBackupResponse{Ty: brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult, LastLeaseIsValid: valid})
			}
		}
	}
}

// CheckPendingAdminOp reports, per leader region, whether an admin command
// (split, conf change, merge) is in its log but not yet applied, or a merge
// is in flight.
func (b *backupService) CheckPendingAdminOp(_ *brpb.CheckAdminRequest, stream brpb.Backup_CheckPendingAdminOpServer) error {
	s := b.s
	s.mu.Lock()
	var out []*brpb.CheckAdminResponse
	for _, p := range s.peers {
		if p.role != leader {
			continue
		}
		out = append(out, &brpb.CheckAdminResponse{Region: proto.Clone(p.region).(*metapb.Region), HasPendingAdmin: adminPendingLocked(p)})
	}
	s.mu.Unlock()
	for _, r := range out {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}
