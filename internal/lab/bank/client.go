package bank

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/clients/router"
	"google.golang.org/grpc"

	"github.com/fedbr/fedbr/internal/tidb"
	"github.com/fedbr/fedbr/internal/tidb/codec"
)

// Client is a small transactional client over the real PD client and the
// kvproto TiKV service: it routes by region through PD, retries region
// errors, and runs Percolator two-phase commit.
type Client struct {
	pd pd.Client
	// LockWait bounds how long a read waits for a lock to clear.
	LockWait time.Duration

	tls   *tidb.TLS
	mu    sync.Mutex
	conns map[uint64]*grpc.ClientConn
}

// Errors a transaction can end with.
var (
	ErrConflict = errors.New("transaction conflict")
	ErrLocked   = errors.New("key is locked")
)

// NewClient connects to PD at addrs (host:port) in plaintext.
func NewClient(ctx context.Context, addrs []string) (*Client, error) {
	return NewClientTLS(ctx, addrs, tidb.Plaintext)
}

// NewClientTLS connects to PD at addrs (host:port) and to the stores over t (nil: plaintext).
func NewClientTLS(ctx context.Context, addrs []string, t *tidb.TLS) (*Client, error) {
	c, err := pd.NewClientWithContext(ctx, addrs, t.SecurityOption())
	if err != nil {
		return nil, fmt.Errorf("connect pd %v: %w", addrs, err)
	}
	return &Client{pd: c, tls: t, LockWait: 5 * time.Second, conns: map[uint64]*grpc.ClientConn{}}, nil
}

// Close releases the connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		_ = cc.Close()
	}
	c.pd.Close()
}

// TS returns a fresh timestamp.
func (c *Client) TS(ctx context.Context) (uint64, error) {
	p, l, err := c.pd.GetTS(ctx)
	if err != nil {
		return 0, fmt.Errorf("get ts: %w", err)
	}
	return uint64(p)<<18 | uint64(l), nil
}

// PD is the underlying PD client.
func (c *Client) PD() pd.Client { return c.pd }

// target is where a request goes: region context plus the leader's client.
type target struct {
	region *router.Region
	kv     tikvpb.TikvClient
}

func (t target) ctx() *kvrpcpb.Context {
	return &kvrpcpb.Context{RegionId: t.region.Meta.GetId(), RegionEpoch: t.region.Meta.GetRegionEpoch(), Peer: t.region.Leader}
}

// locate finds the region holding the raw key key. PD knows regions by
// encoded boundaries, so the key is encoded for the lookup and the region's
// boundaries are decoded into raw keys, as TiDB's client does (client-go's
// CodecPDClient): every key this client compares or sends is raw.
func (c *Client) locate(ctx context.Context, key []byte) (target, error) {
	r, err := c.pd.GetRegion(ctx, codec.EncodeBytes(key))
	if err != nil {
		return target{}, fmt.Errorf("locate %q: %w", key, err)
	}
	if r == nil || r.Leader == nil || r.Leader.GetStoreId() == 0 {
		return target{}, errRetry
	}
	if r, err = rawRegion(r); err != nil {
		return target{}, fmt.Errorf("locate %q: %w", key, err)
	}
	kv, err := c.store(ctx, r.Leader.GetStoreId())
	if err != nil {
		return target{}, err
	}
	return target{region: r, kv: kv}, nil
}

// Route is where requests for a key go: its region and the leader's client.
type Route struct {
	Region *router.Region
	KV     tikvpb.TikvClient
}

// Locate returns the route of the region containing the raw key key, waiting
// until PD knows its leader; the region's boundaries are raw keys.
func (c *Client) Locate(ctx context.Context, key []byte) (Route, error) {
	for {
		t, err := c.locate(ctx, key)
		if err == nil {
			return Route{Region: t.region, KV: t.kv}, nil
		}
		if !errors.Is(err, errRetry) {
			return Route{}, err
		}
		if err := backoff(ctx); err != nil {
			return Route{}, err
		}
	}
}

