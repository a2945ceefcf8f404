package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// spawn starts one component in its own session with its output in <dir>/logs/<component>.log.
func spawn(binDir, dir, component string, port int, args []string) (Process, error) {
	return Spawn(Command{Binary: filepath.Join(binDir, component), Args: args, Dir: dir,
		Log: filepath.Join(dir, "logs", component+".log"), Component: component, Port: port})
}

// Command is a lab process to start detached.
type Command struct {
	// Binary is the executable; it is recorded resolved (absolute, symlinks followed), as
	// /proc/PID/exe shows it, so that a reused pid is never taken for the lab's.
	Binary string
	Args   []string
	// Dir is the working directory.
	Dir string
	// Log receives stdout and stderr, appended; its folder is created.
	Log string
	// Component and Port are recorded in the Process.
	Component string
	Port      int
}

// Spawn starts c in its own session (so it outlives the caller and a signal to its group
// reaches its children) and returns the Process to record. The child is reaped by a goroutine
// while this process lives; once this process exits, init adopts it.
func Spawn(c Command) (Process, error) {
	bin, err := filepath.Abs(c.Binary)
	if err != nil {
		return Process{}, err
	}
	if resolved, err := filepath.EvalSymlinks(bin); err == nil {
		bin = resolved
	}
	if err := os.MkdirAll(filepath.Dir(c.Log), 0o755); err != nil {
		return Process{}, err
	}
	logFile, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Process{}, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, c.Args...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Process{}, fmt.Errorf("starting %s: %w", c.Component, err)
	}
	go func() { _ = cmd.Wait() }()
	return Process{Component: c.Component, PID: cmd.Process.Pid, Binary: bin, Port: c.Port, Log: c.Log}, nil
}

// Running reports whether the process still runs its recorded binary.
func (p Process) Running() bool { return alive(p) }

// LogTail is the last n lines of the process's log, joined with " | ", for error messages.
func (p Process) LogTail(n int) string { return logTail(p.Log, n) }

// alive reports whether p's pid still runs p's binary (and is not a zombie), so that a reused
// pid is never mistaken for, or signalled as, a lab process.
func alive(p Process) bool {
	if p.PID <= 0 {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != p.Binary {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// Down stops every recorded process: SIGTERM to its session, up to grace to exit, then SIGKILL.
// Components stop in reverse start order (scheduler and controller-manager before the API
// server, etcd last). It returns an error naming any process that survived.
func Down(ctx context.Context, dir string, grace time.Duration) error {
	st, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for i := len(components) - 1; i >= 0; i-- {
		var group []Process
		for _, c := range st.Clusters {
			for _, p := range c.Processes {
				if p.Component == components[i] {
					group = append(group, p)
				}
			}
		}
		if err := Stop(ctx, group, grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops the processes together: SIGTERM to each one's session, up to grace to exit, then
// SIGKILL. Processes that no longer run their recorded binary are left alone. It returns an
// error naming any process that survived SIGKILL.
func Stop(ctx context.Context, procs []Process, grace time.Duration) error {
	var group []Process
	for _, p := range procs {
		if alive(p) {
			group = append(group, p)
			_ = syscall.Kill(-p.PID, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	var survivors []string
	for _, p := range group {
		for alive(p) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(p) {
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
			for range 100 {
				if !alive(p) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if alive(p) {
			survivors = append(survivors, fmt.Sprintf("%s pid %d", p.Component, p.PID))
		}
	}
	if len(survivors) > 0 {
		return fmt.Errorf("still running after SIGKILL: %s", strings.Join(survivors, ", "))
	}
	return nil
}

// ComponentStatus is one component's state for `fedbr-lab lab status`.
type ComponentStatus struct {
	Cluster   string `json:"cluster"`
	Component string `json:"component"`
	PID       int    `json:"pid"`
	Port      int    `json:"port"`
	Running   bool   `json:"running"`
	Log       string `json:"log"`
}

// Status reports every recorded component of the lab in dir.
func Status(dir string) ([]ComponentStatus, error) {
	st, err := Load(dir)
	if err != nil {
		return nil, err
	}
	var out []ComponentStatus
	for _, c := range st.Clusters {
		for _, p := range c.Processes {
			out = append(out, ComponentStatus{Cluster: c.Name, Component: p.Component, PID: p.PID, Port: p.Port, Running: alive(p), Log: p.Log})
		}
	}
	return out, nil
}
