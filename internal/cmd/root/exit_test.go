package root

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestExitWritesTheMarkerAndWaits: with the variables the agent sets, a command that succeeds
// and one that fails both leave the marker (with their exit code) and wait the delay; the exit
// code is the command's. Without the marker variable nothing is written and nothing waited.
func TestExitWritesTheMarkerAndWaits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fail  bool
		delay string
		code  int
		slept time.Duration
		warn  string
	}{
		{name: "success", delay: "3s", slept: 3 * time.Second},
		{name: "failure", fail: true, delay: "3s", code: 1, slept: 3 * time.Second},
		{name: "no delay", delay: "0s"},
		{name: "a bad delay is said, the code kept", fail: true, delay: "soon", code: 1, warn: "FEDBR_EXIT_DELAY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "exit", "main-terminated")
			env := map[string]string{EnvExitMarker: marker, EnvExitDelay: tt.delay}
			var slept time.Duration
			var stderr bytes.Buffer
			e := Exit{Getenv: func(k string) string { return env[k] }, Sleep: func(d time.Duration) { slept += d }, Stderr: &stderr}
			code := e.Execute(testCmd(tt.fail))
			if code != tt.code || slept != tt.slept {
				t.Errorf("code %d, slept %s; want %d, %s", code, slept, tt.code, tt.slept)
			}
			b, err := os.ReadFile(marker)
			if err != nil || !strings.HasPrefix(string(b), "exit-code="+string(rune('0'+tt.code))+" ") {
				t.Errorf("marker %q, %v", b, err)
			}
			if !strings.Contains(stderr.String(), tt.warn) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.warn)
			}
		})
	}
	t.Run("no marker variable", func(t *testing.T) {
		slept := false
		e := Exit{Getenv: func(string) string { return "" }, Sleep: func(time.Duration) { slept = true }, Stderr: &bytes.Buffer{}}
		if code := e.Execute(testCmd(true)); code != 1 || slept {
			t.Errorf("code %d, slept %v", code, slept)
		}
	})
	t.Run("marker not writable: said, the code kept", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		e := Exit{Getenv: func(k string) string { return map[string]string{EnvExitMarker: filepath.Join(file, "marker")}[k] },
			Sleep: func(time.Duration) {}, Stderr: &stderr}
		if code := e.Execute(testCmd(false)); code != 0 || !strings.Contains(stderr.String(), "exit marker") {
			t.Errorf("code %d, stderr %q", code, stderr.String())
		}
	})
}

func testCmd(fail bool) *cobra.Command {
	cmd := &cobra.Command{Use: "step", SilenceErrors: true, SilenceUsage: true, RunE: func(*cobra.Command, []string) error {
		if fail {
			return errors.New("boom")
		}
		return nil
	}}
	cmd.SetArgs([]string{})
	return cmd
}
