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
// The child is reaped by a goroutine while this process lives; once it exits, init adopts it.
func spawn(binDir, dir, component string, port int, args []string) (Process, error) {
	bin := filepath.Join(binDir, component)
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return Process{}, err
	}
	logPath := filepath.Join(logDir, component+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Process{}, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Process{}, fmt.Errorf("starting %s: %w", component, err)
	}
	go func() { _ = cmd.Wait() }()
	return Process{Component: component, PID: cmd.Process.Pid, Binary: bin, Port: port, Log: logPath}, nil
}

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
	var survivors []string
	for i := len(components) - 1; i >= 0; i-- {
		var group []Process
		for _, c := range st.Clusters {
			for _, p := range c.Processes {
				if p.Component == components[i] && alive(p) {
					group = append(group, p)
				}
			}
		}
		for _, p := range group {
			_ = syscall.Kill(-p.PID, syscall.SIGTERM)
		}
		deadline := time.Now().Add(grace)
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
	}
	if len(survivors) > 0 {
		return fmt.Errorf("still running after SIGKILL: %s", strings.Join(survivors, ", "))
	}
	return nil
}

// ComponentStatus is one component's state for `fedbr lab status`.
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
