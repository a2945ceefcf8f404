package bank

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
)

// AppendLog appends txns to the log file at path (JSON lines, created if missing) and syncs it.
func AppendLog(path string, txns []Txn) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open bank log: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, t := range txns {
		if err := enc.Encode(t); err != nil {
			_ = f.Close()
			return fmt.Errorf("write bank log: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write bank log: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync bank log: %w", err)
	}
	return f.Close()
}

// ReadLog reads the log file at path, sorted by commit ts. A line a writer has not finished
// (the file's last, without its newline) is left out: a running workload appends as it goes.
func ReadLog(path string) ([]Txn, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bank log %s: %w (load the bank first)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read bank log: %w", err)
	}
	var out []Txn
	for line := 1; len(data) > 0; line++ {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if i == len(data) {
			break // unfinished last line
		}
		var t Txn
		if err := json.Unmarshal(data[:i], &t); err != nil {
			return nil, fmt.Errorf("bank log %s line %d: %w", path, line, err)
		}
		out = append(out, t)
		data = data[i+1:]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CommitTS < out[j].CommitTS })
	return out, nil
}

// Since returns the transactions added after the first n, in the order they were added, and
// the log's length: a writer that flushes the log as it grows calls it with the length it
// last got.
func (l *Log) Since(n int) ([]Txn, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n > len(l.txns) {
		n = len(l.txns)
	}
	return append([]Txn(nil), l.txns[n:]...), len(l.txns)
}
