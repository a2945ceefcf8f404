package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/lab/regiononly"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/tidb"
)

// live starts a cluster of the full doubles (3 stores, a few regions) and the checks' clients.
func live(t *testing.T, ctx context.Context) (*tidbcluster.Cluster, Deps) {
	t.Helper()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, Tick: 20 * time.Millisecond,
		SplitKeys: [][]byte{[]byte("b"), []byte("m"), []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PDAddr()})
	t.Cleanup(hc.Close)
	// PD merges empty neighbours: the tests count the split regions and prepare one of them
	// for flashback, so no merge may take them away (a merge already under way still ends).
	if err := hc.SetConfig(ctx, map[string]any{"schedule.merge-schedule-limit": 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	pc, err := pd.NewClientWithContext(ctx, []string{c.PDAddr()}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	var tls *tidb.TLS
	return c, Deps{PD: pc, Stores: hc, Recovering: func(ctx context.Context) (bool, error) {
		return tls.SnapshotRecovering(ctx, "http://"+c.PDAddr())
	}, Log: t.Logf}
}

// failed is the error of the check named name (it must exist).
func failed(t *testing.T, r Result, name string) string {
	t.Helper()
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, name) {
			return c.Error
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return ""
}

// TestVerify: a healthy cluster passes every check; each check fails on its own fault with its
// own error, and the others still pass.
func TestVerify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, d := live(t, ctx)
	physical, logical, err := d.PD.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit := uint64(physical)<<18 | uint64(logical)

	// PD learns the splits from the leaders' heartbeats: a passing run may still see a region
	// before its split, so wait until PD shows all four.
	var r Result
	for {
		r = Until(ctx, d, Config{Stores: 3, CommitTS: commit}, time.Minute, 50*time.Millisecond)
		if !r.Passed || r.Regions >= 4 || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !r.Passed || r.Stores != 3 || r.Regions < 4 || len(r.Checks) != 4 {
		t.Fatalf("a healthy cluster: %+v\n%s", r, r.Failed())
	}

	// Another count of stores than the backup had; a commit ts PD's TSO has not passed.
	r = Run(ctx, d, Config{Stores: 4, CommitTS: commit + 1<<40})
	if e := failed(t, r, "every TiKV store is Up"); e != "PD lists 3 TiKV stores, the backup had 4" {
		t.Errorf("store count: %q", e)
	}
	if e := failed(t, r, "PD's TSO is above"); !strings.Contains(e, "is not above the commit ts") {
		t.Errorf("TSO: %q", e)
	}
	if r.Passed || failed(t, r, "the regions tile") != "" || failed(t, r, "PD's snapshot-recovering") != "" {
		t.Errorf("only the count and the TSO fail: %+v", r)
	}

	// The snapshot-recovering mark still set.
	hc := d.Stores.(pdhttp.Client)
	if err := hc.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	r = Run(ctx, d, Config{})
	if e := failed(t, r, "PD's snapshot-recovering mark"); !strings.Contains(e, "still marked snapshot-recovering") {
		t.Errorf("recovering mark: %q", e)
	}
	if err := hc.DeleteSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}

	// A region left prepared for flashback: once its leader told PD, the region check names it.
	// A region error (a leader moved, a merge that began before merges were turned off) is
	// answered as BR does: read the region again and retry.
	for {
		region, err := d.PD.(pd.Client).GetRegion(ctx, []byte("c"), opt.WithAllowFollowerHandle())
		if err != nil || region == nil || region.Leader == nil {
			t.Fatalf("region of c: %+v, %v", region, err)
		}
		cc, err := grpc.NewClient(c.Store(region.Leader.GetStoreId()).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tikvpb.NewTikvClient(cc).KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{
			Context:  &kvrpcpb.Context{RegionId: region.Meta.GetId(), RegionEpoch: region.Meta.GetRegionEpoch(), Peer: region.Leader},
			StartKey: region.Meta.GetStartKey(), EndKey: region.Meta.GetEndKey(), StartTs: commit, Version: commit - 1})
		_ = cc.Close()
		if err == nil && resp.GetRegionError() != nil && ctx.Err() == nil {
			t.Logf("prepare flashback: %v; again", resp.GetRegionError())
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || resp.GetError() != "" {
			t.Fatalf("prepare flashback: %+v, %v", resp, err)
		}
		break
	}
	for {
		r = Run(ctx, Deps{PD: d.PD, Stores: d.Stores, Recovering: d.Recovering}, Config{})
		if e := failed(t, r, "the regions tile"); e != "" {
			if !strings.Contains(e, "regions are still in flashback: region ") {
				t.Errorf("flashback: %q", e)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the region prepared for flashback never showed in PD")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestVerifyFindsAHole: regions missing from PD's view leave a hole in the key space.
func TestVerifyFindsAHole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := regiononly.StartEnv(t, regiononly.Config{Regions: 50, Stores: 3, NotInPD: []int{17}})
	var tls *tidb.TLS
	r := Run(ctx, Deps{PD: e.PD, Stores: e.HTTP, Recovering: func(ctx context.Context) (bool, error) {
		return tls.SnapshotRecovering(ctx, e.Cluster.PD.URL())
	}}, Config{})
	if got := failed(t, r, "the regions tile"); !strings.Contains(got, "region hole: no region covers") {
		t.Fatalf("regions: %q\n%+v", got, r)
	}
}
