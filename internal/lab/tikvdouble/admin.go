package tikvdouble

import (
	"bytes"
	"encoding/json"
	"sort"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/raft_serverpb"
)

// This file holds the admin commands that change a region's shape other
// than splits: conf changes (peer add/remove, fed by raft snapshots) and
// merges (PrepareMerge on the source, CommitMerge on the target, or
// RollbackMerge). They follow TiKV's raftstore closely enough that a crash
// image taken in the middle of one looks like TiKV's: conf_ver/version
// bumps, a source peer in merging state that refuses every request, a
// destroyed peer that is simply gone from the volume.

// changePeerCmd adds or removes one voter; ConfVer is the epoch it was
// proposed against, so a stale or duplicated change is a no-op.
type changePeerCmd struct {
	Add     bool         `json:"a,omitempty"`
	Peer    *metapb.Peer `json:"p"`
	ConfVer uint64       `json:"cv"`
}

// prepareMergeCmd freezes the source region for a merge into Target.
type prepareMergeCmd struct {
	Version uint64         `json:"v"`
	ConfVer uint64         `json:"cv"`
	Target  *metapb.Region `json:"t"`
}

// mergeState is a source peer's pending merge: Index is its PrepareMerge
// entry, Target the target's meta when the merge was prepared.
type mergeState struct {
	Target *metapb.Region `json:"t"`
	Index  uint64         `json:"i"`
}

// commitMergeCmd, on the target, absorbs Source (its meta after
// PrepareMerge). Entries are the source's log up to Index, so a target
// replica whose local source peer lags can catch it up first, as TiKV's
// CommitMerge carries the source's entries.
type commitMergeCmd struct {
	Source        *metapb.Region `json:"s"`
	TargetVersion uint64         `json:"tv"`
	TargetConfVer uint64         `json:"tc"`
	Index         uint64         `json:"i"`
	Entries       []entry        `json:"e,omitempty"`
}

// rollbackMergeCmd, on the source, cancels a merge whose target changed.
type rollbackMergeCmd struct {
	Index uint64 `json:"i"`
}

// errMerging is the region error of a source peer that stopped serving.
func errMerging(id uint64) *errorpb.Error {
	return &errorpb.Error{Message: "proposal in merging mode", ProposalInMergingMode: &errorpb.ProposalInMergingMode{RegionId: id}}
}

// adminPendingLocked reports whether p has an admin command that is in its
// log but not applied yet, or a merge in flight: TiKV's "has pending admin"
// (CheckPendingAdminOp) and the reason a new admin proposal must wait.
func adminPendingLocked(p *peer) bool {
	if p.merging != nil {
		return true
	}
	for i := p.applied + 1; i <= p.lastIndex(); i++ {
		e := p.entryAt(i)
		if e == nil || len(e.Data) == 0 {
			continue
		}
		var c command
		if json.Unmarshal(e.Data, &c) == nil && (c.Split != nil || c.ChangePeer != nil || c.PrepareMerge != nil || c.CommitMerge != nil) {
			return true
		}
	}
	return false
}

// prepareMergeLoggedLocked reports whether p's log holds a PrepareMerge
// that p has not applied yet. A command logged behind it would apply only
// where the source's own log gets past the PrepareMerge (on its leader):
// CommitMerge catches a lagging source replica up to the PrepareMerge and
// no further. TiKV refuses such a command when it applies (PrepareMerge
// grew the epoch); the double refuses to propose it.
func prepareMergeLoggedLocked(p *peer) bool {
	for i := p.applied + 1; i <= p.lastIndex(); i++ {
		e := p.entryAt(i)
		if e == nil || len(e.Data) == 0 {
			continue
		}
		var c command
		if json.Unmarshal(e.Data, &c) == nil && c.PrepareMerge != nil {
			return true
		}
	}
	return false
}

// caughtUpLocked reports whether every follower of leader p holds its
// whole log, the precondition TiKV puts on PrepareMerge (min_matched) and
// that this double also puts on removing a peer.
func caughtUpLocked(p *peer) bool {
	for _, x := range p.region.GetPeers() {
		if x.GetId() != p.selfID && p.match[x.GetId()] < p.lastIndex() {
			return false
		}
	}
	return true
}

