package lab

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/testenv"
)

// scenarioFiles hold the crash and day-2 suites' scenarios (internal/lab/demo), which only the
// test packages call.
var scenarioFiles = []string{"crash.go", "daytwo.go", "tenant.go"}

// TestLabBinaryShipsNoScenarios: fedbr-lab, which users run for the lab and `make demo`, carries
// none of the crash and day-2 scenarios' code: only test/crash and test/daytwo reach it, so the
// linker leaves every function of those files out. A command of fedbr-lab that called one would
// fail this test.
func TestLabBinaryShipsNoScenarios(t *testing.T) {
	bin := testenv.Binary(t, "fedbr-lab")
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm %s: %v", bin, err)
	}
	symbols := string(out)
	if !strings.Contains(symbols, "internal/lab/demo.Run") {
		t.Fatalf("go tool nm lists no internal/lab/demo.Run: the check below would see nothing")
	}
	fset := token.NewFileSet()
	var names []string
	for _, f := range scenarioFiles {
		file, err := parser.ParseFile(fset, filepath.Join(testenv.RepoRoot(), "internal", "lab", "demo", f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := "internal/lab/demo." + fn.Name.Name
			if fn.Recv != nil {
				switch recv := fn.Recv.List[0].Type.(type) {
				case *ast.StarExpr:
					name = "internal/lab/demo.(*" + recv.X.(*ast.Ident).Name + ")." + fn.Name.Name
				case *ast.Ident:
					name = "internal/lab/demo." + recv.Name + "." + fn.Name.Name
				}
			}
			names = append(names, name)
		}
	}
	if len(names) < 20 {
		t.Fatalf("found %d functions in %v: too few to judge", len(names), scenarioFiles)
	}
	for _, n := range names {
		for _, line := range strings.Split(symbols, "\n") {
			if strings.HasSuffix(line, " "+"github.com/fedbr/fedbr/"+n) {
				t.Errorf("fedbr-lab carries scenario code: %s (shared code belongs in another file of the package)", strings.TrimSpace(line))
				break
			}
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("none of the %d functions of %v is in %s", len(names), scenarioFiles, bin)
}
