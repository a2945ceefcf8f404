package tidb_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/regiononly"
	"github.com/fedbr/fedbr/internal/tidb"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// countingPD counts the real client's scans.
type countingPD struct {
	tidb.RegionPD
	batch, scan atomic.Int32
}

func (c *countingPD) BatchScanRegions(ctx context.Context, ranges []router.KeyRange, limit int, opts ...opt.GetRegionOption) ([]*router.Region, error) {
	c.batch.Add(1)
	return c.RegionPD.BatchScanRegions(ctx, ranges, limit, opts...)
}

func (c *countingPD) ScanRegions(ctx context.Context, key, endKey []byte, limit int, opts ...opt.GetRegionOption) ([]*router.Region, error) {
	c.scan.Add(1)
	return c.RegionPD.ScanRegions(ctx, key, endKey, limit, opts...)
}

// startRegions starts a region-only cluster and returns the real PD client on it.
func startRegions(t testing.TB, cfg regiononly.Config) tidb.RegionPD {
	t.Helper()
	if cfg.Stores == 0 {
		cfg.Stores = 3
	}
	return regiononly.StartEnv(t, cfg).PD
}

// key is region i's start key as PD has it (encoded).
func key(i int) []byte { return codec.EncodeBoundary(regiononly.Key(i)) }

// span is the regions [from, to) by index, as ids.
func span(from, to int) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, uint64(regiononly.FirstRegionID+i))
	}
	return out
}

