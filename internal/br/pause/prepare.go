package pause

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/tidb"
)

// Dialer opens a Backup client to a TiKV address; close releases the connection.
type Dialer func(ctx context.Context, addr string) (client brpb.BackupClient, close func() error, err error)

// storeStream is one TiKV's PrepareSnapshotBackup stream.
type storeStream struct {
	id     uint64
	addr   string
	stream brpb.Backup_PrepareSnapshotBackupClient
	close  func() error
	cancel context.CancelFunc
	sendMu sync.Mutex
	// done is closed when the stream's receiver saw its end (TiKV answered Finish, or the
	// stream broke).
	done chan struct{}
}

func (s *storeStream) send(req *brpb.PrepareSnapshotBackupRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// event is one response (or the end) of a store's stream.
type event struct {
	store uint64
	resp  *brpb.PrepareSnapshotBackupResponse
	err   error
}

// preparer holds the leases and drives the wait-apply.
type preparer struct {
	pd PD
	// regions scans PD's regions in pages (made from pd).
	regions *tidb.RegionScanner
	dial    Dialer
	// dialTimeout bounds each attempt to connect to a store: dial, stream, first lease.
	dialTimeout time.Duration
	lease       time.Duration
	backoff     time.Duration
	maxRounds   int
	log         func(format string, args ...any)

	streams map[uint64]*storeStream
	events  chan event
	// off is the Unsafe.NoLease negative control: no store is connected to, leased or waited on.
	off bool
}

// storeByID reads one store's current record from PD.
func storeByID(ctx context.Context, pd PD, id uint64) (*metapb.Store, error) {
	stores, err := tidb.TiKVStores(ctx, pd)
	if err != nil {
		return nil, err
	}
	for _, s := range stores {
		if s.GetId() == id {
			return s, nil
		}
	}
	return nil, fmt.Errorf("store %d is gone from PD", id)
}

// ErrLeaseUnsupported fails the pause at once when a TiKV answers PrepareSnapshotBackup with
// Unimplemented: it is older than the lease, so admin operations cannot be held off on it
// however long the pause retries. The releases that serve it were read at tikv/tikv's tags
// (docs/compatibility.md).
var ErrLeaseUnsupported = errors.New("TiKV does not support PrepareSnapshotBackup (the admin-operation lease; TiKV v6.5.8+, v7.5.1+ and v8.0.0+ serve it)")

// connect opens a stream to every store and takes the first lease on each, all stores at once:
// the pause takes hold in the time of the slowest store, not of their sum (the GC pin is already
// placed). A store that cannot be reached, or whose coprocessor is not ready yet, is retried
// until ctx ends. The first store that fails for good (an older TiKV) ends the others' attempts
// and is the error; when ctx ends first, the error names every store not connected by then.
// Every lease taken is kept either way, so Finish ends it.
func (p *preparer) connect(parent context.Context, stores []*metapb.Store) error {
	p.streams = map[uint64]*storeStream{}
	p.events = make(chan event, 1024)
	if p.off {
		return nil
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	type opened struct {
		i   int
		s   *storeStream
		err error
	}
	results := make(chan opened, len(stores))
	for i, st := range stores {
		go func() {
			s, err := p.connectStore(ctx, st)
			results <- opened{i, s, err}
		}()
	}
	var first error
	failed := make([]error, len(stores))
	for range stores {
		r := <-results
		if r.err != nil {
			failed[r.i] = r.err
			if first == nil {
				first = r.err
				cancel()
			}
			continue
		}
		p.keep(r.s) // from now on, while the other stores connect
	}
	if first != nil && parent.Err() != nil {
		return errors.Join(failed...) // in the stores' order; nil entries are dropped
	}
	return first
}

// connectStore takes the first lease on one store, retrying until ctx ends.
func (p *preparer) connectStore(ctx context.Context, st *metapb.Store) (*storeStream, error) {
	for attempt := 1; ; attempt++ {
		s, err := p.open(ctx, st)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, ErrLeaseUnsupported) {
			return nil, err // no retry makes an older TiKV grow the method
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to store %d at %s: %w", st.GetId(), st.GetAddress(), ctx.Err())
		}
		p.log("Connecting to store %d at %s failed (attempt %d), retrying: %v", st.GetId(), st.GetAddress(), attempt, err)
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt)*time.Second, 10*time.Second)):
		}
		// A restarted TiKV may come back at another address: ask PD again.
		if fresh, err := storeByID(ctx, p.pd, st.GetId()); err == nil {
			st = fresh
		}
	}
}

