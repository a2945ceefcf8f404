package main

import (
	"os/exec"
	"strings"
	"testing"
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
