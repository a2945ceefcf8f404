package tidb

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RegionPD is the part of PD's client that scans regions; github.com/tikv/pd/client's Client
// satisfies it. BatchScanRegions came with PD v8; PD v7.5 has only ScanRegions.
type RegionPD interface {
	BatchScanRegions(ctx context.Context, ranges []router.KeyRange, limit int, opts ...opt.GetRegionOption) ([]*router.Region, error)
	ScanRegions(ctx context.Context, key, endKey []byte, limit int, opts ...opt.GetRegionOption) ([]*router.Region, error)
}

// RegionPageSize is how many regions one scan asks PD for. A region's record is a few hundred
// bytes, so a page stays far below the 4 MiB a gRPC client receives by default, where an
// unbounded scan of a large cluster (tens of thousands of regions) fails.
const RegionPageSize = 1024

// RegionScanner reads PD's regions page by page: every scan the BR steps make goes through it,
// so no answer is unbounded. It asks with BatchScanRegions; when PD answers Unimplemented
// (PD before v8) it pages with ScanRegions instead, from then on for as long as it lives (make
// one per PD client). Keys are PD's, memcomparable-encoded: the scanner passes them through
// as given and returns the regions as PD reports them.
type RegionScanner struct {
	pd       RegionPD
	pageSize int
	log      func(format string, args ...any)
	// scanOnly is set once PD answered BatchScanRegions with Unimplemented.
	scanOnly atomic.Bool
}

// RegionScanOptions tune a RegionScanner.
type RegionScanOptions struct {
	// PageSize is the most regions one request asks for; 0 means RegionPageSize.
	PageSize int
	// Log receives the line saying PD has no BatchScanRegions; nil drops it.
	Log func(format string, args ...any)
}

