package tikvdouble

import (
	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/raft_serverpb"
)

// entry is one replicated log entry; Data is a JSON command (empty = no-op).
type entry struct {
	Index uint64 `json:"i"`
	Term  uint64 `json:"t"`
	Data  []byte `json:"d,omitempty"`
}

type role int

const (
	follower role = iota
	candidate
	leader
)

func (r role) String() string { return [...]string{"follower", "candidate", "leader"}[r] }

// peer is this store's replica of one region: a simplified raft (terms,
// votes, log matching, quorum commit) without pre-vote or check-quorum.
type peer struct {
	region *metapb.Region
	selfID uint64

	// Hard state, persisted.
	term, vote, commit uint64
	// Log: entries firstIndex.. ; the entry before firstIndex had snapTerm.
	log        []entry
	firstIndex uint64
	snapTerm   uint64
	applied    uint64
	// applyQueued is the applied index whose mark is queued for the wal;
	// durableApplied the one known to be on disk.
	applyQueued, durableApplied uint64
	// persisted is the last index known to be on disk.
	persisted uint64

	role     role
	leaderID uint64
	votes    map[uint64]bool
	// preVoting is set while a pre-vote round is out.
	preVoting bool
	// termStart is the index of the no-op the leader appended on election;
	// the leader serves reads and resolved-ts only once it applied it.
	termStart uint64
	match     map[uint64]uint64
	next      map[uint64]uint64
	// heard is the followers a leader heard from in this election timeout.
	heard map[uint64]bool

	elapsed, timeout int
	pending          map[uint64]*proposal
	dirty            bool

	// uninit marks a peer created for a region this store just joined (a
	// conf change added it): it has no data and no log until the leader's
	// snapshot arrives, so it is kept in memory only, never campaigns,
	// serves nothing and is invisible to ReadRegionMeta, as in TiKV.
	uninit bool
	// idle counts ticks an uninitialized peer waited for its snapshot.
	idle int
	// merging is set once PrepareMerge applied: the peer refuses every
	// request until CommitMerge destroys it or RollbackMerge clears it.
	merging *mergeState
	// snapSent is the store tick a snapshot last went to each follower.
	snapSent map[uint64]int
}

func newPeer(r *metapb.Region, selfID, term uint64) *peer {
	return &peer{
		region: r, selfID: selfID, term: term, firstIndex: 1,
		match: map[uint64]uint64{}, next: map[uint64]uint64{}, pending: map[uint64]*proposal{},
	}
}

func (p *peer) lastIndex() uint64 { return p.firstIndex + uint64(len(p.log)) - 1 }

func (p *peer) termAt(i uint64) (uint64, bool) {
	switch {
	case i == p.firstIndex-1:
		return p.snapTerm, true
	case i >= p.firstIndex && i <= p.lastIndex():
		return p.log[i-p.firstIndex].Term, true
	}
	return 0, false
}

func (p *peer) lastTerm() uint64 { t, _ := p.termAt(p.lastIndex()); return t }

func (p *peer) entryAt(i uint64) *entry {
	if i < p.firstIndex || i > p.lastIndex() {
		return nil
	}
	return &p.log[i-p.firstIndex]
}

// appendEntries adds es (contiguous) at es[0].Index, dropping any
// conflicting suffix; it reports whether anything changed.
func (p *peer) appendEntries(es []entry) bool {
	changed := false
	for _, e := range es {
		if e.Index < p.firstIndex {
			continue
		}
		if t, ok := p.termAt(e.Index); ok && e.Index <= p.lastIndex() {
			if t == e.Term {
				continue
			}
			p.log = p.log[:e.Index-p.firstIndex]
		}
		if e.Index != p.lastIndex()+1 {
			break
		}
		p.log = append(p.log, e)
		changed = true
	}
	if p.persisted > p.lastIndex() {
		p.persisted = p.lastIndex()
	}
	return changed
}

func (p *peer) peerByID(id uint64) *metapb.Peer {
	for _, x := range p.region.GetPeers() {
		if x.GetId() == id {
			return x
		}
	}
	return nil
}

func (p *peer) self() *metapb.Peer { return p.peerByID(p.selfID) }

func (p *peer) leaderPeer() *metapb.Peer { return p.peerByID(p.leaderID) }

func (p *peer) quorum() int { return len(p.region.GetPeers())/2 + 1 }

