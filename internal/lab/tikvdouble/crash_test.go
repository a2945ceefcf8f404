package tikvdouble_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// flashbackRegion prepares and runs a flashback of key's whole region to version, with
// startTS and commitTS, on its leader; it returns the leader's store id and the error of the
// flashback call.
func flashbackRegion(t *testing.T, ctx context.Context, cl *bank.Client, key string, version, startTS, commitTS uint64) (uint64, error) {
	t.Helper()
	route, err := cl.Locate(ctx, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	r := route.Region
	rc := &kvrpcpb.Context{RegionId: r.Meta.GetId(), RegionEpoch: r.Meta.GetRegionEpoch(), Peer: r.Leader}
	prep, err := route.KV.KvPrepareFlashbackToVersion(ctx, &kvrpcpb.PrepareFlashbackToVersionRequest{Context: rc,
		StartKey: r.Meta.GetStartKey(), EndKey: r.Meta.GetEndKey(), StartTs: startTS, Version: version})
	if err != nil || prep.GetRegionError() != nil || prep.GetError() != "" {
		t.Fatalf("prepare flashback of %s's region: %v %v", key, prep, err)
	}
	fb, err := route.KV.KvFlashbackToVersion(ctx, &kvrpcpb.FlashbackToVersionRequest{Context: rc,
		StartKey: r.Meta.GetStartKey(), EndKey: r.Meta.GetEndKey(), StartTs: startTS, CommitTs: commitTS, Version: version})
	if err == nil && (fb.GetRegionError() != nil || fb.GetError() != "") {
		err = fmt.Errorf("region error %v, error %q", fb.GetRegionError(), fb.GetError())
	}
	return r.Leader.GetStoreId(), err
}

// TestFlashbackBelowALatestCommitCrashesTheLeader: a flashback whose commit ts is above every
// key's latest commit rewrites the region; one whose commit ts is below a key's latest commit
// trips TiKV's assertion in the read phase, which panics the leader's process: the store
// crashes with tikvdouble.ErrFlashbackNotLatest, naming the key and both ts.
func TestFlashbackBelowALatestCommitCrashesTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{SplitKeys: [][]byte{[]byte("m")}, PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	ts1 := put(t, ctx, cl, map[string]string{"a1": "old", "z1": "old"})
	ts2 := put(t, ctx, cl, map[string]string{"a1": "new", "z1": "new"})

	leader, err := flashbackRegion(t, ctx, cl, "a1", ts1, ts2+1, ts2+2)
	if err != nil {
		t.Fatalf("flashback above every commit: %v", err)
	}
	if err := c.Store(leader).CrashError(); err != nil {
		t.Fatalf("store %d crashed on a flashback above every commit: %v", leader, err)
	}
	leader, err = flashbackRegion(t, ctx, cl, "z1", ts1, ts1+1, ts1+2)
	if err == nil {
		t.Fatal("flashback below z1's latest commit succeeded")
	}
	s := c.Store(leader)
	<-s.Crashed()
	crash := s.CrashError()
	if !errors.Is(crash, tikvdouble.ErrFlashbackNotLatest) {
		t.Fatalf("store %d: crash %v, want tikvdouble.ErrFlashbackNotLatest", leader, crash)
	}
	for _, want := range []string{`"z1"`, fmt.Sprint(ts2), fmt.Sprint(ts1 + 2)} {
		if !strings.Contains(crash.Error(), want) {
			t.Errorf("crash %q does not name %s", crash, want)
		}
	}
	t.Logf("store %d: %v", leader, crash)
}

// TestStoreRefusesAnotherClusterOutsideRecovery: a store keeps its cluster id on its volume.
// Started on a backup's images against a fresh PD (another cluster id) before PD is marked
// snapshot-recovering, it refuses to start with tikvdouble.ErrClusterIDMismatch, as TiKV does,
// so its pod restarts it again and again; in recovery mode it takes PD's cluster id, and
// starts in normal mode once the mark is lifted.
func TestStoreRefusesAnotherClusterOutsideRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startCluster(t, ctx, tidbcluster.Config{PD: pddouble.Config{OperatorRate: -1}})
	cl := client(t, ctx, c)
	ts := put(t, ctx, cl, map[string]string{"k": "v"})
	images := t.TempDir()
	if err := c.SnapshotAll(images); err != nil {
		t.Fatal(err)
	}

	rc, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: images, Stores: 3, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if rc.PD.ClusterID() == c.PD.ClusterID() {
		t.Fatalf("the restore's PD has the backup's cluster id %d", c.PD.ClusterID())
	}
	err = rc.StartStore(ctx, 1)
	if !errors.Is(err, tikvdouble.ErrClusterIDMismatch) {
		t.Fatalf("store started on a backup's volume before the mark: %v, want tikvdouble.ErrClusterIDMismatch", err)
	}
	t.Logf("before the mark: %v", err)

	h := pdhttp.NewClient("test", []string{rc.PDAddr()})
	defer h.Close()
	if err := h.SetSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.ResetTS(ctx, ts, true); err != nil {
		t.Fatal(err)
	}
	if err := rc.StartStores(ctx); err != nil {
		t.Fatalf("stores in recovery mode: %v", err)
	}
	if err := h.DeleteSnapshotRecoveringMark(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range rc.StoreIDs() {
		rc.StopStore(id)
	}
	if err := rc.StartStores(ctx); err != nil {
		t.Fatalf("stores in normal mode after recovery mode took the restore's cluster id: %v", err)
	}
	for _, id := range rc.StoreIDs() {
		if rc.Recovery(id) {
			t.Fatalf("store %d still in recovery mode after the mark was lifted", id)
		}
	}
}
