package demo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// process is a controller the demo runs: its own process group, output to a log file, and the
// log's folder (inside the lab's) as working directory, so that `fedbr-lab lab down` finds and
// stops it should the demo die without stopping it.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan error
}

func start(bin, logPath string, args ...string) (*process, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// The manager and agents call the AWS double with the lab's credentials, given
	// explicitly: an endpoint override implies none.
	cmd.Env = append(os.Environ(), awsdouble.CredentialsEnv()...)
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s %s: %w", bin, args[0], err)
	}
	p := &process{cmd: cmd, log: f, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	defer func() { _ = p.log.Close() }()
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
	// The exit status of a stopped controller says nothing the logs do not.
	select {
	case err := <-p.done:
		_ = err
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err := <-p.done
		_ = err
	}
}

// kill sends SIGKILL to the process group and waits for the process to end: a crash, with no
// chance to clean up.
func (p *process) kill() {
	defer func() { _ = p.log.Close() }()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	err := <-p.done // "signal: killed", as asked
	_ = err
}
