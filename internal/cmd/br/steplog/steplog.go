// Package steplog keeps a step's own log lines and saves them next to the backup's metadata
// (logs/<pod>.log under its storage prefix) when the step ends, so they outlive the Job's TTL
// (the agent's --save-step-logs passes `fedbr br --save-log`).
package steplog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
)

// Bounds of what is kept: the first HeadBytes and the last TailBytes of the log, with a line
// saying how much was left out between them.
const (
	HeadBytes = 64 << 10
	TailBytes = 960 << 10
)

// Tee writes everything to w and keeps a bounded copy (see HeadBytes).
type Tee struct {
	w       io.Writer
	mu      sync.Mutex
	head    []byte
	tail    []byte // a ring of TailBytes once full
	start   int    // where the ring begins
	dropped int64
}

// New returns a Tee writing to w.
func New(w io.Writer) *Tee { return &Tee{w: w} }

// Write writes p to the underlying writer and keeps it.
func (t *Tee) Write(p []byte) (int, error) {
	t.keep(p)
	return t.w.Write(p)
}

func (t *Tee) keep(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := HeadBytes - len(t.head); room > 0 {
		n := min(room, len(p))
		t.head = append(t.head, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		if len(t.tail) < TailBytes {
			n := min(TailBytes-len(t.tail), len(p))
			t.tail = append(t.tail, p[:n]...)
			p = p[n:]
			continue
		}
		// Full: overwrite the oldest bytes.
		n := min(TailBytes-t.start, len(p))
		copy(t.tail[t.start:], p[:n])
		t.start = (t.start + n) % TailBytes
		t.dropped += int64(n)
		p = p[n:]
	}
}

// Keep keeps line without writing it: what ends the saved log but is printed elsewhere (the
// step's error, which the command's caller prints).
func (t *Tee) Keep(line string) { t.keep([]byte(line)) }

// Bytes is what was kept: the head, a line naming the bytes left out (if any), the tail.
func (t *Tee) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	b.Write(t.head)
	if t.dropped > 0 {
		fmt.Fprintf(&b, "\n[fedbr: %d bytes of the log left out here]\n", t.dropped)
	}
	b.Write(t.tail[t.start:])
	b.Write(t.tail[:t.start])
	return b.Bytes()
}

// Save writes data under the storage of f as the log of pod (meta.StepLogKey).
func Save(ctx context.Context, f session.Flags, pod string, data []byte) (string, error) {
	key, err := meta.StepLogKey(pod)
	if err != nil {
		return "", err
	}
	store, err := f.Store(ctx)
	if err != nil {
		return "", err
	}
	if err := store.Blob().Put(ctx, key, data); err != nil {
		return "", fmt.Errorf("save the step's log as %s: %w", key, err)
	}
	return key, nil
}
