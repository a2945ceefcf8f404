package down

import (
	"bytes"
	"strings"
	"testing"
)

func TestDownFlags(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		args    []string
		wantErr string
		wantOut string
	}{
		{args: []string{}, wantErr: `required flag(s) "dir" not set`},
		{args: []string{"--dir", empty, "--grace", "-1s"}, wantErr: "--grace cannot be negative"},
		{args: []string{"--dir", empty}, wantOut: "lab in " + empty + " is down"},
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
				t.Errorf("down %q: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !strings.Contains(out.String(), tt.wantOut) {
			t.Errorf("down %q = %q, %v; want %q", tt.args, out.String(), err, tt.wantOut)
		}
	}
}