// execChangePeerLocked applies a conf change on one replica. The removed
// replica destroys itself (with its data) when it applies its own removal.
func (s *Store) execChangePeerLocked(p *peer, c *changePeerCmd) applyResult {
	if p.region.GetRegionEpoch().GetConfVer() != c.ConfVer {
		return applyResult{err: "stale conf change"}
	}
	exists := p.peerByID(c.Peer.GetId()) != nil
	switch {
	case c.Add && !exists:
		p.region.Peers = append(p.region.Peers, proto.Clone(c.Peer).(*metapb.Peer))
		if p.role == leader {
			p.next[c.Peer.GetId()], p.match[c.Peer.GetId()] = p.lastIndex()+1, 0
		}
	case !c.Add && exists:
		kept := p.region.Peers[:0]
		for _, x := range p.region.Peers {
			if x.GetId() != c.Peer.GetId() {
				kept = append(kept, x)
			}
		}
		p.region.Peers = kept
		delete(p.match, c.Peer.GetId())
		delete(p.next, c.Peer.GetId())
	default:
		return applyResult{err: "no-op conf change"}
	}
	p.region.RegionEpoch.ConfVer++
	if !c.Add && c.Peer.GetId() == p.selfID {
		s.destroyPeerLocked(p, true)
		return applyResult{}
	}
	s.persistRegionLocked(p)
	return applyResult{}
}

// destroyPeerLocked drops a local peer. With clearData its range's MVCC
// data goes too (a removed replica); a merged-away source keeps it, since
// the target now owns those keys on this store.
func (s *Store) destroyPeerLocked(p *peer, clearData bool) {
	id := p.region.GetId()
	p.failPending("region destroyed")
	delete(s.peers, id)
	s.destroyed[id] = true
	if s.replaying {
		if clearData {
			s.kv.clearRange(p.region.GetStartKey(), p.region.GetEndKey())
		}
		return
	}
	s.rd.recs = append(s.rd.recs, record{Kind: "tombstone", Region: id})
	if clearData {
		s.kv.clearRange(p.region.GetStartKey(), p.region.GetEndKey())
		s.rd.recs = append(s.rd.recs, record{Kind: "clear", Region: id, Start: p.region.GetStartKey(), End: p.region.GetEndKey()})
	}
}

// execPrepareMergeLocked freezes the source: both epoch parts grow (as in
// TiKV), and from now on the peer refuses every request until the target
// commits or the merge rolls back.
func (s *Store) execPrepareMergeLocked(p *peer, c *prepareMergeCmd, index uint64) applyResult {
	ep := p.region.GetRegionEpoch()
	if ep.GetVersion() != c.Version || ep.GetConfVer() != c.ConfVer || p.merging != nil {
		return applyResult{err: "stale prepare merge"}
	}
	ep.Version++
	ep.ConfVer++
	p.merging = &mergeState{Target: proto.Clone(c.Target).(*metapb.Region), Index: index}
	s.persistRegionLocked(p)
	return applyResult{}
}

// execRollbackMergeLocked unfreezes the source; the version grows again so
// that no request from the merging epoch is accepted.
func (s *Store) execRollbackMergeLocked(p *peer, c *rollbackMergeCmd) applyResult {
	if p.merging == nil || p.merging.Index != c.Index {
		return applyResult{err: "stale rollback merge"}
	}
	p.merging = nil
	p.region.RegionEpoch.Version++
	s.persistRegionLocked(p)
	return applyResult{}
}

// execCommitMergeLocked absorbs the source into target t on this replica:
// the local source peer is first caught up to its PrepareMerge (from its
// own log, then from the entries the command carries), then destroyed, and
// t's range grows over it with version max(source, target)+1.
func (s *Store) execCommitMergeLocked(t *peer, c *commitMergeCmd) applyResult {
	te := t.region.GetRegionEpoch()
	if te.GetVersion() != c.TargetVersion || te.GetConfVer() != c.TargetConfVer || !adjacent(t.region, c.Source) {
		return applyResult{err: "stale commit merge"}
	}
	src := s.peers[c.Source.GetId()]
	if src == nil || src.uninit || !s.catchUpSourceLocked(src, c) {
		// The source replica must be here (same stores, checked at
		// prepare, conf changes frozen since): keep the target where it
		// is rather than absorb a range without its data.
		s.log.Debug("Commit merge waits for its source replica", "source", c.Source.GetId(), "target", t.region.GetId())
		return applyResult{retry: true}
	}
	s.destroyPeerLocked(src, false)
	r := t.region
	if bytes.Equal(c.Source.GetEndKey(), r.GetStartKey()) {
		r.StartKey = append([]byte(nil), c.Source.GetStartKey()...)
	} else {
		r.EndKey = append([]byte(nil), c.Source.GetEndKey()...)
	}
	r.RegionEpoch.Version = max(r.GetRegionEpoch().GetVersion(), c.Source.GetRegionEpoch().GetVersion()) + 1
	s.persistRegionLocked(t)
	return applyResult{}
}