// rawRegion is r with its boundaries decoded into raw keys.
func rawRegion(r *router.Region) (*router.Region, error) {
	meta, err := codec.DecodeRegion(r.Meta)
	if err != nil {
		return nil, err
	}
	raw := *r
	raw.Meta = meta
	return &raw, nil
}

func (c *Client) store(ctx context.Context, id uint64) (tikvpb.TikvClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[id]; ok {
		return tikvpb.NewTikvClient(cc), nil
	}
	st, err := c.pd.GetStore(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get store %d: %w", id, err)
	}
	cc, err := grpc.NewClient(st.GetAddress(), c.tls.Transport())
	if err != nil {
		return nil, fmt.Errorf("dial store %d: %w", id, err)
	}
	c.conns[id] = cc
	return tikvpb.NewTikvClient(cc), nil
}

// forget drops a store connection (its address may have changed).
func (c *Client) forget(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[id]; ok {
		_ = cc.Close()
		delete(c.conns, id)
	}
}

var errRetry = errors.New("retry")

// commitTimeout bounds a transaction's cleanup and commit phase.
const commitTimeout = 30 * time.Second

// rpcTimeout bounds one attempt at one store; the caller retries elsewhere.
const rpcTimeout = 2 * time.Second

func backoff(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// do runs f against the leader of key's region until it answers without a
// region error or transport failure.
func (c *Client) do(ctx context.Context, key []byte, f func(context.Context, target) (*errorpb.Error, error)) error {
	for {
		t, err := c.locate(ctx, key)
		if err == nil {
			var rerr *errorpb.Error
			rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
			rerr, err = f(rctx, t)
			cancel()
			if err == nil && rerr == nil {
				return nil
			}
			if err != nil {
				c.forget(t.region.Leader.GetStoreId())
			}
			if rerr.GetFlashbackInProgress() != nil {
				return fmt.Errorf("region %d: %s", t.region.Meta.GetId(), rerr.GetMessage())
			}
		} else if !errors.Is(err, errRetry) {
			return err
		}
		if err := backoff(ctx); err != nil {
			return err
		}
	}
}

// Get reads key at ts, waiting up to LockWait for a lock to clear.
func (c *Client) Get(ctx context.Context, key []byte, ts uint64) ([]byte, error) {
	deadline := time.Now().Add(c.LockWait)
	for {
		var val []byte
		var kerr *kvrpcpb.KeyError
		err := c.do(ctx, key, func(ctx context.Context, t target) (*errorpb.Error, error) {
			r, err := t.kv.KvGet(ctx, &kvrpcpb.GetRequest{Context: t.ctx(), Key: key, Version: ts})
			if err != nil {
				return nil, err
			}
			val, kerr = r.GetValue(), r.GetError()
			return r.GetRegionError(), nil
		})
		if err != nil {
			return nil, err
		}
		if kerr == nil {
			return val, nil
		}
		if kerr.GetLocked() == nil {
			return nil, fmt.Errorf("get %q at %d: %v", key, ts, kerr)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("get %q at %d: %w (lock ts %d)", key, ts, ErrLocked, kerr.GetLocked().GetLockVersion())
		}
		c.settle(ctx, kerr.GetLocked(), deadline)
	}
}

// resolveOrWait settles a lock the way TiDB does: ask the primary whether
// the transaction committed (then commit the lock), was rolled back or
// expired (then roll it back); a live lock is waited for.
func (c *Client) resolveOrWait(ctx context.Context, l *kvrpcpb.LockInfo) error {
	now, err := c.TS(ctx)
	if err != nil {
		return err
	}
	var st *kvrpcpb.CheckTxnStatusResponse
	err = c.do(ctx, l.GetPrimaryLock(), func(ctx context.Context, t target) (*errorpb.Error, error) {
		r, err := t.kv.KvCheckTxnStatus(ctx, &kvrpcpb.CheckTxnStatusRequest{Context: t.ctx(), PrimaryKey: l.GetPrimaryLock(),
			LockTs: l.GetLockVersion(), CallerStartTs: now, CurrentTs: now, RollbackIfNotExist: true})
		if err != nil {
			return nil, err
		}
		st = r
		return r.GetRegionError(), nil
	})
	if err != nil {
		return fmt.Errorf("check txn %d: %w", l.GetLockVersion(), err)
	}
	if st.GetError() != nil {
		return fmt.Errorf("check txn %d: %v", l.GetLockVersion(), st.GetError())
	}
	if st.GetLockTtl() > 0 {
		return backoff(ctx) // alive: wait for its owner
	}
	return c.eachRegion(ctx, [][]byte{l.GetKey()}, func(ctx context.Context, t target, ks [][]byte) (*errorpb.Error, error) {
		r, err := t.kv.KvResolveLock(ctx, &kvrpcpb.ResolveLockRequest{Context: t.ctx(), StartVersion: l.GetLockVersion(), CommitVersion: st.GetCommitVersion(), Keys: ks})
		if err != nil {
			return nil, err
		}
		return r.GetRegionError(), nil
	})
}

// settle tries to resolve a lock until deadline; failures only mean the
// caller reads again (and gives up with ErrLocked at the deadline).
func (c *Client) settle(ctx context.Context, l *kvrpcpb.LockInfo, deadline time.Time) {
	lctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := c.resolveOrWait(lctx, l); err != nil {
		_ = backoff(ctx)
	}
}

// KV is one key and value.
type KV struct {
	Key, Value []byte
}

// Scan reads [start, end) at ts across regions.
func (c *Client) Scan(ctx context.Context, start, end []byte, ts uint64) ([]KV, error) {
	var out []KV
	key := start
	deadline := time.Now().Add(c.LockWait)
	for {
		var pairs []*kvrpcpb.KvPair
		var kerr *kvrpcpb.KeyError
		var regionEnd []byte
		err := c.do(ctx, key, func(ctx context.Context, t target) (*errorpb.Error, error) {
			r, err := t.kv.KvScan(ctx, &kvrpcpb.ScanRequest{Context: t.ctx(), StartKey: key, EndKey: end, Version: ts})
			if err != nil {
				return nil, err
			}
			pairs, kerr, regionEnd = r.GetPairs(), r.GetError(), t.region.Meta.GetEndKey()
			return r.GetRegionError(), nil
		})
		if err != nil {
			return nil, err
		}
		if kerr != nil {
			if kerr.GetLocked() == nil {
				return nil, fmt.Errorf("scan at %d: %v", ts, kerr)
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("scan at %d: %w: key %q lock ts %d", ts, ErrLocked, kerr.GetLocked().GetKey(), kerr.GetLocked().GetLockVersion())
			}
			c.settle(ctx, kerr.GetLocked(), deadline)
			continue
		}
		for _, p := range pairs {
			out = append(out, KV{Key: p.GetKey(), Value: p.GetValue()})
		}
		if len(regionEnd) == 0 || (len(end) > 0 && bytes.Compare(regionEnd, end) >= 0) {
			return out, nil
		}
		key = regionEnd
	}
}

// Commit writes puts atomically with Percolator 2PC at startTS and returns
// the commit ts. Keys are prewritten region by region in parallel; the
// primary commits first, then the secondaries. A conflict rolls the
// transaction back and returns ErrConflict. When the primary's commit may
// have taken effect but no answer says so, the error wraps
// ErrUnknownOutcome (an *UnknownOutcomeError with the commit ts).
//
// Once prewrite starts, cleanup and the commit phase run on a context
// detached from ctx's cancellation (bounded by commitTimeout), so a
// cancelled caller never strands locks that later readers would block on.
func (c *Client) Commit(ctx context.Context, startTS uint64, puts map[string][]byte) (uint64, error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	var keys [][]byte
	for k := range puts {
		keys = append(keys, []byte(k))
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	primary := keys[0]
	var mu sync.Mutex
	var kerrs []*kvrpcpb.KeyError
	err := c.eachRegion(ctx, keys, func(ctx context.Context, t target, ks [][]byte) (*errorpb.Error, error) {
		req := &kvrpcpb.PrewriteRequest{Context: t.ctx(), PrimaryLock: primary, StartVersion: startTS, LockTtl: 3000}
		for _, k := range ks {
			req.Mutations = append(req.Mutations, &kvrpcpb.Mutation{Op: kvrpcpb.Op_Put, Key: k, Value: puts[string(k)]})
		}
		r, err := t.kv.KvPrewrite(ctx, req)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		kerrs = append(kerrs, r.GetErrors()...)
		mu.Unlock()
		return r.GetRegionError(), nil
	})
	if err != nil || len(kerrs) > 0 {
		c.rollback(dctx, startTS, keys)
		if err != nil {
			return 0, fmt.Errorf("prewrite: %w", err)
		}
		return 0, fmt.Errorf("prewrite: %w: %v", ErrConflict, kerrs[0])
	}
	commitTS, err := c.TS(dctx)
	if err != nil {
		c.rollback(dctx, startTS, keys)
		return 0, err
	}
	// The primary decides (see primaryOutcome for what its answer means).
	var kerr *kvrpcpb.KeyError
	sent := false
	err = c.eachRegion(dctx, [][]byte{primary}, func(ctx context.Context, t target, ks [][]byte) (*errorpb.Error, error) {
		r, err := t.kv.KvCommit(ctx, &kvrpcpb.CommitRequest{Context: t.ctx(), StartVersion: startTS, Keys: ks, CommitVersion: commitTS})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			sent = true
			return nil, err
		}
		kerr = r.GetError()
		return r.GetRegionError(), nil
	})
	if err := primaryOutcome(primary, startTS, commitTS, err, kerr, sent); err != nil {
		return 0, err
	}
	// The transaction is committed; the secondaries follow. One that fails
	// keeps its lock, which its next reader resolves against the primary.
	if len(keys) > 1 {
		_ = c.eachRegion(dctx, keys[1:], func(ctx context.Context, t target, ks [][]byte) (*errorpb.Error, error) {
			r, err := t.kv.KvCommit(ctx, &kvrpcpb.CommitRequest{Context: t.ctx(), StartVersion: startTS, Keys: ks, CommitVersion: commitTS})
			if err != nil {
				return nil, err
			}
			return r.GetRegionError(), nil
		})
	}
	return commitTS, nil
}

// eachRegion groups keys by region and runs f on every group's leader in
// parallel, regrouping and retrying the groups that hit region errors.
func (c *Client) eachRegion(ctx context.Context, keys [][]byte, f func(context.Context, target, [][]byte) (*errorpb.Error, error)) error {
	pending := keys
	for len(pending) > 0 {
		type group struct {
			t    target
			keys [][]byte
		}
		groups := map[uint64]*group{}
		var retry [][]byte
		for _, k := range pending {
			t, err := c.locate(ctx, k)
			if errors.Is(err, errRetry) {
				retry = append(retry, k)
				continue
			}
			if err != nil {
				return err
			}
			g := groups[t.region.Meta.GetId()]
			if g == nil {
				g = &group{t: t}
				groups[t.region.Meta.GetId()] = g
			}
			g.keys = append(g.keys, k)
		}
		var mu sync.Mutex
		var fatal error
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
				rerr, err := f(rctx, g.t, g.keys)
				cancel()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case rerr.GetFlashbackInProgress() != nil:
					fatal = fmt.Errorf("region %d: %s", g.t.region.Meta.GetId(), rerr.GetMessage())
				case err != nil || rerr != nil:
					if err != nil {
						c.forget(g.t.region.Leader.GetStoreId())
					}
					retry = append(retry, g.keys...)
				}
			}()
		}
		wg.Wait()
		if fatal != nil {
			return fatal
		}
		pending = retry
		if len(pending) > 0 {
			if err := backoff(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Client) rollback(ctx context.Context, startTS uint64, keys [][]byte) {
	_ = c.eachRegion(ctx, keys, func(ctx context.Context, t target, ks [][]byte) (*errorpb.Error, error) {
		r, err := t.kv.KvBatchRollback(ctx, &kvrpcpb.BatchRollbackRequest{Context: t.ctx(), StartVersion: startTS, Keys: ks})
		if err != nil {
			return nil, err
		}
		return r.GetRegionError(), nil
	})
}
