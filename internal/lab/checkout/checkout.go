// Package checkout finds the fedbr checkout that tests, the lab and `make demo` run from: the
// charts, CRDs, samples and cached Kubernetes binaries live there.
package checkout

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// ModulePath is fedbr's Go module, named on the first line of its checkout's go.mod.
const ModulePath = "github.com/fedbr/fedbr"

// Root is the checkout this package was built from, found from this source file, when the
// build recorded it; a build with -trimpath records none (make build's binaries, and every test
// and binary make test builds without the race detector: they share the image's compile
// flags), and then Root is the fedbr checkout that holds the working directory (go test runs
// each package in its folder). Without either it returns the working directory.
func Root() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return holding(wd)
}

// holding is the fedbr checkout that holds dir (dir itself or a parent), or dir when none does.
func holding(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(data), "module "+ModulePath+"\n") {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
