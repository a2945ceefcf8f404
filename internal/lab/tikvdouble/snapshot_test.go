package tikvdouble

import (
	"encoding/json"
	"testing"

	"github.com/gogo/protobuf/proto"
	"github.com/pingcap/kvproto/pkg/eraftpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
)

// TestStaleSnapshotKeepsTheLog: a snapshot that reaches a follower after it caught up by
// appends (a late or resent one) never truncates its log. Before the fix, a snapshot above the
// follower's applied index replaced the log: entries after the snapshot's index, which the
// follower had acknowledged and the leader may have counted towards a commit, were gone.
func TestStaleSnapshotKeepsTheLog(t *testing.T) {
	stores := []*Store{memStore(1), memStore(2), memStore(3)}
	for _, s := range stores {
		s.createPeerLocked(region3(1), 0)
	}
	s1, s2 := stores[0], stores[1]
	leader := s1.peers[1]
	leader.campaign(s1.rd)
	settle(stores)
	for i := range 4 {
		pw := &prewriteCmd{Primary: []byte("a"), StartTS: uint64(10 + i), TTL: 3000,
			Mutations: []mutation{{Op: kvrpcpb.Op_Put, Key: []byte{'a' + byte(i)}, Value: []byte("v")}}}
		if _, err := s1.proposeLocked(leader, command{Prewrite: pw}); err != nil {
			t.Fatal(err)
		}
	}
	settle(stores)
	f := s2.peers[1]
	last := f.lastIndex()
	if last != leader.lastIndex() || last < 4 {
		t.Fatalf("follower at %d, leader at %d", last, leader.lastIndex())
	}
	data, err := json.Marshal(&snapshotData{Region: proto.Clone(leader.region).(*metapb.Region), KV: []snapshotKey{}})
	if err != nil {
		t.Fatal(err)
	}
	snapAt := func(idx uint64) *eraftpb.Message {
		term, _ := leader.termAt(idx)
		return &eraftpb.Message{MsgType: eraftpb.MessageType_MsgSnapshot, Term: leader.term, From: leader.selfID,
			Snapshot: &eraftpb.Snapshot{Data: data, Metadata: &eraftpb.SnapshotMetadata{Index: idx, Term: term}}}
	}

	// The follower holds every entry but has not heard the latest commit index yet (nor
	// applied past it).
	f.commit, f.applied = last-3, last-3
	s2.installSnapshotLocked(f, snapAt(last-1))
	if f.lastIndex() != last || f.commit != last-1 {
		t.Errorf("matching snapshot: follower log ends at %d (want %d), commit %d (want %d)", f.lastIndex(), last, f.commit, last-1)
	}
	// A snapshot below the commit index is stale altogether.
	s2.installSnapshotLocked(f, snapAt(last-2))
	if f.lastIndex() != last || f.commit != last-1 {
		t.Errorf("stale snapshot: follower log ends at %d (want %d), commit %d (want %d)", f.lastIndex(), last, f.commit, last-1)
	}
	exchange(stores, 0)
	if leader.match[f.selfID] < last-1 {
		t.Errorf("the leader's match for the follower went back to %d", leader.match[f.selfID])
	}
}
