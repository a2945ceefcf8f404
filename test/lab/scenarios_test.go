package lab

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/testenv"
)

// scenarioPackages hold the crash and day-2 suites' scenarios: test code, which no command
// imports.
var scenarioPackages = []string{"github.com/fedbr/fedbr/test/crash", "github.com/fedbr/fedbr/test/daytwo"}

// deps lists the packages pkg is built from (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestLabBinaryShipsNoScenarios: fedbr-lab, which users run for the lab and `make demo`, and
// fedbr carry none of the crash and day-2 scenarios' code: those live in test/crash and
// test/daytwo, beside their tests, and neither command is built from them. The harness they
// drive (internal/lab/demo's Harness) is the demo's own.
func TestLabBinaryShipsNoScenarios(t *testing.T) {
	for _, p := range scenarioPackages {
		if !slices.Contains(deps(t, p), p) {
			t.Fatalf("go list -deps %s does not list the package itself: the check below would see nothing", p)
		}
	}
	for _, cmd := range []string{"./cmd/fedbr-lab", "./cmd/fedbr"} {
		for _, d := range deps(t, cmd) {
			if slices.Contains(scenarioPackages, d) || strings.HasPrefix(d, "github.com/fedbr/fedbr/test/") {
				t.Errorf("%s is built from %s: the lab's test scenarios ship in it", cmd, d)
			}
		}
	}
}
