// Package labtest brings a lab up for a test that runs the whole of fedbr in it (test/e2e,
// test/crash, test/daytwo): fedbr-lab built once per test, the lab up, and taken down when the
// test ends, checking no process is left. FEDBR_E2E_LAB_DIR=<dir> keeps the lab's directory
// after the run (lab down still stops every process), so the step, agent and manager logs of a
// failed or slow run can be read afterwards.
package labtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pingcaplog "github.com/pingcap/log"
	"go.uber.org/zap/zapcore"

	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/testenv"
)

// Binary builds fedbr-lab, the binary every lab process runs, into a temporary directory.
func Binary(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fedbr-lab")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/fedbr-lab")
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, b)
	}
	return out
}

// Up builds fedbr-lab, brings the lab up and takes it down when the test ends; when the test
// failed, the tails of the demo's controller logs go to the test log first.
func Up(ctx context.Context, t testing.TB) *env.Lab {
	t.Helper()
	pingcaplog.SetLevel(zapcore.WarnLevel) // the PD client's connection chatter
	bin := Binary(t)
	dir := filepath.Join(t.TempDir(), "lab")
	if keep := os.Getenv("FEDBR_E2E_LAB_DIR"); keep != "" {
		if err := os.RemoveAll(keep); err != nil {
			t.Fatal(err)
		}
		dir = keep
	}
	testenv.LabDownAfterExit(t, bin, dir)
	l, err := env.Up(ctx, env.Options{Dir: dir, Fedbr: bin, Log: func(f string, a ...any) { t.Logf(f, a...) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		if err := env.Down(context.Background(), dir, 10*time.Second); err != nil {
			t.Errorf("lab down: %v", err)
		}
		if left := env.Leftovers(dir); len(left) > 0 {
			t.Errorf("processes left after lab down: %v", left)
		}
	})
	return l
}

// Log is an io.Writer that sends each write to the test log, a line at a time (the demo's
// progress).
type Log struct{ T testing.TB }

func (w Log) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dumpLogs prints the tail of the controllers' logs to explain a failure.
func dumpLogs(t testing.TB, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "demo", "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("---- %s (tail) ----\n%s", filepath.Base(f), b)
	}
}

// Selected says whether name contains one of sel's comma-separated parts (FEDBR_CRASH_POINTS,
// FEDBR_DAYTWO).
func Selected(name, sel string) bool {
	for _, part := range strings.Split(sel, ",") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}
