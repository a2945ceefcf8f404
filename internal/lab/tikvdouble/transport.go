package tikvdouble

import (
	"context"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	"github.com/pingcap/kvproto/pkg/raft_serverpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc"
)

// transport ships raft messages to other stores over the real TiKV peer
// protocol: one client stream of tikvpb.Tikv/BatchRaft per destination store,
// addresses resolved through PD; what queued for a store while the last batch
// was being written goes out as the next batch, as TiKV's raft client does.
// Messages are dropped when a stream breaks; leaders resend on every tick, as
// raft expects of a lossy network.
type transport struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[uint64]chan *raft_serverpb.RaftMessage
	wg     sync.WaitGroup
}

func newTransport(s *Store) *transport {
	ctx, cancel := context.WithCancel(context.Background())
	return &transport{s: s, ctx: ctx, cancel: cancel, conns: map[uint64]chan *raft_serverpb.RaftMessage{}}
}

func (t *transport) send(msgs []*raft_serverpb.RaftMessage) {
	if len(msgs) == 0 {
		return
	}
	t.s.mu.Lock()
	isolated := t.s.isolatedLocked()
	t.s.mu.Unlock()
	if isolated {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		to := m.GetToPeer().GetStoreId()
		ch, ok := t.conns[to]
		if !ok {
			ch = make(chan *raft_serverpb.RaftMessage, 4096)
			t.conns[to] = ch
			t.wg.Add(1)
			go func() { defer t.wg.Done(); t.loop(to, ch) }()
		}
		select {
		case ch <- m:
		default: // full: drop, the leader will resend
		}
	}
}

func (t *transport) loop(store uint64, ch chan *raft_serverpb.RaftMessage) {
	for t.ctx.Err() == nil {
		t.stream(store, ch)
		select {
		case <-t.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *transport) stream(store uint64, ch chan *raft_serverpb.RaftMessage) {
	resp, err := t.s.pd.GetStore(t.ctx, &pdpb.GetStoreRequest{Header: t.s.header(), StoreId: store})
	if err != nil || resp.GetStore().GetAddress() == "" {
		return
	}
	cc, err := grpc.NewClient(resp.GetStore().GetAddress(), t.s.clientCreds())
	if err != nil {
		return
	}
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	st, err := tikvpb.NewTikvClient(cc).BatchRaft(ctx)
	if err != nil {
		return
	}
	for {
		var batch []*raft_serverpb.RaftMessage
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			batch = append(batch, m)
		}
		size := batch[0].Size()
	drain:
		for len(batch) < maxBatchMessages && size < maxBatchBytes {
			select {
			case m := <-ch:
				batch = append(batch, m)
				size += m.Size()
			default:
				break drain
			}
		}
		if err := st.Send(&tikvpb.BatchRaftMessage{Msgs: batch}); err != nil {
			return
		}
	}
}

// A BatchRaftMessage holds at most maxBatchMessages (TiKV's raft-msg-max-batch-size)
// and stops growing past maxBatchBytes, far below gRPC's 4 MiB message limit even with
// a region snapshot in it.
const (
	maxBatchMessages = 128
	maxBatchBytes    = 512 << 10
)

func (t *transport) close() {
	t.cancel()
	t.wg.Wait()
}
