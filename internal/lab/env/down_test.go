package env

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// TestDown stops the recorded processes (one ignores SIGTERM and needs SIGKILL) and then finds,
// kills and reports a pod process that escaped its node; a shell merely sitting in the lab
// directory is left alone.
func TestDown(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh binary")
	}
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Skip("no tail binary")
	}
	dir := t.TempDir()
	node, err := controlplane.Spawn(controlplane.Command{Binary: sleep, Args: []string{"300"}, Dir: dir,
		Log: filepath.Join(dir, "logs", "node.log"), Component: ComponentNode})
	if err != nil {
		t.Fatal(err)
	}
	stubborn, err := controlplane.Spawn(controlplane.Command{Binary: sh, Args: []string{"-c", `trap "" TERM; echo ready; while :; do sleep 1; done`},
		Dir: dir, Log: filepath.Join(dir, "logs", "operator.log"), Component: ComponentOperator})
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{Dir: dir, DataPlanes: []DataPlane{{Cluster: "dp1", Operator: stubborn, Nodes: []Node{{Name: "dp1-node-0", Process: node}}}}}
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	// A pod process that left its node's process group, and a bystander (a binary the lab did
	// not start) working in dir.
	escaped := start(t, dir, []string{"FEDBR_LAB_ROOT=" + filepath.Join(dir, "dp1", "nodes", "x", "root")}, sleep, "300")
	bystander := start(t, dir, nil, tail, "-f", "/dev/null")
	t.Cleanup(func() { _ = bystander.Process.Kill(); _, _ = bystander.Process.Wait() })

	waitFor(t, "the stubborn process to trap SIGTERM", func() bool {
		b, _ := os.ReadFile(stubborn.Log)
		return strings.Contains(string(b), "ready")
	})
	if got := Leftovers(dir); !slices.Contains(got, escaped.Process.Pid) || slices.Contains(got, bystander.Process.Pid) {
		t.Errorf("Leftovers = %v, want %d (escaped pod process) and not %d (bystander)", got, escaped.Process.Pid, bystander.Process.Pid)
	}
	err = Down(context.Background(), dir, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(escaped.Process.Pid)) {
		t.Errorf("Down = %v, want an error naming the escaped process %d", err, escaped.Process.Pid)
	}
	_, _ = escaped.Process.Wait()
	for _, p := range []controlplane.Process{node, stubborn} {
		if p.Running() {
			t.Errorf("%s pid %d survived Down", p.Component, p.PID)
		}
	}
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("Down killed the bystander: %v", err)
	}
	if left := Leftovers(dir); len(left) > 0 {
		t.Errorf("after Down: %v", left)
	}
}

func start(t *testing.T, dir string, env []string, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
