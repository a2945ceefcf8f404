package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/env"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := NewCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLogs(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "dp1", "nodes", "dp1-node-0")
	write(t, filepath.Join(node, "logs", "default_job_u", "main", "0.log"), "first run\n")
	write(t, filepath.Join(node, "logs", "default_job_u", "main", "1.log"), "second run\n")
	write(t, filepath.Join(dir, "logs", "aws.log"), "AWS double serving\n")
	l := env.Lab{Dir: dir, Contexts: []string{"control", "dp1"},
		AWS:        env.AWS{Process: controlplane.Process{Log: filepath.Join(dir, "logs", "aws.log")}},
		DataPlanes: []env.DataPlane{{Cluster: "dp1", Nodes: []env.Node{{Name: "dp1-node-0", Dir: node}}}}}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, env.File), string(data))

	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: []string{"--dir", dir, "dp1/default/job"}, want: "second run\n"},
		{args: []string{"--dir", dir, "dp1/default/job/main", "--previous"}, want: "first run\n"},
		{args: []string{"--dir", dir, "aws"}, want: "AWS double serving\n"},
		{args: []string{"--dir", dir, "dp1/default/none"}, wantErr: "no log of pod default/none"},
		{args: []string{"--dir", t.TempDir(), "aws"}, wantErr: "no lab in"},
		{args: []string{"--dir", dir}, wantErr: "accepts between 1 and 2 arg(s)"},
	}
	for _, tt := range tests {
		out, err := run(tt.args...)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("logs %q: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || out != tt.want {
			t.Errorf("logs %q = %q, %v; want %q", tt.args, out, err, tt.want)
		}
	}
}

// TestPrintFollow reads what is appended after the first read, until the context ends.
func TestPrintFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	write(t, path, "one\n")
	ctx, cancel := context.WithCancel(context.Background())
	pr := &appendOnRead{path: path, cancel: cancel}
	if err := Print(ctx, pr, path, true); err != nil {
		t.Fatal(err)
	}
	if got := pr.buf.String(); got != "one\ntwo\n" {
		t.Errorf("followed %q, want both lines", got)
	}
}

// appendOnRead appends a line to the log after the first write it receives, and ends the
// follow after the second.
type appendOnRead struct {
	path   string
	cancel context.CancelFunc
	buf    bytes.Buffer
	writes int
}

func (a *appendOnRead) Write(b []byte) (int, error) {
	a.writes++
	switch a.writes {
	case 1:
		f, err := os.OpenFile(a.path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		_, _ = f.WriteString("two\n")
		_ = f.Close()
	case 2:
		a.cancel()
	}
	return a.buf.Write(b)
}
