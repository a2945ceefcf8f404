package restoredata

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	recoverdatapb "github.com/pingcap/kvproto/pkg/recoverdatapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// metaStore serves ReadRegionMeta: n metas of regions 1…n, then an error if broke.
type metaStore struct {
	recoverdatapb.UnimplementedRecoverDataServer
	n     int
	broke bool
}

func (s *metaStore) ReadRegionMeta(_ *recoverdatapb.ReadRegionMetaRequest, stream recoverdatapb.RecoverData_ReadRegionMetaServer) error {
	for i := range s.n {
		k := fmt.Appendf(nil, "k%06d", i)
		if err := stream.Send(&recoverdatapb.RegionMeta{RegionId: uint64(i + 1), PeerId: uint64(i + 1000), StartKey: k, EndKey: fmt.Appendf(nil, "k%06d", i+1)}); err != nil {
			return err
		}
	}
	if s.broke {
		return errors.New("the store went away")
	}
	return nil
}

// TestReadMetasLeavesOutABrokenStore: the metas arrive in batches into one list as they are
// read; a store whose stream breaks after it sent some, tolerated as missing, has none of
// them planned: it is not among the stores that answered, and none of its metas is kept. The
// keys the stores sent alike are held once.
func TestReadMetasLeavesOutABrokenStore(t *testing.T) {
	servers := map[string]*metaStore{"s1": {n: 3000}, "s2": {n: 3000}, "s3": {n: 2500, broke: true}}
	listeners := map[string]*bufconn.Listener{}
	for addr, st := range servers {
		l := bufconn.Listen(1 << 20)
		g := grpc.NewServer()
		recoverdatapb.RegisterRecoverDataServer(g, st)
		go func() { _ = g.Serve(l) }()
		t.Cleanup(g.Stop)
		listeners[addr] = l
	}
	dial := func(_ context.Context, addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return listeners[addr].DialContext(ctx) }))
	}
	stores := []*metapb.Store{{Id: 1, Address: "s1"}, {Id: 2, Address: "s2"}, {Id: 3, Address: "s3"}}
	r := &run{d: Deps{Dial: dial, Log: func(string, ...any) {}}, cfg: Config{MaxMissingStores: 1}, conns: map[uint64]*conn{}}
	defer r.close()
	metas, answered, err := r.readMetas(t.Context(), stores)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(answered)
	if !slices.Equal(answered, []uint64{1, 2}) {
		t.Errorf("stores answered %v, want [1 2]", answered)
	}
	if metas.Len() != 6000 {
		t.Errorf("%d metas, want 6000: stores 1 and 2's, none of store 3's", metas.Len())
	}
	start := map[string][]byte{}
	for i := range metas.Len() {
		m := metas.At(i)
		if m.StoreID == 3 {
			t.Fatalf("a meta of store 3, which broke, is kept: %+v", m)
		}
		if k, ok := start[string(m.StartKey)]; ok && &k[0] != &m.StartKey[0] {
			t.Fatalf("region %d's start key %s is held twice", m.RegionID, m.StartKey)
		}
		start[string(m.StartKey)] = m.StartKey
	}
	// Not tolerated: the run fails with the store's error.
	r.cfg.MaxMissingStores = 0
	r.conns = map[uint64]*conn{}
	if _, _, err := r.readMetas(t.Context(), stores); err == nil || !strings.Contains(err.Error(), "store 3") || !strings.Contains(err.Error(), "the store went away") {
		t.Errorf("readMetas with no store tolerated = %v, want store 3's error", err)
	}
}
