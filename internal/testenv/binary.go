package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The binaries the tests run as processes, by the name of their cmd/ folder, and the variable
// that hands a test process one built already: `make test` builds both once per run (into
// .cache/test-bin) and names them there, so that no test links them again.
var binaryEnv = map[string]string{
	"fedbr":     "FEDBR_BIN",
	"fedbr-lab": "FEDBR_LAB_BIN",
}

var builtBinaries sync.Map // name -> *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of cmd/<name> (fedbr or fedbr-lab) built from this checkout: the file
// its variable names ($FEDBR_BIN, $FEDBR_LAB_BIN) when set, or else the one this process builds
// into .cache/test-bin/<name> on first use. That folder is shared by every test process of the
// checkout; a lock on it keeps two processes (`go test -p 2`) from writing the binary at once,
// and go build leaves a binary that is up to date as it is, so a later process waits for the
// build, not for a build of its own.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := BinaryPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BinaryPath is Binary for TestMain and other code without a testing.TB.
func BinaryPath(name string) (string, error) {
	v, ok := binaryEnv[name]
	if !ok {
		return "", fmt.Errorf("testenv: no binary %q (want one of fedbr, fedbr-lab)", name)
	}
	if p := os.Getenv(v); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", v, err)
		}
		return p, nil
	}
	b, _ := builtBinaries.LoadOrStore(name, &builtBinary{})
	bb := b.(*builtBinary)
	bb.once.Do(func() { bb.path, bb.err = buildLocked(name) })
	return bb.path, bb.err
}

// buildLocked builds cmd/<name> into .cache/test-bin under an exclusive lock on that folder.
func buildLocked(name string) (string, error) {
	root := RepoRoot()
	dir := filepath.Join(root, ".cache", "test-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", dir, err)
	}
	out := filepath.Join(dir, name)
	// The flags of hack/test.sh's build, so that the two share the compiled packages.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %w: %s", name, err, b)
	}
	return out, nil
}
