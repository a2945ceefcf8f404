package restoredata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikvpb "github.com/pingcap/kvproto/pkg/tikvpb"
	"github.com/tikv/pd/client/clients/router"

	"github.com/fedbr/fedbr/internal/backoff"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// regionCall sends one request for [start, end) to a region's leader and returns the region
// error (empty when the region did it) or a transport error.
type regionCall func(ctx context.Context, kv tikvpb.TikvClient, rc *kvrpcpb.Context, start, end []byte) (regionErr string, err error)

// span is a range of raw keys, as TiKV's transactional API takes them; end empty: +inf.
type span struct{ start, end []byte }

// ErrKeyNotInRegion fails a step that sent a region a range outside it. The request carried
// the region's current epoch (a stale one is refused first, as epoch_not_match), so the range
// was computed wrongly: sending PD's encoded boundaries as raw keys does exactly this. It is
// never retried.
var ErrKeyNotInRegion = errors.New("TiKV refused a range outside its region (key_not_in_region)")

// pdBoundary is a span's boundary as PD knows it: encoded.
func (r *run) pdBoundary(raw []byte) []byte {
	if r.cfg.Unsafe.EncodedKeys { // a negative control: the spans are PD's keys already
		return raw
	}
	return codec.EncodeBoundary(raw)
}

// rawRegions decodes the regions' boundaries. PD reports them memcomparable-encoded, and TiKV
// takes raw keys that it encodes itself, so a boundary sent as it came from PD would address
// other keys (client-go's CodecPDClient decodes them the same way). The regions are copies:
// the PD client's are left alone.
func (r *run) rawRegions(regions []*router.Region) ([]*router.Region, error) {
	out := make([]*router.Region, 0, len(regions))
	for _, rg := range regions {
		if r.cfg.Unsafe.EncodedKeys { // a negative control: the keys as PD has them
			out = append(out, rg)
			continue
		}
		meta, err := codec.DecodeRegion(rg.Meta)
		if err != nil {
			return nil, fmt.Errorf("from PD: %w", err)
		}
		raw := *rg
		raw.Meta = meta
		out = append(out, &raw)
	}
	return out, nil
}

// overKeySpace runs call on every region of ["", +inf), each with its own part of the range.
// Ranges whose region moved, lost its leader or answered a region error are reloaded from PD
// and retried after a backoff that starts short (firstRegionBackoff) and starts short again
// whenever the walk progressed; it goes on as long as it progresses (stall).
func (r *run) overKeySpace(ctx context.Context, call regionCall) error {
	pending := []span{{start: []byte{}}}
	var lastErr string
	progress := r.newStall()
	for round := 1; len(pending) > 0; round++ {
		if err := progress.check(len(pending), lastErr); err != nil {
			return err
		}
		if round > 1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff.Doubling(firstRegionBackoff, r.cfg.Backoff, progress.rounds)):
			}
		}
		krs := make([]router.KeyRange, len(pending))
		for i, s := range pending {
			krs[i] = router.KeyRange{StartKey: r.pdBoundary(s.start), EndKey: r.pdBoundary(s.end)}
		}
		var (
			mu    sync.Mutex
			retry []span
			wg    sync.WaitGroup
			sem   = make(chan struct{}, r.cfg.Concurrency)
			fatal error
			jobs  int // calls made
			holes int // ranges without a region with a leader, sent again
			c     = cover{pending: pending}
		)
		// PD's regions a page at a time: a page's calls run while the next page is read, and
		// only a page of regions and the calls in flight are held (issue 44).
		err := r.regions.Pages(ctx, krs, func(page []*router.Region) error {
			page, err := r.rawRegions(page)
			if err != nil {
				return err
			}
			covered := c.page(page)
			jobs += len(covered.jobs)
			holes += len(covered.holes)
			mu.Lock()
			retry = append(retry, covered.holes...)
			if len(covered.holes) > 0 {
				lastErr = "part of the range has no region with a leader in PD yet"
			}
			failed := fatal
			mu.Unlock()
			if failed != nil {
				return failed
			}
			for _, job := range covered.jobs {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					msg, err := r.callRegion(ctx, job, call)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil && fatal == nil:
						fatal = err
					case msg != "":
						lastErr = fmt.Sprintf("region %d: %s", job.region.Meta.GetId(), msg)
						retry = append(retry, job.span)
					}
				}()
			}
			return nil
		})
		wg.Wait()
		switch {
		case fatal != nil:
			return fatal
		case err != nil:
			return err
		}
		gaps := c.gaps()
		holes += len(gaps)
		retry = append(retry, gaps...)
		if len(gaps) > 0 {
			lastErr = "part of the range has no region with a leader in PD yet"
		}
		// Every job that is not sent again was done.
		progress.round(jobs + holes - len(retry))
		if len(retry) > 0 && (progress.rounds == 1 || progress.rounds%30 == 0) { // not every round of a long wait
			r.d.Log("%d ranges to send again (round %d; last: %s)", len(retry), round, lastErr)
		}
		pending = retry
	}
	return nil
}