func TestRegionScannerPages(t *testing.T) {
	tests := []struct {
		name     string
		regions  int
		notInPD  []int
		pageSize int
		ranges   []router.KeyRange
		want     []uint64
	}{
		{name: "the whole key space, pages of 3", regions: 10, pageSize: 3, ranges: []router.KeyRange{{}}, want: span(0, 10)},
		{name: "a page exactly full at the end", regions: 9, pageSize: 3, ranges: []router.KeyRange{{}}, want: span(0, 9)},
		{name: "more regions than the default page", regions: 2*tidb.RegionPageSize + 100, ranges: []router.KeyRange{{}}, want: span(0, 2*tidb.RegionPageSize+100)},
		{name: "a sub-range starting inside a region", regions: 20, pageSize: 2,
			ranges: []router.KeyRange{{StartKey: append(key(3), 1), EndKey: key(9)}}, want: span(3, 9)},
		{name: "unsorted, overlapping ranges come back sorted, each region once", regions: 30, pageSize: 2,
			ranges: []router.KeyRange{{StartKey: key(20)}, {StartKey: key(5), EndKey: key(8)}, {StartKey: key(1), EndKey: key(3)}, {StartKey: key(2), EndKey: key(4)}},
			want:   append(append(span(1, 4), span(5, 8)...), span(20, 30)...)},
		{name: "two ranges inside one region get it once", regions: 10, pageSize: 2,
			ranges: []router.KeyRange{{StartKey: append(key(4), 1), EndKey: append(key(4), 2)}, {StartKey: append(key(4), 3), EndKey: append(key(4), 4)}},
			want:   span(4, 5)},
		{name: "empty ranges ask for nothing", regions: 10, ranges: []router.KeyRange{{StartKey: key(4), EndKey: key(4)}}},
		{name: "a hole in PD's view is left out", regions: 12, notInPD: []int{4, 5}, pageSize: 3, ranges: []router.KeyRange{{}},
			want: append(span(0, 4), span(6, 12)...)},
	}
	for _, api := range []string{pddouble.APIv85, pddouble.APIv75} {
		for _, tc := range tests {
			t.Run(api+"/"+tc.name, func(t *testing.T) {
				client := startRegions(t, regiononly.Config{Regions: tc.regions, NotInPD: tc.notInPD, API: api})
				counted := &countingPD{RegionPD: client}
				s := tidb.NewRegionScanner(counted, tidb.RegionScanOptions{PageSize: tc.pageSize})
				pageSize := tc.pageSize
				if pageSize == 0 {
					pageSize = tidb.RegionPageSize
				}
				var got []uint64
				err := s.Pages(t.Context(), tc.ranges, func(page []*router.Region) error {
					if len(page) > pageSize {
						t.Errorf("a page of %d regions, want at most %d", len(page), pageSize)
					}
					for _, r := range page {
						got = append(got, r.Meta.GetId())
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("regions %v\nwant    %v", got, tc.want)
				}
				switch api {
				case pddouble.APIv85:
					if counted.scan.Load() != 0 {
						t.Errorf("PD v8.5: %d ScanRegions calls, want none", counted.scan.Load())
					}
				case pddouble.APIv75:
					if b := counted.batch.Load(); len(tc.want) > 0 && b != 1 {
						t.Errorf("PD v7.5: %d BatchScanRegions calls, want 1 (the answer is remembered)", b)
					}
				}
			})
		}
	}
}

// TestRegionScannerRemembersV75 scans twice through one scanner on PD v7.5: BatchScanRegions is
// asked once in all, and the fallback is logged once.
func TestRegionScannerRemembersV75(t *testing.T) {
	client := startRegions(t, regiononly.Config{Regions: 10, API: pddouble.APIv75})
	counted := &countingPD{RegionPD: client}
	var logs []string
	s := tidb.NewRegionScanner(counted, tidb.RegionScanOptions{PageSize: 4, Log: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
	for range 2 {
		got, err := s.Scan(t.Context(), []router.KeyRange{{}})
		if err != nil || len(got) != 10 {
			t.Fatalf("scan = %d regions, %v; want 10", len(got), err)
		}
	}
	if counted.batch.Load() != 1 || counted.scan.Load() != 6 {
		t.Errorf("BatchScanRegions %d, ScanRegions %d calls; want 1 and 6 (3 pages, twice)", counted.batch.Load(), counted.scan.Load())
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "BatchScanRegions") {
		t.Errorf("logs %q, want one line about BatchScanRegions", logs)
	}
}

// TestUnboundedScanFailsWherePagesDont is the reason for paging: a single answer for a large
// cluster's regions exceeds what a gRPC client receives (4 MiB by default), so an unbounded
// BatchScanRegions fails on the real client while the scanner's pages go through.
func TestUnboundedScanFailsWherePagesDont(t *testing.T) {
	const regions = 60_000
	client := startRegions(t, regiononly.Config{Regions: regions})
	// A deadline of its own: without one the PD client allows a call 3 s, which a busy machine
	// can take to build the answer.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := client.BatchScanRegions(ctx, []router.KeyRange{{}}, 0)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("unbounded BatchScanRegions over %d regions = %v, want ResourceExhausted", regions, err)
	}
	got, err := tidb.NewRegionScanner(client, tidb.RegionScanOptions{}).Scan(ctx, []router.KeyRange{{}})
	if err != nil || len(got) != regions {
		t.Fatalf("paged scan = %d regions, %v; want %d", len(got), err, regions)
	}
}

// stuckPD answers every scan with the same full page, as a PD whose regions do not move the
// scan forward would.
type stuckPD struct{ page []*router.Region }

func (p stuckPD) BatchScanRegions(context.Context, []router.KeyRange, int, ...opt.GetRegionOption) ([]*router.Region, error) {
	return p.page, nil
}

func (p stuckPD) ScanRegions(context.Context, []byte, []byte, int, ...opt.GetRegionOption) ([]*router.Region, error) {
	return p.page, nil
}

func TestRegionScannerErrors(t *testing.T) {
	stuck := stuckPD{page: []*router.Region{
		{Meta: &metapb.Region{Id: 1, StartKey: []byte("a"), EndKey: []byte("b")}},
		{Meta: &metapb.Region{Id: 2, StartKey: []byte("b"), EndKey: []byte("c")}},
	}}
	tests := []struct {
		name   string
		pd     tidb.RegionPD
		ranges []router.KeyRange
		want   string
	}{
		{name: "a page that ends where the scan stands", pd: stuck, ranges: []router.KeyRange{{StartKey: []byte("c")}}, want: "no progress"},
		{name: "a page that ends before the scan", pd: stuck, ranges: []router.KeyRange{{StartKey: []byte("x")}}, want: "no progress"},
		{name: "a range that starts after its end", pd: stuck, ranges: []router.KeyRange{{StartKey: []byte("b"), EndKey: []byte("a")}}, want: "starts after its end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := tidb.NewRegionScanner(tc.pd, tidb.RegionScanOptions{PageSize: 2}).Scan(ctx, tc.ranges)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("scan = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestPDRefusesUnsortedRanges: PD checks BatchScanRegions' ranges (sorted, none starting
// before the previous one's end); the scanner sorts and merges them, so a caller's retry list
// in any order is accepted.
func TestPDRefusesUnsortedRanges(t *testing.T) {
	client := startRegions(t, regiononly.Config{Regions: 10})
	unsorted := []router.KeyRange{{StartKey: key(5), EndKey: key(6)}, {StartKey: key(1), EndKey: key(2)}}
	if _, err := client.BatchScanRegions(t.Context(), unsorted, 10); err == nil || !strings.Contains(err.Error(), "ranges overlapped") {
		t.Fatalf("unsorted ranges = %v, want PD's \"invalid key range, ranges overlapped\"", err)
	}
	got, err := tidb.NewRegionScanner(client, tidb.RegionScanOptions{}).Scan(t.Context(), unsorted)
	if err != nil || len(got) != 2 {
		t.Fatalf("scanner = %d regions, %v; want 2", len(got), err)
	}
}
