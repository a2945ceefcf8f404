package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

// Down stops every process of the lab in dir and checks that none is left. Operators and bank
// workloads stop first (so they neither react nor write), then the nodes (which stop their
// pods: SIGTERM, SIGKILL after the pods' grace, at most a few seconds), then the AWS double
// and the EKS authenticator, then the control planes. Each group gets grace after SIGTERM
// before SIGKILL. Last, any process still running from inside the lab directory (a pod process
// that escaped its node, say) is killed and reported: Down then returns an error naming it,
// because something leaked.
func Down(ctx context.Context, dir string, grace time.Duration) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var errs []error
	l, err := Load(dir)
	switch {
	case err == nil:
		var ops, nodes, aws []controlplane.Process
		for _, p := range l.processes() {
			switch p.Component {
			case ComponentOperator, ComponentBank:
				ops = append(ops, p.Process)
			case ComponentNode:
				nodes = append(nodes, p.Process)
			default:
				aws = append(aws, p.Process)
			}
		}
		for _, g := range []struct {
			procs []controlplane.Process
			grace time.Duration
		}{{ops, grace}, {nodes, grace + nodeShutdownGrace}, {aws, grace}} {
			if err := controlplane.Stop(ctx, g.procs, g.grace); err != nil {
				errs = append(errs, err)
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		errs = append(errs, err)
	}
	if err := controlplane.Down(ctx, dir, grace); err != nil {
		errs = append(errs, err)
	}
	if left := Leftovers(dir); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		errs = append(errs, fmt.Errorf("processes %v were still running in %s after the lab stopped; killed them", left, dir))
	}
	// A node stopped by SIGKILL (a crash test) leaves its volumes mounted, as a dead node's
	// kernel would hold them; the lab is gone, so they go too.
	if err := loopfs.UnmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leftovers lists the processes still running from the lab in dir: pod processes (their
// environment has FEDBR_LAB_ROOT inside dir) and processes of a binary the lab recorded whose
// working directory is inside dir. After Down there must be none. A shell that merely sits in
// the directory is not one of them.
func Leftovers(dir string) []int {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	binaries := recordedBinaries(dir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || zombie(pid) {
			continue
		}
		if labProcess(pid, dir, binaries) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

func labProcess(pid int, dir string, binaries map[string]bool) bool {
	inside := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) }
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	if env, err := os.ReadFile(filepath.Join(proc, "environ")); err == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			if root, ok := strings.CutPrefix(kv, "FEDBR_LAB_ROOT="); ok && inside(root) {
				return true
			}
		}
	}
	exe, err := os.Readlink(filepath.Join(proc, "exe"))
	if err != nil || !binaries[strings.TrimSuffix(exe, " (deleted)")] {
		return false
	}
	cwd, err := os.Readlink(filepath.Join(proc, "cwd"))
	return err == nil && inside(cwd)
}

// recordedBinaries are the executables of every process the lab in dir recorded.
func recordedBinaries(dir string) map[string]bool {
	out := map[string]bool{}
	if l, err := Load(dir); err == nil {
		for _, p := range l.processes() {
			out[p.Process.Binary] = true
		}
	}
	if st, err := controlplane.Load(dir); err == nil {
		for _, c := range st.Clusters {
			for _, p := range c.Processes {
				out[p.Binary] = true
			}
		}
	}
	return out
}

// zombie reports whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
