package restoredata

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/router"
)

func region(id uint64, start, end string, leaderStore uint64) *router.Region {
	r := &router.Region{Meta: &metapb.Region{Id: id, StartKey: []byte(start), EndKey: []byte(end)}}
	if leaderStore != 0 {
		r.Leader = &metapb.Peer{StoreId: leaderStore}
	}
	return r
}

func spanString(s span) string {
	end := string(s.end)
	if len(s.end) == 0 {
		end = "+inf"
	}
	return "[" + string(s.start) + "," + end + ")"
}

func TestCoverage(t *testing.T) {
	tests := []struct {
		name      string
		pending   []span
		regions   []*router.Region
		wantJobs  []string
		wantHoles []string
	}{
		{
			name:     "whole key space, three regions",
			pending:  []span{{start: []byte{}}},
			regions:  []*router.Region{region(1, "", "c", 1), region(2, "c", "m", 2), region(3, "m", "", 1)},
			wantJobs: []string{"[,c)", "[c,m)", "[m,+inf)"},
		},
		{
			name:      "a leaderless region and a gap are retried",
			pending:   []span{{start: []byte{}}},
			regions:   []*router.Region{region(1, "", "c", 1), region(2, "c", "m", 0), region(3, "p", "", 1)},
			wantJobs:  []string{"[,c)", "[p,+inf)"},
			wantHoles: []string{"[c,m)", "[m,p)"},
		},
		{
			name:     "a sub-range is cut to the regions",
			pending:  []span{{start: []byte("d"), end: []byte("n")}},
			regions:  []*router.Region{region(2, "c", "m", 2), region(3, "m", "", 1)},
			wantJobs: []string{"[d,m)", "[m,n)"},
		},
		{
			name:      "nothing returned: the whole span is a hole",
			pending:   []span{{start: []byte("a"), end: []byte("b")}},
			wantHoles: []string{"[a,b)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := coverage(tc.pending, tc.regions)
			var jobs, holes []string
			for _, j := range p.jobs {
				jobs = append(jobs, spanString(j.span))
			}
			for _, h := range p.holes {
				holes = append(holes, spanString(h))
			}
			if len(jobs) != len(tc.wantJobs) || len(holes) != len(tc.wantHoles) {
				t.Fatalf("jobs %v holes %v, want %v %v", jobs, holes, tc.wantJobs, tc.wantHoles)
			}
			for i := range jobs {
				if jobs[i] != tc.wantJobs[i] {
					t.Errorf("job %d = %s, want %s", i, jobs[i], tc.wantJobs[i])
				}
			}
			for i := range holes {
				if holes[i] != tc.wantHoles[i] {
					t.Errorf("hole %d = %s, want %s", i, holes[i], tc.wantHoles[i])
				}
			}
		})
	}
}

// TestCoverAcrossPages: PD's regions arriving a page at a time (the data phase holds one page,
// not the key space's million) are cut into the same calls and holes as all at once, however
// the pages fall, also when a region merged over a page boundary is reported twice.
func TestCoverAcrossPages(t *testing.T) {
	pending := []span{{start: []byte("b"), end: []byte("x")}, {start: []byte("z")}}
	regions := []*router.Region{region(1, "", "c", 1), region(2, "c", "m", 0), region(3, "p", "t", 2), region(4, "t", "y", 1), region(5, "y", "", 3)}
	str := func(p plan) string {
		var b strings.Builder
		for _, j := range p.jobs {
			b.WriteString("job" + spanString(j.span) + " ")
		}
		holes := slices.Clone(p.holes)
		slices.SortFunc(holes, func(a, b span) int { return bytes.Compare(a.start, b.start) })
		for _, h := range holes {
			b.WriteString("hole" + spanString(h) + " ")
		}
		return b.String()
	}
	want := str(coverage(pending, regions))
	if want != "job[b,c) job[p,t) job[t,x) job[z,+inf) hole[c,m) hole[m,p) " {
		t.Fatalf("all at once: %s", want)
	}
	for _, cuts := range [][]int{{1}, {2}, {1, 3}, {1, 2, 3, 4}} {
		c := cover{pending: pending}
		var (
			got  plan
			from int
			last *router.Region // the previous page's last region
		)
		for _, to := range append(cuts, len(regions)) {
			page := regions[from:to]
			if last != nil {
				page = append([]*router.Region{last}, page...) // reported again on the next page
			}
			p := c.page(page)
			got.jobs, got.holes = append(got.jobs, p.jobs...), append(got.holes, p.holes...)
			from, last = to, page[len(page)-1]
		}
		got.holes = append(got.holes, c.gaps()...)
		// A region reported twice is called twice, as an answer of PD's changing between pages
		// is; drop the repeats to compare the cut.
		got.jobs = slices.CompactFunc(got.jobs, func(a, b job) bool { return a.region == b.region })
		got.holes = slices.CompactFunc(got.holes, func(a, b span) bool { return spanString(a) == spanString(b) })
		if s := str(got); s != want {
			t.Errorf("pages cut at %v: %s, want %s", cuts, s, want)
		}
	}
}
