package pd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/tidb"
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

// TestServesTLS: with --ca, --cert and --key PD serves https:// and answers a client with the
// lab's client certificate; a partial set is refused before anything is served.
func TestServesTLS(t *testing.T) {
	set, err := labtls.New(filepath.Join(t.TempDir(), "client"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(t.TempDir(), "node")
	if err := set.WriteNode(node); err != nil {
		t.Fatal(err)
	}
	files := []string{"--ca", filepath.Join(node, labtls.CAFile), "--cert", filepath.Join(node, labtls.CertFile), "--key", filepath.Join(node, labtls.KeyFile)}

	partial := NewCmd()
	partial.SetOut(&bytes.Buffer{})
	partial.SetErr(&bytes.Buffer{})
	partial.SetArgs(append([]string{"--data-dir", t.TempDir(), "--dry-run"}, files[:4]...))
	if err := partial.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--ca, --cert and --key go together") {
		t.Fatalf("--ca and --cert without --key: %v", err)
	}

	cmd := NewCmd()
	lines := make(lineWriter, 4)
	cmd.SetOut(lines)
	cmd.SetArgs(append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, files...))
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
	url := strings.Fields(line)[4]
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving on %s, want https://", url)
	}
	client, err := tidb.LoadTLS(set.Paths())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewPDHTTPClient("test", []string{strings.TrimPrefix(url, "https://")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.GetPDVersion(ctx)
	c.Close()
	if err != nil || v == "" {
		t.Fatalf("version from %s over TLS: %q %v", url, v, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