// firstRegionBackoff is the wait before the second round, doubling up to Config.Backoff. Right
// after recovery most retries are a region whose new leader PD has not heard of yet, which its
// next region heartbeat tells it within moments; a flat second per round added that second to
// every restore.
const firstRegionBackoff = 50 * time.Millisecond

type job struct {
	region *router.Region
	span   span
}

type plan struct {
	jobs  []job
	holes []span
}

// coverage cuts the pending spans by the regions PD returned; parts no region (with a leader)
// covers are holes to retry.
func coverage(pending []span, regions []*router.Region) plan {
	c := cover{pending: pending}
	p := c.page(regions)
	p.holes = append(p.holes, c.gaps()...)
	return p
}

// cover cuts pending spans by PD's regions as they arrive, a page at a time in key order.
type cover struct {
	pending []span
	// extents are the key ranges the regions seen so far cover, merged, in key order.
	extents []span
}

// page returns the jobs of a page of regions (each region's part of the pending spans), and
// as holes the parts whose region has no leader.
func (c *cover) page(regions []*router.Region) plan {
	var p plan
	for _, rg := range regions {
		m := rg.Meta
		c.extend(span{m.GetStartKey(), m.GetEndKey()})
		for _, s := range c.pending {
			if !overlaps(s, span{m.GetStartKey(), m.GetEndKey()}) {
				continue
			}
			part := span{maxKey(s.start, m.GetStartKey()), minEnd(s.end, m.GetEndKey())}
			if rg.Leader.GetStoreId() == 0 {
				p.holes = append(p.holes, part)
			} else {
				p.jobs = append(p.jobs, job{region: rg, span: part})
			}
		}
	}
	return p
}

// extend adds a region's range to the extents; regions come in key order, and a region
// reported twice (merged over a page boundary) overlaps the last extent.
func (c *cover) extend(e span) {
	if n := len(c.extents); n > 0 {
		last := &c.extents[n-1]
		if len(last.end) == 0 {
			return
		}
		if bytes.Compare(e.start, last.end) <= 0 {
			if len(e.end) == 0 || bytes.Compare(e.end, last.end) > 0 {
				last.end = e.end
			}
			return
		}
	}
	c.extents = append(c.extents, e)
}

// gaps are the parts of the pending spans no region returned so far reaches.
func (c *cover) gaps() []span {
	var out []span
	for _, s := range c.pending {
		cur, done := s.start, false
		for _, e := range c.extents {
			if !overlaps(s, e) {
				continue
			}
			if bytes.Compare(e.start, cur) > 0 {
				out = append(out, span{cur, e.start})
			}
			if len(e.end) == 0 {
				done = true
				break
			}
			if bytes.Compare(e.end, cur) > 0 {
				cur = e.end
			}
		}
		if !done && (len(s.end) == 0 || bytes.Compare(cur, s.end) < 0) {
			out = append(out, span{cur, s.end})
		}
	}
	return out
}

func overlaps(a, b span) bool {
	return (len(a.end) == 0 || bytes.Compare(b.start, a.end) < 0) && (len(b.end) == 0 || bytes.Compare(a.start, b.end) < 0)
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

func minEnd(a, b []byte) []byte {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0:
		return a
	case bytes.Compare(a, b) <= 0:
		return a
	}
	return b
}

// callRegion sends one call to a region's leader.
func (r *run) callRegion(ctx context.Context, j job, call regionCall) (string, error) {
	s, ok := r.store(j.region.Leader.GetStoreId())
	if !ok {
		return fmt.Sprintf("leader on unknown store %d", j.region.Leader.GetStoreId()), nil
	}
	cc, err := r.dial(ctx, s)
	if err != nil {
		return err.Error(), nil // the store may be restarting: retry the range
	}
	rc := &kvrpcpb.Context{RegionId: j.region.Meta.GetId(), RegionEpoch: j.region.Meta.GetRegionEpoch(), Peer: j.region.Leader}
	msg, err := call(ctx, tikvpb.NewTikvClient(cc), rc, j.span.start, j.span.end)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, ErrKeyNotInRegion) {
			return "", err
		}
		return err.Error(), nil // transport errors are retried with a fresh region
	}
	return msg, nil
}

// outsideRegion is the step's error for a region that refused the range as outside it, or nil.
func outsideRegion(re *errorpb.Error, rc *kvrpcpb.Context, start, end []byte) error {
	k := re.GetKeyNotInRegion()
	if k == nil {
		return nil
	}
	return fmt.Errorf("%w: region %d [%x, %x) (epoch %v) refused [%x, %x) at key %x",
		ErrKeyNotInRegion, rc.GetRegionId(), k.GetStartKey(), k.GetEndKey(), rc.GetRegionEpoch(), start, end, k.GetKey())
}

// regionError flattens a region error and a response error string into one message.
func regionError(re *errorpb.Error, respErr string) string {
	if re != nil {
		if re.GetMessage() != "" {
			return re.GetMessage()
		}
		return re.String()
	}
	return respErr
}
