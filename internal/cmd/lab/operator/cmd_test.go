package operator

import (
	"bytes"
	"strings"
	"testing"
)

func TestDryRun(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--ip-prefix", "127.0.2", "--store-id-base", "200", "--dry-run"}, "PD 127.0.2.10:2379, TiKV 0 at 127.0.2.100:20160 (store 201)"},
		{[]string{"--base-port", "32000", "--dry-run"}, "PD 127.0.0.1:32000, TiKV 0 at 127.0.0.1:32100 (store 1)"},
	} {
		cmd := NewCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: output %q, want %q", tt.args, out.String(), tt.want)
		}
	}
}

func TestRejectsMissingAddressing(t *testing.T) {
	for _, args := range [][]string{{"--dry-run"}, {"--ip-prefix", "10.0.0", "--dry-run"}} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}
