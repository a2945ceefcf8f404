package lift

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLiftFlags(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "status.json")
	if err := os.WriteFile(empty, []byte(`{"phase":"Starting","since":"2026-11-29T16:09:16Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, "--pd"},
		{[]string{"--pd", "127.0.0.1:2379"}, "give the pause's identity: --pause-status, or --member"},
		{[]string{"--pd", "127.0.0.1:2379", "--pause-status", empty, "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"--pd", "127.0.0.1:2379", "--member", "Bad_Name"}, `--member "Bad_Name" is not a valid object name`},
		{[]string{"--pd", "127.0.0.1:2379", "--pause-status", filepath.Join(t.TempDir(), "nope")}, "--pause-status"},
		{[]string{"--pd", "127.0.0.1:2379", "--pause-status", empty}, "records no identity"},
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
