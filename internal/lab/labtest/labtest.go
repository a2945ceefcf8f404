// Package labtest brings a lab up for a test that runs the whole of fedbr in it (test/e2e,
// test/crash, test/daytwo): fedbr-lab built once per run, the lab up, and taken down when the
// test ends, checking no process is left. FEDBR_E2E_LAB_DIR=<dir> keeps the lab's directory
// after the run (lab down still stops every process), so the step, agent and manager logs of a
// failed or slow run can be read afterwards.
package labtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pingcaplog "github.com/pingcap/log"
	"go.uber.org/zap/zapcore"

	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/testenv"
)

// Up takes fedbr-lab (testenv.Binary: built once per run), brings the lab up and takes it down when the test ends; when the test
// failed, the tails of the demo's controller logs go to the test log first.
func Up(ctx context.Context, t testing.TB) *env.Lab {
	t.Helper()
	pingcaplog.SetLevel(zapcore.WarnLevel) // the PD client's connection chatter
	bin := testenv.Binary(t, "fedbr-lab")
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

// Long says whether this run takes every part of the long suites (FEDBR_LONG=1, which
// `make test-long` sets) rather than the slice Slice picks.
func Long() bool { return os.Getenv("FEDBR_LONG") == "1" }

// Seed is the number that picks this run's slice of the long suites: $FEDBR_SEED, or the day of
// the year (UTC) when unset, so that CI's runs on consecutive days take consecutive slices.
func Seed() (uint64, error) {
	s := os.Getenv("FEDBR_SEED")
	if s == "" {
		return uint64(time.Now().UTC().YearDay()), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("FEDBR_SEED %q: %w", s, err)
	}
	return n, nil
}

// Slice returns the parts of the long suite named suite that this run takes: every one with
// FEDBR_LONG=1, otherwise n of them, picked by the seed (Seed): window (seed × n) mod len(names),
// n long and wrapping round, so that any ceil(len(names)/n) consecutive seeds take every part.
// It prints its choice on a line starting "fedbr-slice:" (which `make test` shows).
func Slice(t testing.TB, suite string, names []string, n int) []string {
	t.Helper()
	if Long() {
		fmt.Printf("fedbr-slice: %s: all %d parts (FEDBR_LONG=1)\n", suite, len(names))
		return names
	}
	seed, err := Seed()
	if err != nil {
		t.Fatal(err)
	}
	picked := SliceOf(seed, names, n)
	fmt.Printf("fedbr-slice: %s: seed %d takes %d of %d parts: %s (FEDBR_SEED=<n> picks another, FEDBR_LONG=1 runs all)\n",
		suite, seed, len(picked), len(names), strings.Join(picked, ", "))
	return picked
}

// SliceOf is Slice's choice: n names from position (seed × n) mod len(names), wrapping round.
func SliceOf(seed uint64, names []string, n int) []string {
	if n >= len(names) {
		return names
	}
	if n < 1 {
		n = 1
	}
	start := int((seed * uint64(n)) % uint64(len(names)))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, names[(start+i)%len(names)])
	}
	return out
}
