package pause

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

func TestPauseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, `required flag(s) "pd" not set`},
		{[]string{"--pd", "127.0.0.1:2379", "--ttl", "1s"}, "--ttl 1s is too short"},
		{[]string{"--pd", "127.0.0.1:2379", "--watch-release"}, "--watch-release watches --member"},
		{[]string{"--pd", "127.0.0.1:2379", "--wait-start"}, "--wait-start watches --member"},
		{[]string{"--pd", "127.0.0.1:2379", "--cleanup-timeout", "0s"}, "--cleanup-timeout and --dial-timeout must be positive"},
		{[]string{"--pd", "127.0.0.1:2379", "--status-addr", "nonsense"}, `--status-addr "nonsense"`},
		{[]string{"--pd", "127.0.0.1:2379", "--member", "Bad_Name"}, `--member "Bad_Name" is not a valid object name`},
		{[]string{"--pd", "127.0.0.1:2379", "--kubeconfig", "/k"}, "need --member"},
	}
	for _, tc := range tests {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestPDHTTPAddrs(t *testing.T) {
	got := session.PDHTTPAddrs([]string{"pd:2379", "https://pd2:2379"})
	if got[0] != "http://pd:2379" || got[1] != "https://pd2:2379" {
		t.Fatalf("httpAddrs = %v", got)
	}
}

// TestPauseCommandReadyThenStop runs the command against a PD/TiKV double cluster: the status
// file reaches Ready, and stopping (what SIGTERM does) lifts everything and exits 0 with the
// file saying Stopped.
func TestPauseCommandReadyThenStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PD and TiKV double cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: [][]byte{[]byte("m")}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	statusFile := filepath.Join(t.TempDir(), "status.json")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	statusAddr := lis.Addr().String()
	_ = lis.Close()

	runCtx, stop := context.WithCancel(ctx)
	cmd := NewCmd()
	var stderr bytes.Buffer
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--pd", cl.PDAddr(), "--ttl", "5m", "--status-file", statusFile, "--status-addr", statusAddr})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(runCtx) }()

	phase := func() string {
		data, err := os.ReadFile(statusFile)
		if err != nil {
			return ""
		}
		var s struct{ Phase string }
		_ = json.Unmarshal(data, &s)
		return s.Phase
	}
	for phase() != "Ready" {
		select {
		case err := <-done:
			t.Fatalf("pause exited before Ready: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("never Ready; last phase %q\n%s", phase(), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for path, want := range map[string]string{"/status": `"phase":"Ready"`, "/metrics": `fedbr_br_pause_phase{phase="Ready"} 1`} {
		resp, err := http.Get("http://" + statusAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s lacks %q:\n%s", path, want, body)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("pause after stop: %v\n%s", err, stderr.String())
	}
	if p := phase(); p != "Stopped" {
		t.Fatalf("final phase %q, want Stopped", p)
	}
	for _, want := range []string{"GC is paused", "Schedulers are paused", "All ready", "Pause lifted"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}
