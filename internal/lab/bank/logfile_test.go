package bank

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A running workload appends the log as it goes: a reader sees the finished lines, sorted by
// commit ts, and leaves out a last line the writer has not finished; a malformed finished
// line is an error naming it.
func TestLogFileAppendAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	var l Log
	l.Add(Txn{From: -1, CommitTS: 5})
	l.Add(Txn{From: 1, To: 2, Amount: 3, CommitTS: 9})
	first, n := l.Since(0)
	if len(first) != 2 || n != 2 {
		t.Fatalf("Since(0) = %d txns, %d", len(first), n)
	}
	if err := AppendLog(path, first); err != nil {
		t.Fatal(err)
	}
	l.Add(Txn{From: 2, To: 1, Amount: 1, CommitTS: 7})
	more, n := l.Since(n)
	if len(more) != 1 || n != 3 || more[0].CommitTS != 7 {
		t.Fatalf("Since(2) = %+v, %d", more, n)
	}
	if err := AppendLog(path, more); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"start_ts":1,"commit`); err != nil { // torn: the writer is mid-line
		t.Fatal(err)
	}
	_ = f.Close()
	got, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []uint64
	for _, x := range got {
		ts = append(ts, x.CommitTS)
	}
	if len(ts) != 3 || ts[0] != 5 || ts[1] != 7 || ts[2] != 9 {
		t.Fatalf("read commit ts %v, want [5 7 9]", ts)
	}
	if err := os.WriteFile(path, []byte("{\"commit_ts\":1}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLog(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a malformed line: %v, want an error naming line 2", err)
	}
	if _, err := ReadLog(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "load the bank first") {
		t.Fatalf("no log: %v", err)
	}
}
