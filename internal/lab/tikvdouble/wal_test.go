package tikvdouble

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestWALDropsTornTailAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir)
	if err != nil || len(w.recs) != 0 {
		t.Fatalf("fresh wal: %v", err)
	}
	for i := range 3 {
		if err := w.append([]record{{Kind: "hard", Region: uint64(i + 1), Term: 7}}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, walFile)
	good, _ := os.ReadFile(path)
	for _, tail := range [][]byte{
		{9, 0, 0},                      // torn header
		{50, 0, 0, 0, 1, 2, 3, 4, 'x'}, // torn payload
		append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, '{', '}'), // bad checksum
	} {
		if err := os.WriteFile(path, append(append([]byte(nil), good...), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := openWAL(dir)
		if err != nil {
			t.Fatal(err)
		}
		recs := w.recs
		if len(recs) != 3 || recs[2].Region != 3 || recs[2].Term != 7 {
			t.Fatalf("records after torn tail %v: %+v", tail, recs)
		}
		if b, _ := os.ReadFile(path); len(b) != len(good) {
			t.Fatalf("torn tail kept: %d bytes, want %d", len(b), len(good))
		}
	}
}

func TestReplayRebuildsPeersAndData(t *testing.T) {
	s := &Store{peers: map[uint64]*peer{}, kv: newKVStore(), rd: &ready{}, created: map[uint64]bool{}, rng: rand.New(rand.NewPCG(1, 1))}
	s.cfg.StoreID = 1
	cmd := func(c command) []byte { b, _ := jsonMarshal(c); return b }
	r := region3(5)
	recs := []record{
		{Kind: "region", Region: 5, Meta: r, FirstIndex: 1, Term: 1},
		{Kind: "entries", Region: 5, Entries: []entry{
			{Index: 1, Term: 1},
			{Index: 2, Term: 1, Data: cmd(command{Prewrite: &prewriteCmd{StartTS: 10, Primary: []byte("a"), Mutations: []mutation{{Key: []byte("a"), Value: []byte("1")}}}})},
			{Index: 3, Term: 1, Data: cmd(command{Commit: &commitCmd{StartTS: 10, CommitTS: 11, Keys: [][]byte{[]byte("a")}}})},
		}},
		{Kind: "hard", Region: 5, Term: 2, Vote: 2, Commit: 3},
		{Kind: "apply", Region: 5, Applied: 2},
		// A later leader rewrote index 3.
		{Kind: "entries", Region: 5, Entries: []entry{{Index: 3, Term: 2}}},
	}
	if err := s.replay(recs); err != nil {
		t.Fatal(err)
	}
	p := s.peers[5]
	if p.applied != 2 || p.lastIndex() != 3 || p.term != 2 {
		t.Fatalf("peer after replay: applied %d last %d term %d", p.applied, p.lastIndex(), p.term)
	}
	if tm, _ := p.termAt(3); tm != 2 {
		t.Fatalf("entry 3 term %d, want the rewritten 2", tm)
	}
	if _, ke := s.kv.read([]byte("a"), 100); ke == nil {
		t.Fatal("prewrite lock not replayed")
	}
}
