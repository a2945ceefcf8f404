package tikvdouble

import (
	"bytes"
	"sort"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
)

// Write kinds of a committed MVCC record.
const (
	kindPut      = "P"
	kindDelete   = "D"
	kindRollback = "R"
)

// version is one write record: the transaction started at StartTS committed
// (or rolled back) at CommitTS.
type version struct {
	CommitTS uint64 `json:"c"`
	StartTS  uint64 `json:"s"`
	Kind     string `json:"k"`
	Value    []byte `json:"v,omitempty"`
}

// lock is a Percolator prewrite lock.
type lock struct {
	Primary []byte     `json:"p"`
	StartTS uint64     `json:"s"`
	TTL     uint64     `json:"t,omitempty"`
	Op      kvrpcpb.Op `json:"o"`
	Value   []byte     `json:"v,omitempty"`
}

// mvccKey is everything stored for one user key; Versions are newest first.
type mvccKey struct {
	Lock     *lock     `json:"l,omitempty"`
	Versions []version `json:"w,omitempty"`
}

// kvStore is a store's MVCC data over all its regions (their ranges never
// overlap, so each key is owned by exactly one local peer).
type kvStore struct {
	keys   map[string]*mvccKey
	sorted []string
}

func newKVStore() *kvStore { return &kvStore{keys: map[string]*mvccKey{}} }

func (s *kvStore) get(k []byte) *mvccKey { return s.keys[string(k)] }

func (s *kvStore) getOrCreate(k []byte) *mvccKey {
	if m := s.keys[string(k)]; m != nil {
		return m
	}
	m := &mvccKey{}
	s.keys[string(k)] = m
	i := sort.SearchStrings(s.sorted, string(k))
	s.sorted = append(s.sorted, "")
	copy(s.sorted[i+1:], s.sorted[i:])
	s.sorted[i] = string(k)
	return m
}

// rangeKeys returns the keys in [start, end) (empty end = +inf).
func (s *kvStore) rangeKeys(start, end []byte) []string {
	i := sort.SearchStrings(s.sorted, string(start))
	j := len(s.sorted)
	if len(end) > 0 {
		j = sort.SearchStrings(s.sorted, string(end))
	}
	if i >= j {
		return nil
	}
	return s.sorted[i:j]
}

func (m *mvccKey) addVersion(v version) {
	i := sort.Search(len(m.Versions), func(i int) bool { return m.Versions[i].CommitTS <= v.CommitTS })
	m.Versions = append(m.Versions, version{})
	copy(m.Versions[i+1:], m.Versions[i:])
	m.Versions[i] = v
}

// visible returns the newest put/delete committed at or before ts.
func (m *mvccKey) visible(ts uint64) *version {
	for i := range m.Versions {
		v := &m.Versions[i]
		if v.CommitTS <= ts && v.Kind != kindRollback {
			return v
		}
	}
	return nil
}

func (m *mvccKey) findStart(startTS uint64) *version {
	for i := range m.Versions {
		if m.Versions[i].StartTS == startTS {
			return &m.Versions[i]
		}
	}
	return nil
}

func lockedErr(k []byte, l *lock) *kvrpcpb.KeyError {
	return &kvrpcpb.KeyError{Locked: &kvrpcpb.LockInfo{PrimaryLock: l.Primary, LockVersion: l.StartTS, Key: k, LockTtl: l.TTL, LockType: l.Op}}
}

// read returns the value of k visible at ts, or a lock error when a lock
// older than ts may hide a newer committed value.
func (s *kvStore) read(k []byte, ts uint64) ([]byte, *kvrpcpb.KeyError) {
	m := s.get(k)
	if m == nil {
		return nil, nil
	}
	if m.Lock != nil && m.Lock.StartTS <= ts && m.Lock.Op != kvrpcpb.Op_Lock {
		return nil, lockedErr(k, m.Lock)
	}
	v := m.visible(ts)
	if v == nil || v.Kind == kindDelete {
		return nil, nil
	}
	return v.Value, nil
}

