package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// TestMain lets the test binary play a test process that starts a child from a binary folder
// (as envtest does), arms the watcher and dies without any cleanup (as a panic in TestMain
// would). It prints the child's pid.
func TestMain(m *testing.M) {
	if os.Getenv("FEDBR_REAPER_HELPER") != "" {
		child := exec.Command("sleep", "300")
		if err := child.Start(); err != nil {
			os.Exit(3)
		}
		unwatch, err := killAfterExit(filepath.Dir(child.Path), nil)
		if err != nil {
			os.Exit(4)
		}
		if os.Getenv("FEDBR_REAPER_HELPER") == "cancel" {
			unwatch() // a normal cleanup ran: the watcher must not kill anything
		}
		_, _ = os.Stdout.WriteString(strconv.Itoa(child.Process.Pid) + "\n")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// helperChild runs the helper in mode and returns the pid of the child it left behind.
func helperChild(t *testing.T, mode string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FEDBR_REAPER_HELPER="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Wait()
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("helper printed %q: %v %v", line, err, perr)
	}
	return pid
}

// running reports whether pid still runs sleep (and is not a zombie).
func running(t *testing.T, pid int) bool {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err == nil {
		path, err = filepath.EvalSymlinks(path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return controlplane.Process{PID: pid, Binary: path}.Running()
}

func TestChildrenAreKilledWhenTheTestProcessDiesWithoutCleanup(t *testing.T) {
	pid := helperChild(t, "die")
	deadline := time.Now().Add(10 * time.Second)
	for running(t, pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still runs 10s after its test process died", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The negative control: once the normal cleanup has cancelled the watcher, it kills nothing.
func TestCancelledWatcherKillsNothing(t *testing.T) {
	pid := helperChild(t, "cancel")
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	time.Sleep(2500 * time.Millisecond) // the watcher polls once a second
	if !running(t, pid) {
		t.Fatalf("child %d was killed although the watcher was cancelled", pid)
	}
}
