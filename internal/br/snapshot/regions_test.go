package snapshot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/regiononly"
	"github.com/fedbr/fedbr/internal/tidb"
)

// startRegionOnly starts a region-only cluster and a snapshotter whose cluster check talks to
// it through the real PD client.
func startRegionOnly(t testing.TB, cfg regiononly.Config) (*snapshotter, *bytes.Buffer) {
	t.Helper()
	return startOn(t, regiononly.StartEnv(t, cfg))
}

// startOn makes a snapshotter whose cluster check talks to e.
func startOn(t testing.TB, e *regiononly.Env) (*snapshotter, *bytes.Buffer) {
	var log bytes.Buffer
	s := &snapshotter{d: Deps{PD: e.PD, Dial: e.DialBackup}, o: Options{Progress: &log}}
	t.Cleanup(s.closeStores)
	return s, &log
}

// TestClusterCheckPagesOnEveryPD runs the cluster check over more regions than one page, on
// PD v8.5 and on PD v7.5 (no BatchScanRegions): a whole key space passes, a hole on a later
// page is found.
func TestClusterCheckPagesOnEveryPD(t *testing.T) {
	const regions = 2*tidb.RegionPageSize + 500
	tests := []struct {
		name    string
		notInPD []int
		want    string
	}{
		{name: "every region in PD"},
		{name: "a hole on the third page", notInPD: []int{2*tidb.RegionPageSize + 10}, want: "region hole"},
		{name: "the last region missing", notInPD: []int{regions - 1}, want: "no region covers the key"},
	}
	for _, api := range []string{pddouble.APIv85, pddouble.APIv75} {
		for _, tc := range tests {
			t.Run(api+"/"+tc.name, func(t *testing.T) {
				s, log := startRegionOnly(t, regiononly.Config{Regions: regions, Stores: 4, API: api, NotInPD: tc.notInPD})
				err := s.checkClusterStill(t.Context())
				if tc.want == "" && err != nil {
					t.Fatal(err)
				}
				if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Fatalf("check = %v, want %q", err, tc.want)
				}
				if fell := strings.Contains(log.String(), "ScanRegions"); fell != (api == pddouble.APIv75) {
					t.Errorf("PD %s: log %q", api, log.String())
				}
			})
		}
	}
}