// ready collects what one pass of the store loop must persist, then send.
type ready struct {
	recs []record
	msgs []*raft_serverpb.RaftMessage
	// snaps are followers that need a snapshot, which the store builds
	// (a peer has no access to the MVCC data).
	snaps []snapNeed
}

// snapNeed asks the store to send leader p's snapshot to peer to.
type snapNeed struct {
	p  *peer
	to uint64
}

// needSnapshot marks an append rejection from a peer that has no log to
// match against (an uninitialized peer).
var needSnapshot = []byte("snapshot")

func (r *ready) hard(p *peer) {
	r.recs = append(r.recs, record{Kind: "hard", Region: p.region.GetId(), Term: p.term, Vote: p.vote, Commit: p.commit})
}

func (r *ready) send(p *peer, to uint64, m *eraftpb.Message) {
	tp := p.peerByID(to)
	if tp == nil {
		return
	}
	m.From, m.To = p.selfID, to
	r.msgs = append(r.msgs, &raft_serverpb.RaftMessage{
		RegionId:    p.region.GetId(),
		FromPeer:    p.self(),
		ToPeer:      tp,
		Message:     m,
		RegionEpoch: proto.Clone(p.region.GetRegionEpoch()).(*metapb.RegionEpoch),
		StartKey:    p.region.GetStartKey(),
		EndKey:      p.region.GetEndKey(),
	})
}

// becomeFollower adopts term (persisting it when it changes).
func (p *peer) becomeFollower(rd *ready, term, leaderID uint64) {
	if term > p.term {
		p.term, p.vote = term, 0
		rd.hard(p)
	}
	if p.role == leader {
		p.failPending("not leader")
	}
	p.role, p.leaderID, p.elapsed = follower, leaderID, 0
}

// preCampaign asks the other peers whether they would vote for this peer
// at term+1 without touching any term (raft's pre-vote): a peer cut off from
// the others never inflates its term, so BR's (term, index) ranking keeps
// picking the peer with the most complete log.
func (p *peer) preCampaign(rd *ready) {
	p.elapsed = 0
	p.leaderID = 0 // we no longer believe in a leader, so we grant others too
	p.preVoting = true
	p.votes = map[uint64]bool{p.selfID: true}
	for _, x := range p.region.GetPeers() {
		if x.GetId() != p.selfID {
			rd.send(p, x.GetId(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgRequestPreVote, Term: p.term + 1, LogTerm: p.lastTerm(), Index: p.lastIndex()})
		}
	}
	if len(p.votes) >= p.quorum() {
		p.campaign(rd)
	}
}

// campaign starts an election for term+1 and votes for itself.
func (p *peer) campaign(rd *ready) {
	p.preVoting = false
	p.term++
	p.vote = p.selfID
	p.role, p.leaderID, p.elapsed = candidate, 0, 0
	p.votes = map[uint64]bool{p.selfID: true}
	rd.hard(p)
	p.requestVotes(rd)
	if len(p.votes) >= p.quorum() {
		p.becomeLeader(rd)
	}
}

// requestVotes asks every peer that has not voted for this candidate yet.
// A candidate repeats it every tick: a new region's peers exist only once
// their stores applied the split, so the first request of the peer that
// campaigns right after the split usually finds nobody to answer it.
func (p *peer) requestVotes(rd *ready) {
	for _, x := range p.region.GetPeers() {
		if !p.votes[x.GetId()] {
			rd.send(p, x.GetId(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgRequestVote, Term: p.term, LogTerm: p.lastTerm(), Index: p.lastIndex()})
		}
	}
}

// becomeLeader takes over and appends a no-op so earlier entries commit.
func (p *peer) becomeLeader(rd *ready) {
	p.role, p.leaderID = leader, p.selfID
	p.match, p.next = map[uint64]uint64{}, map[uint64]uint64{}
	for _, x := range p.region.GetPeers() {
		p.next[x.GetId()] = p.lastIndex() + 1
	}
	e := entry{Index: p.lastIndex() + 1, Term: p.term}
	p.log = append(p.log, e)
	p.termStart = e.Index
	rd.recs = append(rd.recs, record{Kind: "entries", Region: p.region.GetId(), Entries: []entry{e}})
	p.dirty = true
	p.broadcast(rd)
}

// broadcast sends every follower what it is missing (or a heartbeat).
func (p *peer) broadcast(rd *ready) {
	for _, x := range p.region.GetPeers() {
		if x.GetId() != p.selfID {
			p.sendAppend(rd, x.GetId())
		}
	}
}

