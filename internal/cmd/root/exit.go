package root

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/agent/job"
)

// Environment the agent sets on every step container (internal/agent/job), so that a mesh
// sidecar in the step's pod can end with it.
const (
	// EnvExitMarker is the file written when the command ends, whatever its outcome (the path
	// is taken relative to the working directory when not absolute).
	EnvExitMarker = job.EnvExitMarker
	// EnvExitDelay is how long to wait after writing the marker before exiting (a Go
	// duration), so a sidecar that watches the marker can finish first (flush logs, leave
	// the mesh).
	EnvExitDelay = job.EnvExitDelay
)

// Exit is what happens around a command's end: where the marker goes, how long to wait.
type Exit struct {
	Getenv func(string) string
	Sleep  func(time.Duration)
	Stderr io.Writer
}

// Execute runs cmd and returns the process's exit code: 0 on success, 1 on error. When
// EnvExitMarker is set it then writes the marker file (the exit code and the time, one line)
// and waits EnvExitDelay; neither changes the exit code (a marker that cannot be written or a
// bad delay is said on stderr).
func (e Exit) Execute(cmd *cobra.Command) int {
	code := 0
	if err := cmd.Execute(); err != nil {
		code = 1
	}
	e.finish(code)
	return code
}

func (e Exit) finish(code int) {
	marker := e.Getenv(EnvExitMarker)
	if marker == "" {
		return
	}
	if err := writeMarker(marker, code); err != nil {
		_, _ = fmt.Fprintf(e.Stderr, "fedbr: exit marker: %v\n", err)
	}
	raw := e.Getenv(EnvExitDelay)
	if raw == "" {
		return
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		_, _ = fmt.Fprintf(e.Stderr, "fedbr: %s=%q: want a non-negative duration; not waiting\n", EnvExitDelay, raw)
		return
	}
	if d > 0 {
		e.Sleep(d)
	}
}

func writeMarker(path string, code int) error {
	// The marker is for other containers of the pod (a mesh sidecar), which may run as
	// another user: world-readable, like the emptyDir it lives in.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // G301: read by the pod's other containers
		return err
	}
	line := fmt.Sprintf("exit-code=%d time=%s\n", code, time.Now().UTC().Format(time.RFC3339Nano))
	return os.WriteFile(path, []byte(line), 0o644) //nolint:gosec // G306: read by the pod's other containers
}