// open dials one store, opens its stream and takes the first lease, all within dialTimeout
// and ctx: a TiKV that accepts the stream and never answers fails the attempt instead of
// holding the pause.
func (p *preparer) open(ctx context.Context, st *metapb.Store) (*storeStream, error) {
	actx, cancelAttempt := context.WithTimeout(ctx, p.dialTimeout)
	defer cancelAttempt()
	client, closeConn, err := p.dial(actx, st.GetAddress())
	if err != nil {
		return nil, err
	}
	// The stream outlives ctx (Finish is sent on it after ctx ended), but until its first lease
	// is answered the attempt's end ends it.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(actx, cancel)
	fail := func(err error) (*storeStream, error) {
		cancel()
		_ = closeConn()
		if actx.Err() != nil {
			return nil, fmt.Errorf("no lease within %s: %w", p.dialTimeout, err)
		}
		return nil, err
	}
	stream, err := client.PrepareSnapshotBackup(sctx)
	if err != nil {
		return fail(err)
	}
	s := &storeStream{id: st.GetId(), addr: st.GetAddress(), stream: stream, close: closeConn, cancel: cancel, done: make(chan struct{})}
	// A Send that finds the stream already ended says only io.EOF; the Recv below reads why.
	if err := s.send(p.leaseRequest()); err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	resp, err := stream.Recv()
	if status.Code(err) == codes.Unimplemented {
		version := st.GetVersion()
		if version == "" {
			version = "version not reported"
		}
		return fail(fmt.Errorf("%w: store %d at %s (TiKV %s): %w", ErrLeaseUnsupported, st.GetId(), st.GetAddress(), version, err))
	}
	if err != nil {
		return fail(err)
	}
	if !unwatch() {
		return fail(actx.Err()) // the attempt ended just as the answer came
	}
	if resp.GetTy() != brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult {
		return fail(fmt.Errorf("store %d answered the first lease with %v", st.GetId(), resp.GetTy()))
	}
	return s, nil
}

func (p *preparer) leaseRequest() *brpb.PrepareSnapshotBackupRequest {
	return &brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_UpdateLease, LeaseInSeconds: uint64(p.lease / time.Second)} //nolint:gosec // G115: the lease is --ttl, validated to be at least 3s
}

func (p *preparer) receive(s *storeStream) {
	defer close(s.done)
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			p.events <- event{store: s.id, err: err}
			return
		}
		p.events <- event{store: s.id, resp: resp}
	}
}

// keepLease renews the lease every quarter lease until the stream ends.
func (p *preparer) keepLease(s *storeStream) {
	t := time.NewTicker(p.lease / 4)
	defer t.Stop()
	for {
		select {
		case <-s.stream.Context().Done():
			return
		case <-t.C:
			if err := s.send(p.leaseRequest()); err != nil {
				return // the receiver reports the broken stream
			}
		}
	}
}

// streamError turns a stream event into the error that ends the pause, or nil.
func streamError(e event) error {
	if e.err != nil {
		if errors.Is(e.err, io.EOF) {
			return fmt.Errorf("store %d closed its PrepareSnapshotBackup stream: the lease is gone", e.store)
		}
		return fmt.Errorf("store %d PrepareSnapshotBackup stream broke: %w", e.store, e.err)
	}
	if e.resp.GetTy() == brpb.PrepareSnapshotBackupEventType_UpdateLeaseResult && !e.resp.GetLastLeaseIsValid() {
		return fmt.Errorf("store %d lost its lease: admin operations may have run", e.store)
	}
	return nil
}

// waitApply makes every region's leader apply its log up to what it has, over the whole key
// space, re-loading regions that moved.
func (p *preparer) waitApply(ctx context.Context) error {
	if p.off {
		return nil
	}
	w := newWaitApply(p.maxRounds)
	ranges, err := w.Start()
	for {
		if err != nil {
			return err
		}
		if err := p.sendRanges(ctx, w, ranges); err != nil {
			return err
		}
		for !w.Idle() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case e := <-p.events:
				if err := streamError(e); err != nil {
					return err
				}
				if e.resp.GetTy() != brpb.PrepareSnapshotBackupEventType_WaitApplyDone {
					continue
				}
				r := e.resp.GetRegion()
				ref := regionRef{ID: r.GetId(), ConfVer: r.GetRegionEpoch().GetConfVer(), Version: r.GetRegionEpoch().GetVersion(), Start: r.GetStartKey(), End: r.GetEndKey()}
				if !w.Done(ref, e.resp.GetError() != nil) {
					p.log("Ignoring a stale wait-apply answer for region %d from store %d", r.GetId(), e.store)
				}
			}
		}
		if w.HasFailures() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(p.backoff):
			}
		}
		ranges, err = w.Next()
		if err == nil && ranges == nil {
			return nil
		}
	}
}

// sendRanges loads the regions of ranges from PD and sends each to its leader's stream, a page
// of PD's regions at a time: only one page of PD's answer is held at once, not a million
// regions (issue 44).
func (p *preparer) sendRanges(ctx context.Context, w *waitApply, ranges []keyRange) error {
	krs := make([]router.KeyRange, len(ranges))
	for i, r := range ranges {
		krs[i] = router.KeyRange{StartKey: r.Start, EndKey: r.End}
	}
	return p.regions.Pages(ctx, krs, func(page []*router.Region) error { return p.sendPage(ctx, w, page) })
}

