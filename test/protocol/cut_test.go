package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

// recoverRegionMethod is RecoverData.RecoverRegion's full gRPC method name.
const recoverRegionMethod = "/recover_data.RecoverData/RecoverRegion"

// TestRecoverRegionStreamCutMidSendIsRetried: TiKV unwraps every RecoverRegion request it
// reads, so a stream that ends with an error before the client's half-close (restore-data
// cancelled or killed mid-send) panics the store, and its pod starts it again. restore-data's
// first RecoverRegion stream is cancelled once the store read its first request: that store
// crashes with tikvdouble.ErrRecoverRegionRecv and is started again on its volume (same
// address, new start timestamp), the attempt fails, and restore-data's next attempt, from the
// region metas, restores exactly.
func TestRecoverRegionStreamCutMidSendIsRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	images, ts, txns := stillBackup(t, ctx)
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	cfg := tidbcluster.Config{Dir: images, Stores: stores, Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}, StickyAddrs: true}
	c, err := tidbcluster.StartRecovering(rctx, cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	crashes := podRestarts(t, rctx, c)
	byAddr := map[string]*tikvdouble.Store{}
	for _, id := range c.StoreIDs() {
		byAddr[c.Addr(id)] = c.Store(id)
	}
	var once sync.Once
	cut := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		first := false
		if method == recoverRegionMethod {
			once.Do(func() { first = true })
		}
		s := byAddr[cc.Target()]
		if !first || s == nil {
			return streamer(ctx, desc, cc, method, opts...)
		}
		sctx, scancel := context.WithCancel(ctx)
		cs, err := streamer(sctx, desc, cc, method, opts...)
		if err != nil {
			scancel()
			return nil, err
		}
		t.Logf("Cutting the RecoverRegion stream to %s after its first request", cc.Target())
		return &cutStream{ClientStream: cs, cancel: scancel, store: s, before: s.RecoverRegionsReceived()}, nil
	}
	dial := func(_ context.Context, addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStreamInterceptor(cut))
	}
	if err := recoverDataWith(rctx, c.PDAddr(), ts, dial, t.Logf); err != nil {
		t.Fatalf("restore-data with a RecoverRegion stream cut mid-send: %v", err)
	}
	select {
	case crash := <-crashes:
		if !errors.Is(crash, tikvdouble.ErrRecoverRegionRecv) {
			t.Fatalf("store crash %v, want tikvdouble.ErrRecoverRegionRecv", crash)
		}
		t.Logf("the cut stream's store: %v", crash)
	case <-rctx.Done():
		t.Fatal("no store crashed on its cut RecoverRegion stream")
	}
	if err := c.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	if err := checkRestored(rctx, c, ts, txns); err != nil {
		t.Fatalf("restore after a RecoverRegion stream cut mid-send: %v", err)
	}
}

// cutStream is a RecoverRegion stream that, once its store read the first request, is
// cancelled (as a killed restore-data's streams are) and fails.
type cutStream struct {
	grpc.ClientStream
	cancel context.CancelFunc
	store  *tikvdouble.Store
	before uint64
}

func (s *cutStream) SendMsg(m any) error {
	if err := s.ClientStream.SendMsg(m); err != nil {
		return err
	}
	ctx := s.Context()
	for s.store.RecoverRegionsReceived() == s.before {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.cancel()
	return context.Canceled
}

// podRestarts plays the stores' pods: a store of c that crashes is started again on its volume.
// Each crash's error is sent on the channel returned.
func podRestarts(t *testing.T, ctx context.Context, c *tidbcluster.Cluster) <-chan error {
	t.Helper()
	crashes := make(chan error, stores)
	for _, id := range c.StoreIDs() {
		s := c.Store(id)
		go func() {
			select {
			case <-s.Crashed():
			case <-ctx.Done():
				return
			}
			crashes <- s.CrashError()
			c.StopStore(id)
			if err := c.StartStore(ctx, id); err != nil && ctx.Err() == nil {
				t.Errorf("start crashed store %d again: %v", id, err)
			}
		}()
	}
	return crashes
}

// recoverDataWith runs restore-data against the cluster at pdAddr, dialing the stores with dial.
func recoverDataWith(ctx context.Context, pdAddr string, ts uint64, dial restoredata.Dialer, logf func(string, ...any)) error {
	pc, err := pd.NewClientWithContext(ctx, []string{pdAddr}, pd.SecurityOption{})
	if err != nil {
		return err
	}
	defer pc.Close()
	h := pdhttp.NewClient("fedbr-test", []string{pdAddr})
	defer h.Close()
	_, err = restoredata.Run(ctx, restoredata.Deps{PD: pc, HTTP: h, Dial: dial, Log: logf}, restoredata.Config{
		ResolvedTS: ts, Stores: stores, Backoff: 200 * time.Millisecond, Poll: 100 * time.Millisecond, WaitStoresTimeout: 15 * time.Second})
	return err
}
