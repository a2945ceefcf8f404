package pd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"
)

func TestDryRunAndBadFlags(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--dry-run"})
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), "would serve") {
		t.Fatalf("dry run: %q %v", out.String(), err)
	}
	out.Reset()
	cmd = NewCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--dry-run", "--api", "v7.5", "--gc-life-time", "20s", "--gc-run-interval", "2s"})
	if err := cmd.ExecuteContext(context.Background()); err != nil ||
		!strings.Contains(out.String(), "API:v7.5") || !strings.Contains(out.String(), "GCLifeTime:20s") || !strings.Contains(out.String(), "GCRunInterval:2s") {
		t.Fatalf("dry run with --api and GC flags: %q %v", out.String(), err)
	}
	for _, args := range [][]string{
		{"--listen", "127.0.0.1:0"}, {"--data-dir", "x", "--operator-rate", "2"}, {"--data-dir", "x", "--api", "v6.5"},
		{"--data-dir", "x", "--gc-life-time", "0s"}, {"--data-dir", "x", "--gc-run-interval", "0s"},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

func TestServesUntilCancelled(t *testing.T) {
	cmd := NewCmd()
	lines := make(lineWriter, 4)
	cmd.SetOut(lines)
	cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var line string
	select {
	case line = <-lines:
	case err := <-done:
		t.Fatalf("exited early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no start line")
	}
	f := strings.Fields(line)
	url := strings.TrimPrefix(f[4], "http://")
	c := pdhttp.NewClient("test", []string{url})
	v, err := c.GetPDVersion(ctx)
	c.Close()
	if err != nil || v == "" {
		t.Fatalf("version from %s: %q %v", url, v, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
