package br

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/labtls"
)

// TestTLSFlagsOnEveryDialingStep: every step that dials PD or TiKV takes --ca, --cert and --key,
// and refuses a partial set, an unreadable file, a CA file without a certificate and a key that
// is not the certificate's before it dials anything (PD's address here answers nothing).
func TestTLSFlagsOnEveryDialingStep(t *testing.T) {
	set, err := labtls.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := labtls.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key := set.Paths()
	_, otherCert, _ := other.Paths()
	storage := t.TempDir()
	steps := map[string][]string{
		"pause":           {"pause", "--pd", "127.0.0.1:1"},
		"lift":            {"lift", "--pd", "127.0.0.1:1", "--pause-status", filepath.Join(storage, "status.json")},
		"snapshot":        {"snapshot", "--pd", "127.0.0.1:1", "--storage", storage, "--backup-id", "b1"},
		"restore-volumes": {"restore-volumes", "--pd", "127.0.0.1:1", "--storage", storage, "--restore-id", "r1"},
		"restore-data":    {"restore-data", "--pd", "127.0.0.1:1", "--resolved-ts", "1"},
	}
	tests := []struct {
		tls     []string
		wantErr string
	}{
		{[]string{"--ca", ca}, "--ca, --cert and --key go together"},
		{[]string{"--cert", cert, "--key", key}, "--ca, --cert and --key go together"},
		{[]string{"--ca", filepath.Join(storage, "missing.crt"), "--cert", cert, "--key", key}, "--ca: open "},
		{[]string{"--ca", key, "--cert", cert, "--key", key}, "no PEM certificate in it"},
		{[]string{"--ca", ca, "--cert", otherCert, "--key", key}, "private key does not match public key"},
	}
	for name, args := range steps {
		for _, tc := range tests {
			cmd := NewCmd()
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(append(append([]string{}, args...), tc.tls...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s %v: error = %v, want %q", name, tc.tls, err, tc.wantErr)
			}
		}
	}
}