type prewriteCmd struct {
	Mutations []mutation `json:"m"`
	Primary   []byte     `json:"p"`
	StartTS   uint64     `json:"s"`
	TTL       uint64     `json:"t"`
}

type mutation struct {
	Op    kvrpcpb.Op `json:"o"`
	Key   []byte     `json:"k"`
	Value []byte     `json:"v,omitempty"`
}

// prewrite locks every key or none.
func (s *kvStore) prewrite(c *prewriteCmd) []*kvrpcpb.KeyError {
	var errs []*kvrpcpb.KeyError
	for _, mu := range c.Mutations {
		m := s.get(mu.Key)
		if m == nil {
			continue
		}
		if m.Lock != nil && m.Lock.StartTS != c.StartTS {
			errs = append(errs, lockedErr(mu.Key, m.Lock))
			continue
		}
		if v := m.findStart(c.StartTS); v != nil {
			errs = append(errs, &kvrpcpb.KeyError{Abort: "transaction already committed or rolled back"})
			continue
		}
		if len(m.Versions) > 0 && m.Versions[0].CommitTS >= c.StartTS {
			errs = append(errs, &kvrpcpb.KeyError{Conflict: &kvrpcpb.WriteConflict{
				StartTs: c.StartTS, ConflictTs: m.Versions[0].StartTS, ConflictCommitTs: m.Versions[0].CommitTS,
				Key: mu.Key, Primary: c.Primary,
			}})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, mu := range c.Mutations {
		s.getOrCreate(mu.Key).Lock = &lock{Primary: c.Primary, StartTS: c.StartTS, TTL: c.TTL, Op: mu.Op, Value: mu.Value}
	}
	return nil
}

type commitCmd struct {
	Keys     [][]byte `json:"k"`
	StartTS  uint64   `json:"s"`
	CommitTS uint64   `json:"c"`
}

// commit turns the transaction's locks into write records, all or none.
func (s *kvStore) commit(c *commitCmd) *kvrpcpb.KeyError {
	for _, k := range c.Keys {
		m := s.get(k)
		if m != nil && m.Lock != nil && m.Lock.StartTS == c.StartTS {
			continue
		}
		if m != nil {
			if v := m.findStart(c.StartTS); v != nil && v.Kind != kindRollback {
				continue // already committed: idempotent
			}
		}
		return &kvrpcpb.KeyError{TxnNotFound: &kvrpcpb.TxnNotFound{StartTs: c.StartTS, PrimaryKey: k}, Abort: "txn lock not found"}
	}
	for _, k := range c.Keys {
		m := s.get(k)
		if m.Lock == nil || m.Lock.StartTS != c.StartTS {
			continue
		}
		kind := kindPut
		if m.Lock.Op == kvrpcpb.Op_Del {
			kind = kindDelete
		}
		if m.Lock.Op == kvrpcpb.Op_Put || m.Lock.Op == kvrpcpb.Op_Del {
			m.addVersion(version{CommitTS: c.CommitTS, StartTS: c.StartTS, Kind: kind, Value: m.Lock.Value})
		}
		m.Lock = nil
	}
	return nil
}

type rollbackCmd struct {
	Keys    [][]byte `json:"k"`
	StartTS uint64   `json:"s"`
}

// rollback removes the transaction's locks and leaves rollback records so a
// late prewrite cannot succeed.
func (s *kvStore) rollback(c *rollbackCmd) *kvrpcpb.KeyError {
	for _, k := range c.Keys {
		if m := s.get(k); m != nil {
			if v := m.findStart(c.StartTS); v != nil && v.Kind != kindRollback {
				return &kvrpcpb.KeyError{Abort: "transaction already committed"}
			}
		}
	}
	for _, k := range c.Keys {
		m := s.getOrCreate(k)
		if m.Lock != nil && m.Lock.StartTS == c.StartTS {
			m.Lock = nil
		}
		if m.findStart(c.StartTS) == nil {
			m.addVersion(version{CommitTS: c.StartTS, StartTS: c.StartTS, Kind: kindRollback})
		}
	}
	return nil
}

// flashbackCmd rewrites [Start, End) back to what was visible at Version.
type flashbackCmd struct {
	Start    []byte `json:"b"`
	End      []byte `json:"e"`
	Version  uint64 `json:"v"`
	StartTS  uint64 `json:"s"`
	CommitTS uint64 `json:"c"`
}

// flashback rolls back every lock not owned by the flashback itself and, for
// every key changed after Version, writes at CommitTS the value visible at
// Version (a delete when nothing was). Older history is left in place.
func (s *kvStore) flashback(c *flashbackCmd) int {
	n := 0
	for _, k := range append([]string(nil), s.rangeKeys(c.Start, c.End)...) {
		m := s.keys[k]
		if m.Lock != nil && m.Lock.StartTS != c.StartTS {
			m.addVersion(version{CommitTS: m.Lock.StartTS, StartTS: m.Lock.StartTS, Kind: kindRollback})
			m.Lock = nil
			n++
		}
		if m.Lock != nil && m.Lock.StartTS == c.StartTS {
			m.Lock = nil
		}
		latest := m.visible(^uint64(0))
		if latest == nil || latest.CommitTS <= c.Version || latest.CommitTS >= c.CommitTS {
			continue
		}
		old := m.visible(c.Version)
		nv := version{CommitTS: c.CommitTS, StartTS: c.StartTS, Kind: kindDelete}
		if old != nil && old.Kind == kindPut {
			nv.Kind, nv.Value = kindPut, old.Value
		}
		m.addVersion(nv)
		n++
	}
	return n
}

// resolveKV is ResolveKvData: physically delete every lock and every write
// newer than ts, locally and outside raft.
func (s *kvStore) resolveKV(ts uint64) int {
	n := 0
	for _, m := range s.keys {
		if m.Lock != nil {
			m.Lock = nil
			n++
		}
		kept := m.Versions[:0]
		for _, v := range m.Versions {
			if v.CommitTS > ts {
				n++
				continue
			}
			kept = append(kept, v)
		}
		m.Versions = kept
	}
	return n
}

// minLockTS is the smallest lock start ts in [start, end), or 0 when none.
func (s *kvStore) minLockTS(start, end []byte) uint64 {
	var min uint64
	for _, k := range s.rangeKeys(start, end) {
		if l := s.keys[k].Lock; l != nil && (min == 0 || l.StartTS < min) {
			min = l.StartTS
		}
	}
	return min
}

// middleKey is the split point of [start, end), or nil when there are too few keys.
func (s *kvStore) middleKey(start, end []byte) []byte {
	ks := s.rangeKeys(start, end)
	if len(ks) < 2 {
		return nil
	}
	mid := []byte(ks[len(ks)/2])
	if bytes.Equal(mid, start) {
		return nil
	}
	return mid
}

type checkTxnCmd struct {
	Primary            []byte `json:"p"`
	LockTS             uint64 `json:"l"`
	CurrentTS          uint64 `json:"c"`
	RollbackIfNotExist bool   `json:"r,omitempty"`
}

// txnStatus is the primary's verdict on a transaction.
type txnStatus struct {
	TTL, CommitTS uint64
	Action        kvrpcpb.Action
	Err           *kvrpcpb.KeyError
}

// checkTxn decides a transaction's fate from its primary key: committed
// (CommitTS > 0), rolled back, or still alive (TTL > 0). An expired primary
// lock is rolled back here, so the decision is final.
func (s *kvStore) checkTxn(c *checkTxnCmd) txnStatus {
	m := s.get(c.Primary)
	if m != nil && m.Lock != nil && m.Lock.StartTS == c.LockTS {
		if c.CurrentTS>>18 < c.LockTS>>18+m.Lock.TTL {
			return txnStatus{TTL: m.Lock.TTL}
		}
		s.rollback(&rollbackCmd{Keys: [][]byte{c.Primary}, StartTS: c.LockTS})
		return txnStatus{Action: kvrpcpb.Action_TTLExpireRollback}
	}
	if m != nil {
		if v := m.findStart(c.LockTS); v != nil {
			if v.Kind == kindRollback {
				return txnStatus{}
			}
			return txnStatus{CommitTS: v.CommitTS}
		}
	}
	if c.RollbackIfNotExist {
		s.rollback(&rollbackCmd{Keys: [][]byte{c.Primary}, StartTS: c.LockTS})
		return txnStatus{Action: kvrpcpb.Action_LockNotExistRollback}
	}
	return txnStatus{Err: &kvrpcpb.KeyError{TxnNotFound: &kvrpcpb.TxnNotFound{StartTs: c.LockTS, PrimaryKey: c.Primary}}}
}

type resolveLockCmd struct {
	StartTS  uint64   `json:"s"`
	CommitTS uint64   `json:"c"`
	Keys     [][]byte `json:"k"`
}

// resolveLock commits (CommitTS > 0) or rolls back the transaction's locks
// on Keys, or on every key in [start, end) when Keys is empty.
func (s *kvStore) resolveLock(c *resolveLockCmd, start, end []byte) {
	keys := c.Keys
	if len(keys) == 0 {
		for _, k := range s.rangeKeys(start, end) {
			if l := s.keys[k].Lock; l != nil && l.StartTS == c.StartTS {
				keys = append(keys, []byte(k))
			}
		}
	}
	var mine [][]byte
	for _, k := range keys {
		if m := s.get(k); m != nil && m.Lock != nil && m.Lock.StartTS == c.StartTS {
			mine = append(mine, k)
		}
	}
	if len(mine) == 0 {
		return
	}
	if c.CommitTS > 0 {
		s.commit(&commitCmd{Keys: mine, StartTS: c.StartTS, CommitTS: c.CommitTS})
		return
	}
	s.rollback(&rollbackCmd{Keys: mine, StartTS: c.StartTS})
}

// gc drops the write records TiKV's GC drops at safePoint: for each key it
// keeps every record committed after safePoint and the newest put at or
// below it; a delete that is the newest at or below it goes too (nothing
// older is left for it to hide), and so do rollback records at or below it.
// Locks stay (TiDB resolves them before it moves the safe point). A key left
// with neither records nor a lock is gone. It returns the records dropped.
func (s *kvStore) gc(safePoint uint64) int {
	n := 0
	emptied := false
	for k, m := range s.keys {
		n += m.gc(safePoint)
		if len(m.Versions) == 0 && m.Lock == nil {
			delete(s.keys, k)
			emptied = true
		}
	}
	if emptied {
		kept := s.sorted[:0]
		for _, k := range s.sorted {
			if s.keys[k] != nil {
				kept = append(kept, k)
			}
		}
		s.sorted = kept
	}
	return n
}

// gc applies the GC rule to one key's records (newest first), in the order
// TiKV's GC walks them: records above the safe point are kept; at or below
// it, rollbacks are dropped until the first put or delete, which ends the
// key's visible history: a put is kept, a delete dropped, and everything
// older dropped. The records are replaced, never edited in place: a queued
// wal record may share them.
func (m *mvccKey) gc(safePoint uint64) int {
	n := 0
	m.walkGC(safePoint, func(_ version, keep bool) {
		if !keep {
			n++
		}
	})
	if n == 0 {
		return 0
	}
	kept := make([]version, 0, len(m.Versions)-n)
	m.walkGC(safePoint, func(v version, keep bool) {
		if keep {
			kept = append(kept, v)
		}
	})
	m.Versions = kept
	return n
}

// walkGC tells f, for each record, whether GC at safePoint keeps it.
func (m *mvccKey) walkGC(safePoint uint64, f func(v version, keep bool)) {
	ended := false
	for _, v := range m.Versions {
		switch {
		case v.CommitTS > safePoint:
			f(v, true)
		case ended:
			f(v, false)
		case v.Kind == kindPut:
			f(v, true)
			ended = true
		case v.Kind == kindDelete:
			f(v, false)
			ended = true
		default:
			f(v, false)
		}
	}
}