// NewRegionScanner returns a scanner over pd's regions.
func NewRegionScanner(pd RegionPD, o RegionScanOptions) *RegionScanner {
	if o.PageSize <= 0 {
		o.PageSize = RegionPageSize
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return &RegionScanner{pd: pd, pageSize: o.PageSize, log: o.Log}
}

// Scan returns every region intersecting ranges (empty EndKey: +inf), each once, in key order.
func (s *RegionScanner) Scan(ctx context.Context, ranges []router.KeyRange) ([]*router.Region, error) {
	var out []*router.Region
	err := s.Pages(ctx, ranges, func(page []*router.Region) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// Pages calls fn with the regions intersecting ranges (empty EndKey: +inf), one page of at
// most the page size at a time, in key order. The ranges may come in any order and overlap:
// they are sorted and merged first (PD refuses unsorted or overlapping ranges). Each page
// continues from the end key of the previous page's last region, so a region is reported
// once unless PD's regions change between pages (a region merged over that end key is
// reported again); a page that would not move past where it started is an error.
func (s *RegionScanner) Pages(ctx context.Context, ranges []router.KeyRange, fn func([]*router.Region) error) error {
	rest, err := mergeRanges(ranges)
	if err != nil {
		return err
	}
	for len(rest) > 0 {
		page, batch, err := s.page(ctx, rest)
		if err != nil {
			return fmt.Errorf("scan regions from %x: %w", rest[0].StartKey, err)
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		full := len(page) >= s.pageSize
		switch {
		case !full && batch:
			return nil // PD answered every range in full
		case !full:
			rest = rest[1:] // ScanRegions answered the first range in full
		}
		if len(page) == 0 {
			continue
		}
		end := page[len(page)-1].Meta.GetEndKey()
		if len(end) == 0 {
			return nil // the last region reaches the end of the key space
		}
		if full && len(rest) > 0 && bytes.Compare(end, rest[0].StartKey) <= 0 {
			return fmt.Errorf("scan regions from %x: PD's page of %d regions ends at %x, no further: the scan makes no progress", rest[0].StartKey, len(page), end)
		}
		rest = trimRanges(rest, end)
	}
	return nil
}

// page asks PD for one page of rest's regions; batch says it was a BatchScanRegions answer
// (covering all of rest up to the page size) rather than a ScanRegions one (rest[0] only).
func (s *RegionScanner) page(ctx context.Context, rest []router.KeyRange) ([]*router.Region, bool, error) {
	if !s.scanOnly.Load() {
		page, err := s.pd.BatchScanRegions(ctx, rest, s.pageSize)
		if status.Code(err) != codes.Unimplemented {
			return page, true, err
		}
		if !s.scanOnly.Swap(true) {
			s.log("PD does not serve BatchScanRegions (PD before v8): scanning regions with ScanRegions from now on")
		}
	}
	page, err := s.pd.ScanRegions(ctx, rest[0].StartKey, rest[0].EndKey, s.pageSize)
	return page, false, err
}

// mergeRanges sorts ranges by start key and merges the ones that overlap or touch; empty
// ranges are dropped, and a range whose start is after its end is an error.
func mergeRanges(ranges []router.KeyRange) ([]router.KeyRange, error) {
	out := make([]router.KeyRange, 0, len(ranges))
	for _, r := range ranges {
		if len(r.EndKey) > 0 {
			switch c := bytes.Compare(r.StartKey, r.EndKey); {
			case c > 0:
				return nil, fmt.Errorf("scan regions: key range [%x, %x) starts after its end", r.StartKey, r.EndKey)
			case c == 0:
				continue
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b router.KeyRange) int { return bytes.Compare(a.StartKey, b.StartKey) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && !endsBefore(merged[n-1].EndKey, r.StartKey) {
			if endLess(merged[n-1].EndKey, r.EndKey) {
				merged[n-1].EndKey = r.EndKey
			}
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// endsBefore says an end key (empty: +inf) is before a start key.
func endsBefore(end, start []byte) bool {
	return len(end) > 0 && bytes.Compare(end, start) < 0
}

// endLess says end key a is before end key b (empty: +inf).
func endLess(a, b []byte) bool {
	switch {
	case len(a) == 0:
		return false
	case len(b) == 0:
		return true
	}
	return bytes.Compare(a, b) < 0
}

// trimRanges drops what of sorted, merged ranges lies before key.
func trimRanges(ranges []router.KeyRange, key []byte) []router.KeyRange {
	for len(ranges) > 0 && len(ranges[0].EndKey) > 0 && bytes.Compare(ranges[0].EndKey, key) <= 0 {
		ranges = ranges[1:]
	}
	if len(ranges) > 0 && bytes.Compare(ranges[0].StartKey, key) < 0 {
		ranges = slices.Clone(ranges)
		ranges[0].StartKey = key
	}
	return ranges
}

// Tiles checks that regions, sorted by start key, tile the key space from start on without
// gap or overlap, and returns the end of the last (empty: the end of the key space).
func Tiles(start []byte, regions []*metapb.Region) ([]byte, error) {
	regions = slices.Clone(regions)
	slices.SortFunc(regions, func(a, b *metapb.Region) int { return bytes.Compare(a.GetStartKey(), b.GetStartKey()) })
	at := start
	for _, r := range regions {
		if !bytes.Equal(r.GetStartKey(), at) {
			if bytes.Compare(r.GetStartKey(), at) > 0 {
				return nil, fmt.Errorf("region hole: no region covers [%q, %q)", at, r.GetStartKey())
			}
			return nil, fmt.Errorf("regions overlap at %q (region %d starts at %q)", at, r.GetId(), r.GetStartKey())
		}
		at = r.GetEndKey()
		if len(at) == 0 {
			return nil, nil
		}
	}
	return at, nil
}

// ComposeTS is the TSO of PD's answer (physical milliseconds, logical counter); an answer no
// PD gives (negative, or a logical part of more than 18 bits) is an error.
func ComposeTS(physical, logical int64) (uint64, error) {
	if physical < 0 || logical < 0 || logical >= 1<<18 {
		return 0, fmt.Errorf("PD answered an invalid TSO (physical %d, logical %d)", physical, logical)
	}
	return uint64(physical)<<18 | uint64(logical), nil
}