// heartbeatTicks is how often an idle leader reminds its followers it leads (TiKV's
// raft-heartbeat-ticks): every other tick, as TiKV; a follower that is behind hears on
// every tick.
const heartbeatTicks = 2

// heartbeat is a leader's tick: appends to followers that are behind, and a heartbeat to all
// when due.
func (p *peer) heartbeat(rd *ready, due bool) {
	for _, x := range p.region.GetPeers() {
		if id := x.GetId(); id != p.selfID && (due || p.next[id] <= p.lastIndex()) {
			p.sendAppend(rd, id)
		}
	}
}

const maxAppendEntries = 256

func (p *peer) sendAppend(rd *ready, to uint64) {
	next := p.next[to]
	if next < p.firstIndex && p.firstIndex > 1 {
		// What the follower needs was compacted away: only a snapshot helps.
		rd.snaps = append(rd.snaps, snapNeed{p, to})
		return
	}
	if next < p.firstIndex {
		next = p.firstIndex
	}
	prev := next - 1
	prevTerm, _ := p.termAt(prev)
	var es []*eraftpb.Entry
	for i := next; i <= p.lastIndex() && len(es) < maxAppendEntries; i++ {
		e := p.entryAt(i)
		es = append(es, &eraftpb.Entry{Index: e.Index, Term: e.Term, Data: e.Data})
	}
	rd.send(p, to, &eraftpb.Message{MsgType: eraftpb.MessageType_MsgAppend, Term: p.term, Index: prev, LogTerm: prevTerm, Entries: es, Commit: p.commit})
}

// step handles one raft message addressed to this peer.
//
//nolint:gocyclo // one case per raft message type, as etcd/raft's step functions
func (p *peer) step(rd *ready, m *eraftpb.Message) {
	pre := m.GetMsgType() == eraftpb.MessageType_MsgRequestPreVote || m.GetMsgType() == eraftpb.MessageType_MsgRequestPreVoteResponse
	if m.GetTerm() > p.term && !pre {
		lead := uint64(0)
		if m.GetMsgType() == eraftpb.MessageType_MsgAppend {
			lead = m.GetFrom()
		}
		p.becomeFollower(rd, m.GetTerm(), lead)
	}
	switch m.GetMsgType() {
	case eraftpb.MessageType_MsgAppend:
		p.handleAppend(rd, m)
	case eraftpb.MessageType_MsgAppendResponse:
		p.handleAppendResponse(rd, m)
	case eraftpb.MessageType_MsgRequestVote:
		upToDate := m.GetLogTerm() > p.lastTerm() || (m.GetLogTerm() == p.lastTerm() && m.GetIndex() >= p.lastIndex())
		grant := m.GetTerm() == p.term && (p.vote == 0 || p.vote == m.GetFrom()) && upToDate
		if grant {
			p.vote = m.GetFrom()
			p.elapsed = 0
			rd.hard(p)
		}
		rd.send(p, m.GetFrom(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgRequestVoteResponse, Term: p.term, Reject: !grant})
	case eraftpb.MessageType_MsgRequestPreVote:
		upToDate := m.GetLogTerm() > p.lastTerm() || (m.GetLogTerm() == p.lastTerm() && m.GetIndex() >= p.lastIndex())
		leaderAlive := p.role == leader || (p.leaderID != 0 && p.elapsed < p.timeout)
		grant := m.GetTerm() > p.term && upToDate && !leaderAlive
		t := p.term
		if grant {
			t = m.GetTerm()
		}
		rd.send(p, m.GetFrom(), &eraftpb.Message{MsgType: eraftpb.MessageType_MsgRequestPreVoteResponse, Term: t, Reject: !grant})
	case eraftpb.MessageType_MsgRequestPreVoteResponse:
		if p.preVoting && !m.GetReject() && m.GetTerm() == p.term+1 {
			p.votes[m.GetFrom()] = true
			if len(p.votes) >= p.quorum() {
				p.campaign(rd)
			}
		}
	case eraftpb.MessageType_MsgRequestVoteResponse:
		if p.role == candidate && m.GetTerm() == p.term && !m.GetReject() {
			p.votes[m.GetFrom()] = true
			if len(p.votes) >= p.quorum() {
				p.becomeLeader(rd)
			}
		}
	case eraftpb.MessageType_MsgTimeoutNow:
		if m.GetTerm() == p.term {
			p.campaign(rd)
		}
	}
}

