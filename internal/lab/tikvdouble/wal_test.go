package tikvdouble

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWALDropsTornTailAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(1, dir, "")
	if err != nil || len(w.recs) != 0 {
		t.Fatalf("fresh wal: %v", err)
	}
	for i := range 3 {
		if err := w.append([]record{{Kind: "hard", Region: uint64(i + 1), Term: 7}}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, logFile)
	good, _ := os.ReadFile(path)
	for _, tail := range [][]byte{
		{9, 0, 0},                      // torn header
		{50, 0, 0, 0, 1, 2, 3, 4, 'x'}, // torn payload
		append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, '{', '}'), // bad checksum
	} {
		if err := os.WriteFile(path, append(append([]byte(nil), good...), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := openWAL(1, dir, "")
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

// TestWALOnTwoVolumes keeps the checkpoint on the data volume and the log on the raft volume,
// survives a crash between a checkpoint and the log's replacement, and refuses volumes that are
// not one store's at one moment.
func TestWALOnTwoVolumes(t *testing.T) {
	data, raft := t.TempDir(), t.TempDir()
	w, err := openWAL(1, data, raft)
	if err != nil {
		t.Fatal(err)
	}
	hard := func(w *wal, region uint64) {
		t.Helper()
		if err := w.append([]record{{Kind: "hard", Region: region, Term: 7}}); err != nil {
			t.Fatal(err)
		}
	}
	hard(w, 1)
	if _, err := os.Stat(filepath.Join(data, logFile)); err == nil {
		t.Fatal("the log is on the data volume")
	}
	if err := w.rewrite([]record{{Kind: "hard", Region: 1, Term: 7}}); err != nil {
		t.Fatal(err)
	}
	hard(w, 2)
	regions := func(w *wal) []uint64 {
		var out []uint64
		for _, r := range w.recs {
			out = append(out, r.Region)
		}
		return out
	}
	if w, err := openWAL(1, data, raft); err != nil || !slices.Equal(regions(w), []uint64{1, 2}) {
		t.Fatalf("reopened: %v, %v", err, w)
	}
	gen1 := copyVolume(t, raft)

	// A crash after the next checkpoint, before the log was replaced.
	w, err = openWAL(1, data, raft)
	if err != nil {
		t.Fatal(err)
	}
	w.gen++
	b, _ := encodeFrames([]record{w.genRecord(), {Kind: "hard", Region: 1, Term: 7}, {Kind: "hard", Region: 2, Term: 7}})
	if err := w.data.Replace(ckptFile, b); err != nil {
		t.Fatal(err)
	}
	if w, err := openWAL(1, data, raft); err != nil || !slices.Equal(regions(w), []uint64{1, 2}) {
		t.Fatalf("after a crash between checkpoint and log: %v, %v", err, w)
	}
	hard(w, 3)

	for name, c := range map[string]struct{ data, raft string }{
		"the raft volume of an older generation": {data, gen1}, // gen 1 log, gen 2 checkpoint, after a log of gen 2 began
		"no raft volume":                         {data, t.TempDir()},
		"no data volume":                         {t.TempDir(), raft},
	} {
		if name == "the raft volume of an older generation" {
			// Make the checkpoint two generations ahead of the old log.
			w, err := openWAL(1, data, raft)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.rewrite(w.recs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := openWAL(1, c.data, c.raft); !errors.Is(err, ErrVolumesApart) {
			t.Errorf("%s: %v, want ErrVolumesApart", name, err)
		}
	}
	if _, err := openWAL(2, data, raft); !errors.Is(err, ErrVolumesApart) {
		t.Errorf("store 1's volumes opened as store 2: %v", err)
	}
}

func copyVolume(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, logFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
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
