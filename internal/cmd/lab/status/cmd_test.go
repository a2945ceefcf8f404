package status

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/env"
)

func TestStatus(t *testing.T) {
	dir := t.TempDir()
	l := env.Lab{Dir: dir, AWS: env.AWS{Process: controlplane.Process{Component: "aws", PID: 999999999, Binary: "/nonexistent", Port: 4566, Log: "/l/aws.log"}},
		DataPlanes: []env.DataPlane{{Cluster: "dp1", Nodes: []env.Node{{Name: "dp1-node-0",
			Process: controlplane.Process{Component: "node", PID: 999999998, Binary: "/nonexistent", Log: "/l/node.log"}}}}}}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, env.File), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
		wantOut []string
	}{
		{args: []string{"--dir", dir}, wantOut: []string{
			"CLUSTER  COMPONENT  NAME        PID        PORT  STATE    LOG",
			"-        aws        aws         999999999  4566  stopped  /l/aws.log",
			"dp1      node       dp1-node-0  999999998  -     stopped  /l/node.log"}},
		{args: []string{"--dir", dir, "-o", "json"}, wantOut: []string{`"name": "dp1-node-0"`, `"running": false`}},
		{args: []string{"--dir", dir, "-o", "yaml"}, wantErr: `--output must be empty or json, not "yaml"`},
		{args: []string{"--dir", t.TempDir()}, wantErr: "no lab in"},
		{args: []string{}, wantErr: `required flag(s) "dir" not set`},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		cmd := NewCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tt.args)
		err := cmd.Execute()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("status %q: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.wantOut {
			if !strings.Contains(out.String(), w) {
				t.Errorf("status %q output lacks %q:\n%s", tt.args, w, out.String())
			}
		}
	}
}