// sendPage sends one page of regions to their leaders.
func (p *preparer) sendPage(ctx context.Context, w *waitApply, page []*router.Region) error {
	var refs []regionRef
	metas := make(map[uint64]*metapb.Region, len(page))
	for _, r := range page {
		m := r.Meta
		if r.Leader.GetStoreId() == 0 {
			w.Later(keyRange{Start: m.GetStartKey(), End: m.GetEndKey()}) // no leader yet: retry after the backoff
			continue
		}
		metas[m.GetId()] = m
		refs = append(refs, regionRef{ID: m.GetId(), ConfVer: m.GetRegionEpoch().GetConfVer(), Version: m.GetRegionEpoch().GetVersion(),
			Start: m.GetStartKey(), End: m.GetEndKey(), LeaderStore: r.Leader.GetStoreId()})
	}
	for store, rs := range w.Send(refs) {
		s, err := p.stream(ctx, store)
		if err != nil {
			// Retried after the backoff, like a region that moved.
			p.log("Region leaders on store %d, which cannot be connected to now, are retried: %v", store, err)
			for _, r := range rs {
				w.Done(r, true)
			}
			continue
		}
		regions := make([]*metapb.Region, len(rs))
		for i, r := range rs {
			regions[i] = metas[r.ID]
		}
		for _, req := range waitApplyRequests(regions, maxWaitApplyBytes) {
			if err := s.send(req); err != nil {
				return fmt.Errorf("send wait-apply to store %d: %w", store, err)
			}
		}
	}
	return nil
}

// stream is the store's PrepareSnapshotBackup stream. A store the pause has none to (it
// joined after the stores were listed, or was left out) is connected to now, with its lease
// kept from then on like the others'.
func (p *preparer) stream(ctx context.Context, store uint64) (*storeStream, error) {
	if s, ok := p.streams[store]; ok {
		return s, nil
	}
	st, err := storeByID(ctx, p.pd, store)
	if err != nil {
		return nil, err
	}
	p.log("Region leaders on store %d, which has no PrepareSnapshotBackup stream yet: connecting to it at %s", store, st.GetAddress())
	s, err := p.open(ctx, st)
	if err != nil {
		return nil, err
	}
	p.keep(s)
	return s, nil
}

// keep adds a stream whose first lease was taken: its answers are read and its lease renewed
// from now on, and Finish ends it.
func (p *preparer) keep(s *storeStream) {
	p.streams[s.id] = s
	go p.receive(s)
	go p.keepLease(s)
}

// maxWaitApplyBytes bounds one WaitApply request's encoded size, well under TiKV's 10 MiB
// message cap (as BR does).
const maxWaitApplyBytes = 1 << 20

// waitApplyRequests packs regions, in order, into WaitApply requests each at most limit bytes
// encoded (a region larger than limit alone goes in a request of its own).
func waitApplyRequests(regions []*metapb.Region, limit int) []*brpb.PrepareSnapshotBackupRequest {
	var (
		out  []*brpb.PrepareSnapshotBackupRequest
		cur  *brpb.PrepareSnapshotBackupRequest
		size int
	)
	for _, r := range regions {
		n := r.Size()
		entry := 1 + varintLen(uint64(n)) + n //nolint:gosec // G115: a message size is never negative. Field tag, length, region
		if cur == nil || len(cur.Regions) > 0 && size+entry > limit {
			cur = &brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_WaitApply}
			out = append(out, cur)
			size = cur.Size()
		}
		cur.Regions = append(cur.Regions, r)
		size += entry
	}
	return out
}

// varintLen is the length of v encoded as a protobuf varint.
func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// finish ends every lease now (so admin operations resume at once): it sends Finish on every
// stream and waits, within ctx, until TiKV has answered and ended the stream before closing
// the connection — cancelling earlier could drop the Finish and leave the lease to its TTL.
func (p *preparer) finish(ctx context.Context) error {
	stopDrain := make(chan struct{})
	defer close(stopDrain)
	go func() { // nobody reads events any more; keep the receivers from blocking
		for {
			select {
			case <-p.events:
			case <-stopDrain:
				return
			}
		}
	}()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, s := range p.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { s.cancel(); _ = s.close() }()
			err := s.send(&brpb.PrepareSnapshotBackupRequest{Ty: brpb.PrepareSnapshotBackupRequestType_Finish})
			if err == nil {
				err = s.stream.CloseSend()
			}
			if err == nil {
				select {
				case <-s.done:
				case <-ctx.Done():
					err = fmt.Errorf("no answer to Finish: %w", ctx.Err())
				}
			}
			// A store whose stream is already gone (EOF, unavailable) holds no lease any more.
			if err != nil && !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled && status.Code(err) != codes.Unavailable {
				mu.Lock()
				errs = append(errs, fmt.Errorf("finish lease on store %d: %w", s.id, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