// catchUpSourceLocked applies the local source peer up to c.Index.
func (s *Store) catchUpSourceLocked(src *peer, c *commitMergeCmd) bool {
	if src.applied >= c.Index {
		return src.merging != nil
	}
	var missing []entry
	for _, e := range c.Entries {
		if e.Index > src.lastIndex() && e.Index <= c.Index {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		if !src.appendEntries(missing) {
			return false
		}
		if !s.replaying {
			s.rd.recs = append(s.rd.recs, record{Kind: "entries", Region: src.region.GetId(), Entries: missing})
		}
	}
	for i := src.applied + 1; i <= c.Index; i++ {
		e := src.entryAt(i)
		if e == nil {
			return false
		}
		s.execLocked(src, e)
		src.applied = i
	}
	if !s.replaying {
		s.rd.recs = append(s.rd.recs, record{Kind: "apply", Region: src.region.GetId(), Applied: src.applied})
	}
	return src.merging != nil
}

// adjacent reports whether a and b touch end to start, either way round.
func adjacent(a, b *metapb.Region) bool {
	return (len(a.GetEndKey()) > 0 && bytes.Equal(a.GetEndKey(), b.GetStartKey())) ||
		(len(b.GetEndKey()) > 0 && bytes.Equal(b.GetEndKey(), a.GetStartKey()))
}

// mergeProposal is what a store proposed to end the merge prepared at
// index: a CommitMerge in the target's term or a RollbackMerge in the
// source's term. A bare term would not do: the two terms are unrelated
// (both are often 1 in new regions), and one source prepares merge after
// merge in one term, so a CommitMerge that failed, or an earlier merge's
// RollbackMerge, would block the RollbackMerge until the source's term
// changes, which never happens while it merges.
type mergeProposal struct {
	index, term uint64
	rollback    bool
}

// driveMergesLocked moves every prepared merge on this store forward, the
// way TiKV's source peers poll on_check_merge: the store holding the
// target's leader proposes CommitMerge once its own source replica applied
// PrepareMerge; the source's leader proposes RollbackMerge when the target
// changed under it. Neither is refused by a backup lease: in-flight merges
// must be able to finish.
func (s *Store) driveMergesLocked() {
	if s.now().Before(s.mergeHold) {
		return
	}
	for _, src := range s.peers {
		m := src.merging
		if m == nil || src.applied < m.Index {
			continue
		}
		t := s.peers[m.Target.GetId()]
		targetOK := t != nil && !t.uninit && t.merging == nil && adjacent(t.region, src.region) &&
			t.region.GetRegionEpoch().GetVersion() == m.Target.GetRegionEpoch().GetVersion() &&
			t.region.GetRegionEpoch().GetConfVer() == m.Target.GetRegionEpoch().GetConfVer()
		switch {
		case !targetOK && src.role == leader && src.applied >= src.termStart:
			if rb := (mergeProposal{index: m.Index, term: src.term, rollback: true}); s.mergeProposed[src.region.GetId()] != rb {
				s.mergeProposed[src.region.GetId()] = rb
				_, _ = s.proposeLocked(src, command{RollbackMerge: &rollbackMergeCmd{Index: m.Index}})
			}
		case targetOK && t.role == leader && t.applied >= t.termStart:
			cm := mergeProposal{index: m.Index, term: t.term}
			if s.mergeProposed[src.region.GetId()] == cm {
				continue
			}
			s.mergeProposed[src.region.GetId()] = cm
			var es []entry
			for i := src.firstIndex; i <= m.Index; i++ {
				if e := src.entryAt(i); e != nil {
					es = append(es, *e)
				}
			}
			_, _ = s.proposeLocked(t, command{CommitMerge: &commitMergeCmd{
				Source: proto.Clone(src.region).(*metapb.Region), TargetVersion: t.region.GetRegionEpoch().GetVersion(),
				TargetConfVer: t.region.GetRegionEpoch().GetConfVer(), Index: m.Index, Entries: es,
			}})
		}
	}
}

// HoldMerges is a fault injection: for d the store neither commits nor
// rolls back prepared merges, so a crash image can catch regions between
// PrepareMerge and CommitMerge (TiKV's merging state) deterministically.
func (s *Store) HoldMerges(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mergeHold = s.now().Add(d)
}

// snapshotData is a raft snapshot's payload: the region and its MVCC data
// at the leader's applied index.
type snapshotData struct {
	Region *metapb.Region `json:"r"`
	// KV is in key order. Keys are bytes, never JSON strings: encoded keys are
	// not UTF-8, and encoding/json would replace their bytes.
	KV []snapshotKey `json:"kv"`
}

type snapshotKey struct {
	Key   []byte   `json:"k"`
	Value *mvccKey `json:"v"`
}

// snapshotEvery throttles snapshots to one follower, in ticks.
const snapshotEvery = 10

// sendSnapshotLocked ships leader p's applied state to follower to, which
// has no usable log (a new peer, or one behind the leader's compaction).
func (s *Store) sendSnapshotLocked(p *peer, to uint64) {
	if last, ok := p.snapSent[to]; ok && s.ticks-last < snapshotEvery {
		return
	}
	term, ok := p.termAt(p.applied)
	if !ok || p.merging != nil {
		return
	}
	d := snapshotData{Region: proto.Clone(p.region).(*metapb.Region)}
	for _, k := range s.kv.rangeKeys(p.region.GetStartKey(), p.region.GetEndKey()) {
		d.KV = append(d.KV, snapshotKey{Key: []byte(k), Value: s.kv.keys[k].clone()})
	}
	b, err := json.Marshal(&d)
	if err != nil {
		s.log.Error("Encoding a snapshot failed", "region", p.region.GetId(), "err", err)
		return
	}
	if p.snapSent == nil {
		p.snapSent = map[uint64]int{}
	}
	p.snapSent[to] = s.ticks
	s.rd.send(p, to, &eraftpb.Message{MsgType: eraftpb.MessageType_MsgSnapshot, Term: p.term, Snapshot: &eraftpb.Snapshot{
		Data: b, Metadata: &eraftpb.SnapshotMetadata{Index: p.applied, Term: term},
	}})
}

// installSnapshotLocked replaces a lagging or uninitialized local peer
// with the leader's snapshot. Like TiKV it refuses a snapshot whose range
// overlaps another initialized local peer (a split or merge this store has
// not applied yet): the leader retries later. A local peer merged into the
// snapshot's region (mergedInto) is destroyed instead.
//
// As etcd/raft, it never truncates what the peer may have acknowledged: a
// snapshot at or below the peer's commit index is stale (a late or resent
// one), and one whose last entry the peer's log already holds only says that
// entry is committed. Replacing the log there would drop entries after it
// that the leader may have counted towards a commit.
func (s *Store) installSnapshotLocked(p *peer, m *eraftpb.Message) {
	meta := m.GetSnapshot().GetMetadata()
	if m.GetTerm() < p.term {
		return
	}
	if !p.uninit {
		idx := meta.GetIndex()
		t, ok := p.termAt(idx)
		matches := ok && t == meta.GetTerm()
		if idx <= p.commit || matches {
			if m.GetTerm() > p.term {
				p.term, p.vote = m.GetTerm(), 0
			}
			p.role, p.leaderID, p.elapsed = follower, m.GetFrom(), 0
			if matches && idx > p.commit {
				p.commit = idx
			}
			s.rd.hard(p)
			s.rd.send(p, m.GetFrom(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgAppendResponse, Term: p.term, Index: max(p.commit, idx)})
			return
		}
	}
	var d snapshotData
	if err := json.Unmarshal(m.GetSnapshot().GetData(), &d); err != nil || d.Region == nil {
		return
	}
	var merged []*peer
	for id, o := range s.peers {
		if id != d.Region.GetId() && !o.uninit && overlaps(o.region, d.Region) {
			if !mergedInto(o.region, d.Region) {
				return
			}
			merged = append(merged, o)
		}
	}
	for _, o := range merged {
		s.destroyPeerLocked(o, false) // the snapshot replaces its data
	}
	if m.GetTerm() > p.term {
		p.term, p.vote = m.GetTerm(), 0
	}
	p.region = d.Region
	p.selfID = selfPeer(d.Region, s.cfg.StoreID, p.selfID)
	p.uninit, p.merging = false, nil
	p.role, p.leaderID, p.elapsed = follower, m.GetFrom(), 0
	idx := meta.GetIndex()
	p.log, p.firstIndex, p.snapTerm = nil, idx+1, meta.GetTerm()
	p.applied, p.commit, p.persisted = idx, idx, idx
	p.applyQueued, p.durableApplied = idx, idx
	start, end := d.Region.GetStartKey(), d.Region.GetEndKey()
	s.kv.clearRange(start, end)
	s.rd.recs = append(s.rd.recs,
		record{Kind: "region", Region: d.Region.GetId(), Meta: proto.Clone(d.Region).(*metapb.Region), FirstIndex: p.firstIndex,
			SnapTerm: p.snapTerm, Applied: idx, Term: p.term, Vote: p.vote, Commit: idx},
		record{Kind: "clear", Region: d.Region.GetId(), Start: start, End: end})
	for _, kv := range d.KV {
		*s.kv.getOrCreate(kv.Key) = *kv.Value
		s.rd.recs = append(s.rd.recs, record{Kind: "kv", Key: kv.Key, Value: kv.Value})
	}
	s.rd.send(p, m.GetFrom(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgAppendResponse, Term: p.term, Index: idx})
}

// mergedInto reports whether the local replica of region o is a leftover
// of a merge into r: r's range covers o's and r's version is newer. A key
// changes hands only by a split or a merge, and its new owner's version is
// higher than the old one's, so r owns o's keys after o's last local
// state; o would still own its start key if it existed, so it was merged
// away, and r's data includes o's. Without this, a replica that missed a
// merge could wait forever: its target needs the snapshot, and the stale
// source can neither finish the merge nor elect a leader.
func mergedInto(o, r *metapb.Region) bool {
	return o.GetRegionEpoch().GetVersion() < r.GetRegionEpoch().GetVersion() &&
		bytes.Compare(r.GetStartKey(), o.GetStartKey()) <= 0 &&
		(len(r.GetEndKey()) == 0 || len(o.GetEndKey()) > 0 && bytes.Compare(o.GetEndKey(), r.GetEndKey()) <= 0)
}

// selfPeer is store's peer id in r, or fallback.
func selfPeer(r *metapb.Region, store, fallback uint64) uint64 {
	for _, x := range r.GetPeers() {
		if x.GetStoreId() == store {
			return x.GetId()
		}
	}
	return fallback
}

// clone deep-copies one key's MVCC state.
func (m *mvccKey) clone() *mvccKey {
	out := &mvccKey{Versions: append([]version(nil), m.Versions...)}
	if m.Lock != nil {
		l := *m.Lock
		out.Lock = &l
	}
	return out
}

// clearRange drops every key in [start, end) (empty end = +inf).
func (s *kvStore) clearRange(start, end []byte) {
	ks := s.rangeKeys(start, end)
	if len(ks) == 0 {
		return
	}
	for _, k := range ks {
		delete(s.keys, k)
	}
	i := sort.SearchStrings(s.sorted, ks[0])
	s.sorted = append(s.sorted[:i], s.sorted[i+len(ks):]...)
}

// tombstoneTo tells a peer that is no longer a member of the region (its
// removal was never delivered to it) to destroy itself, as TiKV's
// gc-peer message does.
func tombstoneTo(p *peer, m *raft_serverpb.RaftMessage) *raft_serverpb.RaftMessage {
	return &raft_serverpb.RaftMessage{
		RegionId: p.region.GetId(), FromPeer: p.self(), ToPeer: m.GetFromPeer(), IsTombstone: true,
		RegionEpoch: proto.Clone(p.region.GetRegionEpoch()).(*metapb.RegionEpoch),
		Message:     &eraftpb.Message{MsgType: eraftpb.MessageType_MsgHeartbeat},
	}
}
