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

// fakeFiles makes a folder holding the named executables.
func fakeFiles(t *testing.T, names ...string) string {
	dir := t.TempDir()
	for _, b := range names {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestUpFlags(t *testing.T) {
	bin := fakeFiles(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	crds := fakeFiles(t, "x.yaml")
	fedbr := filepath.Join(fakeFiles(t, "fedbr"), "fedbr")
	base := []string{"--dir", "x", "--bin-dir", bin, "--crd-dir", crds, "--fedbr", fedbr}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut []string
	}{
		{"dir required", []string{"--bin-dir", bin}, `required flag(s) "dir" not set`, nil},
		{"bad cluster name", with("--clusters", "Control,dp1"), "must be a DNS label", nil},
		{"duplicate cluster", with("--clusters", "a,b,a"), "appears twice", nil},
		{"control only", with("--clusters", "control"), "want a data-plane cluster", nil},
		{"unknown control", with("--control", "hub"), `--control "hub" is not one of --clusters`, nil},
		{"zero timeout", with("--ready-timeout", "0s"), "--ready-timeout must be positive", nil},
		{"zero nodes", with("--nodes", "0"), "--nodes 0: want at least 1", nil},
		{"bad zones", with("--zones", "dp1"), "want CLUSTER=ZONE", nil},
		{"zone of another region", with("--zones", "dp1=eu-west-1a"), "want a zone of region us-west-2", nil},
		{"bad ip base", with("--ip-base", "0"), "--ip-base 0", nil},
		{"zero store step", with("--store-id-step", "0"), "--store-id-step must be positive", nil},
		{"bad image", with("--image", "probe"), "probe", nil},
		{"missing fedbr", with("--fedbr", filepath.Join(t.TempDir(), "none")), "not a file", nil},
		{"no CRDs", with("--crd-dir", t.TempDir()), "no CRD manifests", nil},
		{"missing binaries", with("--bin-dir", t.TempDir()), "etcd not found", nil},
		{"dry run", with("--dry-run", "--nodes", "2", "--zones", "dp3=us-west-2a"), "", []string{
			"would start clusters [control dp1 dp2 dp3]",
			"dp1: zone us-west-2a, nodes [dp1-node-0 dp1-node-1], operator on 127.0.11.x with store ids from 1001",
			"dp3: zone us-west-2a, nodes [dp3-node-0 dp3-node-1], operator on 127.0.13.x with store ids from 3001",
			"dp1: API server authenticates EKS tokens",
		}},
		{"EKS authenticator on the control cluster", with("--eks-auth", "control"), `--eks-auth "control": want a data-plane cluster`, nil},
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
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output %q lacks %q", out, w)
				}
			}
		})
	}
}
