package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// AfterExit runs argv once this process has exited, however it exits. A panic in TestMain, a
// -timeout or a SIGKILL skips every cleanup, and the API servers, etcds or labs a test started
// would keep running (and burning CPU) until someone finds them. The watcher is a shell in its
// own session that polls this process once a second. The returned cancel stops the watcher
// without running argv; call it once the normal cleanup has run.
func AfterExit(argv ...string) (cancel func(), err error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("AfterExit: no command")
	}
	script := `while kill -0 "$0" 2>/dev/null; do sleep 1; done; exec "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, strconv.Itoa(os.Getpid())}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives a Ctrl-C to this process group
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the exit watcher: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Kill()
		<-done
	}, nil
}

// LabDownAfterExit runs `fedbr-lab lab down --dir dir` should the test process die before its
// cleanups (a -timeout skips them all), so a lab never outlives its test. Register it before
// the cleanup that takes the lab down: cleanups run last-registered first, so that one runs
// first and this one then disarms the watcher.
func LabDownAfterExit(t testing.TB, fedbr, dir string) {
	t.Helper()
	cancel, err := AfterExit(fedbr, "lab", "down", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
}

// killAfterExit kills, once this process has exited, its children from dir (the cached
// kube-apiserver and etcd) that are not in before. The watcher checks each pid still runs a
// binary from dir before it kills it, so a reused pid is never signalled.
func killAfterExit(dir string, before []string) (cancel func(), err error) {
	all, err := childrenFrom(dir)
	if err != nil {
		return func() {}, err
	}
	var pids []string
	for _, p := range all {
		if !slices.Contains(before, p) {
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		return func() {}, nil
	}
	kill := `for p; do case "$(readlink /proc/$p/exe)" in "$0"/*) kill -9 "$p";; esac; done`
	return AfterExit(append([]string{"sh", "-c", kill, dir}, pids...)...)
}

// childrenFrom lists the pids of this process's children whose executable is in dir.
func childrenFrom(dir string) ([]string, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var pids []string
	for _, e := range entries {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// After the parenthesised command name: state, then the parent's pid.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) < 2 || f[1] != self {
			continue
		}
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
