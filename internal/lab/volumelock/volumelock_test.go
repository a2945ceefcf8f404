package volumelock

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestExclusiveBlocksWriters(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir)
	if err := w.Append("log", []byte("a")); err != nil {
		t.Fatal(err)
	}
	l, err := Exclusive(dir)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	finished := make(chan error, 1)
	go func() {
		finished <- w.Append("log", []byte("b"))
		done.Store(true)
	}()
	time.Sleep(20 * time.Millisecond)
	if done.Load() {
		t.Fatal("append finished while the exclusive lock was held")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	if string(b) != "a" {
		t.Fatalf("file = %q while locked, want %q", b, "a")
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "log"))
	if string(b) != "ab" {
		t.Fatalf("file = %q, want %q", b, "ab")
	}
}

func TestReplaceKeepsOldInode(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir)
	if err := w.Append("f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "f")
	if err := os.Link(filepath.Join(dir, "f"), link); err != nil {
		t.Fatal(err)
	}
	if err := w.Replace("f", []byte("new")); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(link)
	cur, _ := os.ReadFile(filepath.Join(dir, "f"))
	if string(old) != "old" || string(cur) != "new" {
		t.Fatalf("old=%q cur=%q", old, cur)
	}
}

func TestPrivate(t *testing.T) {
	for rel, want := range map[string]bool{
		".lock": true, "a/.tmp-1": true, "data/log": false, "x": false, ".d/x": true,
	} {
		if got := Private(rel); got != want {
			t.Errorf("Private(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestFileAppend(t *testing.T) {
	dir := t.TempDir()
	f, err := NewWriter(dir).Open("wal/000001.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{"a", "b", "c"} {
		if err := f.Append([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Exclusive(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Append([]byte("d")) }()
	select {
	case err := <-done:
		t.Fatalf("append returned %v while the capture lock was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	_ = l.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "wal/000001.log")); string(b) != "abcd" {
		t.Fatalf("file = %q", b)
	}
}
