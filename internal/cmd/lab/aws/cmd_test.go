package aws

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDryRun(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--dir", t.TempDir(), "--dry-run", "--throttle", "0.5", "--latency", "CreateSnapshots=10ms",
		"--describe-delay", "2s", "--snapshot-error-after", "1m"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would serve") {
		t.Fatalf("output = %q", out.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--dir", "x", "--throttle", "2"},
		{"--dir", "x", "--latency", "nope"},
		{"--dir", "x", "--time-factor", "0"},
		{"--dir", "x", "--describe-delay", "-1s"},
		{"--dir", "x", "--snapshot-error-after", "-1s"},
		{"--dir", "x", "--snapshot-errors", "-1"},
		{"--listen", "127.0.0.1:0"},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// lineWriter hands each written line to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

func TestServesUntilCancelled(t *testing.T) {
	cmd := NewCmd()
	lines := make(lineWriter, 4)
	cmd.SetOut(lines)
	cmd.SetArgs([]string{"--dir", t.TempDir(), "--listen", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var line string
	select {
	case line = <-lines:
	case err := <-done:
		t.Fatalf("exited before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no serving line")
	}
	url := strings.Fields(strings.TrimPrefix(line, "AWS double serving on "))[0]
	resp, err := http.Get(url + "/_lab/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
