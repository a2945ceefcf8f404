package tidb

import (
	"strings"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
)

func region(id uint64, start, end string) *metapb.Region {
	return &metapb.Region{Id: id, StartKey: []byte(start), EndKey: []byte(end)}
}

// TestTiles: regions must tile the key space from the scan start, in any order, without
// gap or overlap; a page that ends before the key space does returns where to go on.
func TestTiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   string
		regions []*metapb.Region
		next    string
		err     string
	}{
		{name: "whole", regions: []*metapb.Region{region(1, "", "")}},
		{name: "unsorted", regions: []*metapb.Region{region(2, "m", ""), region(1, "", "m")}},
		{name: "page", regions: []*metapb.Region{region(1, "", "c"), region(2, "c", "m")}, next: "m"},
		{name: "later page", start: "m", regions: []*metapb.Region{region(3, "m", "")}},
		{name: "hole", regions: []*metapb.Region{region(1, "", "c"), region(2, "d", "")}, err: "hole"},
		{name: "missing first", regions: []*metapb.Region{region(2, "c", "")}, err: "hole"},
		{name: "overlap", regions: []*metapb.Region{region(1, "", "d"), region(2, "c", "")}, err: "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := Tiles([]byte(tc.start), tc.regions)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(next) != tc.next {
				t.Fatalf("tiles = %q, %v; want %q", next, err, tc.next)
			}
		})
	}
}
