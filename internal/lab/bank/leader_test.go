package bank_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/br/restoredata"
	restoredatacmd "github.com/fedbr/fedbr/internal/cmd/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

// TestUnelectableLeaderIsReplanned runs fedbr's restore-data on images where a
// stale store's peers have the highest term (they campaigned while nobody
// heard them) but logs behind the others'. Ranked by (term, last index), they
// are planned as leaders, and the others' votes refuse them: without a bound
// the region stays leaderless and the step waits until its --timeout (the
// negative control). With --leader-timeout the attempt ends, the failed
// campaigns have raised the others' terms to the stale peers', and the next
// attempt plans the longest logs: the restore is exact.
func TestUnelectableLeaderIsReplanned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const stores, stale = 4, 2
	images, resolved, txns := staleStoreImages(t, ctx, stores, stale)
	stalled := t.TempDir()
	copyImages(t, images, stalled, stores)

	c := termsRaisedAlone(t, ctx, stalled, stores, stale, resolved)
	_, err := restoreData(ctx, c.PDAddr(), resolved, stores, "--leader-timeout", "10m", "--timeout", "6s")
	c.Close()
	if !errors.Is(err, restoredatacmd.ErrTimeout) || !strings.Contains(err.Error(), "ran out of its --timeout 6s") {
		t.Fatalf("with no bound on the wait for leaders, restore-data did not stall: %v", err)
	}
	t.Logf("unbounded wait for leaders: %v", err)

	c = termsRaisedAlone(t, ctx, images, stores, stale, resolved)
	defer c.Close()
	res, err := restoreData(ctx, c.PDAddr(), resolved, stores, "--leader-timeout", "2s", "--backoff", "100ms")
	if err != nil {
		t.Fatalf("restore-data: %v", err)
	}
	if res.Attempts < 2 {
		t.Fatalf("the first plan's leaders all won (%d attempts): no unelectable leader was planned", res.Attempts)
	}
	t.Logf("restore-data succeeded in %d attempts", res.Attempts)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := checkRestored(t, ctx, c, resolved, txns); err != nil {
		t.Fatalf("restore after replanning: %v", err)
	}
}

// termsRaisedAlone starts the images in dir in recovery mode and makes the
// stale store's peers campaign while every other store is down, so their
// terms rise alone; the stale store is then restarted (what it had queued for
// the others dies with it) and the others started. It checks that some region
// now ranks a stale peer first although its log is behind.
func termsRaisedAlone(t *testing.T, ctx context.Context, dir string, stores int, stale, resolved uint64) *tidbcluster.Cluster {
	t.Helper()
	c, err := tidbcluster.StartRecovering(ctx, restoredConfig(dir, stores), resolved)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.StoreIDs() {
		if id != stale {
			c.StopStore(id)
		}
	}
	cc, err := grpc.NewClient(c.Store(stale).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	rd := recoverdatapb.NewRecoverDataClient(cc)
	metas, err := readMetas(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	rr, err := rd.RecoverRegion(cctx)
	if err == nil {
		for _, m := range metas {
			if err = rr.Send(&recoverdatapb.RecoverRegionRequest{RegionId: m.GetRegionId(), AsLeader: true}); err != nil {
				break
			}
		}
	}
	if err == nil {
		_, err = rr.CloseAndRecv() // nobody hears the campaigns: this waits out cctx
	}
	ccancel()
	_ = cc.Close()
	t.Logf("stale store campaigning alone: %v", err)
	c.StopStore(stale)
	if err := c.StartStores(ctx); err != nil {
		c.Close()
		t.Fatal(err)
	}

	// The setup must hold, or the test proves nothing.
	type peer struct{ term, index uint64 }
	byRegion := map[uint64]map[uint64]peer{}
	for _, id := range c.StoreIDs() {
		conn, err := grpc.NewClient(c.Store(id).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ms, err := readMetas(ctx, recoverdatapb.NewRecoverDataClient(conn))
		_ = conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if byRegion[m.GetRegionId()] == nil {
				byRegion[m.GetRegionId()] = map[uint64]peer{}
			}
			byRegion[m.GetRegionId()][id] = peer{m.GetLastLogTerm(), m.GetLastIndex()}
		}
	}
	misranked := 0
	for _, peers := range byRegion {
		s, ok := peers[stale]
		if !ok {
			continue
		}
		first, behind := true, false
		for id, p := range peers {
			if id != stale {
				first = first && s.term > p.term
				behind = behind || s.index < p.index
			}
		}
		if first && behind {
			misranked++
		}
	}
	if misranked == 0 {
		c.Close()
		t.Fatalf("no region ranks a stale peer first: %v", byRegion)
	}
	t.Logf("%d regions rank a stale peer with a shorter log first", misranked)
	return c
}

func readMetas(ctx context.Context, rd recoverdatapb.RecoverDataClient) ([]*recoverdatapb.RegionMeta, error) {
	st, err := rd.ReadRegionMeta(ctx, &recoverdatapb.ReadRegionMetaRequest{})
	if err != nil {
		return nil, err
	}
	var out []*recoverdatapb.RegionMeta
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
}

// restoreData runs `fedbr br restore-data` in process and decodes its summary.
func restoreData(ctx context.Context, pdAddr string, resolved uint64, stores int, args ...string) (restoredata.Result, error) {
	cmd := restoredatacmd.NewCmd()
	var out, logs bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&logs)
	cmd.SetArgs(append([]string{"--pd", pdAddr, "--resolved-ts", fmt.Sprint(resolved), "--stores", fmt.Sprint(stores)}, args...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		return restoredata.Result{}, fmt.Errorf("%w\n%s", err, logs.String())
	}
	var res restoredata.Result
	return res, json.Unmarshal(out.Bytes(), &res)
}
