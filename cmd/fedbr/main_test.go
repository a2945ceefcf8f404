package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/testenv"
)

// TestLabIsNotLinked fails when a package of the lab (or of the tests' harness) is linked into
// the binary users install: the doubles belong in fedbr-lab only.
func TestLabIsNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps named only %d packages: %q", len(deps), out)
	}
	for _, forbidden := range []string{"internal/lab", "internal/cmd/lab", "internal/testenv"} {
		prefix := "github.com/fedbr/fedbr/" + forbidden
		for _, d := range deps {
			if d == prefix || strings.HasPrefix(d, prefix+"/") {
				t.Errorf("cmd/fedbr links %s", d)
			}
		}
	}
}

// built is cmd/fedbr built once per run (testenv.Binary); skipped in -short mode.
func built(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	return testenv.Binary(t, "fedbr")
}

// TestKubectlPlugin: linked as kubectl-fedbr, the binary's help names its commands as kubectl
// runs them (`kubectl fedbr describe …`); as fedbr, as `fedbr describe …`.
func TestKubectlPlugin(t *testing.T) {
	bin := built(t)
	plugin := filepath.Join(t.TempDir(), "kubectl-fedbr")
	if err := os.Symlink(bin, plugin); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{plugin, "kubectl fedbr describe backup|restore|schedule NAME"},
		{bin, "fedbr describe backup|restore|schedule NAME"},
	} {
		out, err := exec.Command(c.path, "describe", "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s describe --help: %v\n%s", filepath.Base(c.path), err, out)
		}
		if !strings.Contains(string(out), "Usage:\n  "+c.want) {
			t.Errorf("%s describe --help does not show the usage %q:\n%s", filepath.Base(c.path), c.want, out)
		}
	}
}

// TestStepExitMarker runs the built binary as a step pod does: with FEDBR_EXIT_MARKER set, the
// marker is written with the command's exit code, on success and on failure, and the process
// exits with that code.
func TestStepExitMarker(t *testing.T) {
	bin := built(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
	}{{[]string{"version"}, 0}, {[]string{"backup", "manifests"}, 1}} {
		marker := filepath.Join(dir, strings.Join(c.args, "-"), "main-terminated")
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), "FEDBR_EXIT_MARKER="+marker, "FEDBR_EXIT_DELAY=0s")
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		b, rerr := os.ReadFile(marker)
		if code != c.code || rerr != nil || !strings.HasPrefix(string(b), fmt.Sprintf("exit-code=%d ", c.code)) {
			t.Errorf("fedbr %v: exit %d (want %d), marker %q, %v", c.args, code, c.code, b, rerr)
		}
	}
}
