package restoredata

import (
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
