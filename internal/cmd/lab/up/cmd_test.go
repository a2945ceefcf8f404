package up

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func fakeBinDir(t *testing.T) string {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestUpFlags(t *testing.T) {
	bin := fakeBinDir(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"dir required", []string{"--bin-dir", bin}, `required flag(s) "dir" not set`, ""},
		{"bad cluster name", []string{"--dir", "x", "--bin-dir", bin, "--clusters", "Control"}, "must be a DNS label", ""},
		{"duplicate cluster", []string{"--dir", "x", "--bin-dir", bin, "--clusters", "a,a"}, "appears twice", ""},
		{"zero timeout", []string{"--dir", "x", "--bin-dir", bin, "--ready-timeout", "0s"}, "--ready-timeout must be positive", ""},
		{"missing binaries", []string{"--dir", "x", "--bin-dir", t.TempDir()}, "etcd not found", ""},
		{"dry run", []string{"--dir", "x", "--bin-dir", bin, "--dry-run"}, "", "would start clusters [control dp1 dp2 dp3]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Fatalf("output %q lacks %q", out, tc.wantOut)
			}
		})
	}
}
