package version

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestVersionPrintsVersionCommitAndGo(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCmd()
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	for _, want := range []string{"fedbr ", "commit ", runtime.Version()} {
		if !strings.Contains(line, want) {
			t.Errorf("version output %q lacks %q", line, want)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"-o", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, out.String())
	}
	if got["goVersion"] != runtime.Version() || got["version"] == "" || got["commit"] == "" {
		t.Errorf("incomplete version JSON: %v", got)
	}
}

func TestVersionRejectsUnknownOutput(t *testing.T) {
	cmd := NewCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"-o", "yaml"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Fatalf("want an --output error, got %v", err)
	}
}