func (p *peer) handleAppend(rd *ready, m *eraftpb.Message) {
	reply := &eraftpb.Message{MsgType: eraftpb.MessageType_MsgAppendResponse, Term: p.term}
	if m.GetTerm() < p.term {
		reply.Reject = true
		rd.send(p, m.GetFrom(), reply)
		return
	}
	p.role, p.leaderID, p.elapsed, p.preVoting = follower, m.GetFrom(), 0, false
	if p.uninit {
		reply.Reject, reply.Context = true, needSnapshot
		rd.send(p, m.GetFrom(), reply)
		return
	}
	// Entries below our first index are compacted, hence committed, hence equal.
	if m.GetIndex()+1 >= p.firstIndex {
		if t, ok := p.termAt(m.GetIndex()); !ok || t != m.GetLogTerm() {
			reply.Reject = true
			reply.RejectHint = min(p.lastIndex(), m.GetIndex()-1)
			rd.send(p, m.GetFrom(), reply)
			return
		}
	}
	es := make([]entry, 0, len(m.GetEntries()))
	for _, e := range m.GetEntries() {
		es = append(es, entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: e.GetData()})
	}
	if p.appendEntries(es) {
		// Persist from the first entry that may have changed.
		var out []entry
		for _, e := range es {
			if e.Index >= p.firstIndex && e.Index <= p.lastIndex() {
				out = append(out, e)
			}
		}
		rd.recs = append(rd.recs, record{Kind: "entries", Region: p.region.GetId(), Entries: out})
		p.dirty = true
	}
	matched := m.GetIndex() + uint64(len(es))
	if c := min(m.GetCommit(), matched); c > p.commit {
		p.commit = c
		rd.hard(p)
	}
	reply.Index = matched
	rd.send(p, m.GetFrom(), reply)
}

func (p *peer) handleAppendResponse(rd *ready, m *eraftpb.Message) {
	if p.role != leader || m.GetTerm() != p.term {
		return
	}
	from := m.GetFrom()
	if m.GetReject() {
		if p.heard == nil {
			p.heard = map[uint64]bool{}
		}
		p.heard[from] = true
		if string(m.GetContext()) == string(needSnapshot) {
			rd.snaps = append(rd.snaps, snapNeed{p, from})
			return
		}
		p.next[from] = max(1, min(p.next[from]-1, m.GetRejectHint()+1))
		p.sendAppend(rd, from)
		return
	}
	if p.heard == nil {
		p.heard = map[uint64]bool{}
	}
	p.heard[from] = true
	if m.GetIndex() > p.match[from] {
		p.match[from] = m.GetIndex()
	}
	p.next[from] = p.match[from] + 1
	p.maybeCommit(rd)
}

// maybeCommit advances commit to the highest index of the current term that
// a quorum (counting the leader's own persisted log) holds.
func (p *peer) maybeCommit(rd *ready) {
	if p.role != leader {
		return
	}
	var idx []uint64
	for _, x := range p.region.GetPeers() {
		if x.GetId() == p.selfID {
			idx = append(idx, p.persisted)
		} else {
			idx = append(idx, p.match[x.GetId()])
		}
	}
	// The quorum-th highest.
	for i := range idx {
		for j := i + 1; j < len(idx); j++ {
			if idx[j] > idx[i] {
				idx[i], idx[j] = idx[j], idx[i]
			}
		}
	}
	c := idx[p.quorum()-1]
	if t, _ := p.termAt(c); c > p.commit && t == p.term {
		p.commit = c
		rd.hard(p)
	}
}

// checkQuorum steps a leader down when it did not hear from a quorum for a
// whole election timeout, so a cut-off leader stops accepting (and
// stranding) proposals.
func (p *peer) checkQuorum(rd *ready) {
	p.elapsed++
	if p.elapsed < p.timeout {
		return
	}
	p.elapsed = 0
	if len(p.heard)+1 < p.quorum() {
		p.becomeFollower(rd, p.term, 0)
	}
	p.heard = map[uint64]bool{}
}

// failPending answers every proposal still waiting with a not-leader error.
func (p *peer) failPending(msg string) {
	for i, pr := range p.pending {
		pr.finish(applyResult{notLeader: true, err: msg})
		delete(p.pending, i)
	}
}
