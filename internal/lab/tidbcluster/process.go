package tidbcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	tikvcmd "github.com/fedbr/fedbr/internal/cmd/lab/tikv"
	"github.com/fedbr/fedbr/internal/lab/labtls"
)

// childEnv marks a store process started by a Cluster in process mode. A test binary given as
// Config.Binary turns into `fedbr-lab lab tikv` when it sees it (RunChild).
const childEnv = "FEDBR_TIDBCLUSTER_CHILD"

// RunChild makes a test binary usable as Config.Binary: called first thing in TestMain, it
// runs the store a Cluster asked for and exits, and does nothing in the test process itself.
func RunChild() {
	if os.Getenv(childEnv) == "" {
		return
	}
	args := os.Args[1:]
	if len(args) < 2 || args[0] != "lab" || args[1] != "tikv" {
		_, _ = fmt.Fprintf(os.Stderr, "%s set but the arguments are not `lab tikv ...`: %q\n", childEnv, args)
		os.Exit(2)
	}
	cmd := tikvcmd.NewCmd()
	cmd.SetArgs(args[2:])
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// proc is a store running as a child process.
type proc struct {
	cmd      *exec.Cmd
	addr     string
	recovery bool
	started  time.Time
	exited   chan struct{}
}

// servingLine is what `fedbr-lab lab tikv` prints once it serves.
var servingLine = regexp.MustCompile(`^TiKV double store (\d+) serving on (\S+) \(recovery mode (true|false),`)

// startProcess starts store id as `<Binary> lab tikv ...` and returns once it serves.
func (c *Cluster) startProcess(ctx context.Context, id uint64, listen string, initial []uint64) (*proc, error) {
	args := []string{"lab", "tikv", "--store-id", strconv.FormatUint(id, 10), "--data-dir", c.StoreDir(id),
		"--pd", c.PD.Addr(), "--listen", listen, "--verbose"}
	if d := c.RaftDir(id); d != "" {
		args = append(args, "--raft-dir", d)
	}
	var ids []string
	for _, s := range initial {
		ids = append(ids, strconv.FormatUint(s, 10))
	}
	args = append(args, "--initial-stores", strings.Join(ids, ","))
	for _, k := range c.cfg.SplitKeys {
		args = append(args, "--split-keys", string(k))
	}
	if c.cfg.Tick > 0 {
		args = append(args, "--tick", c.cfg.Tick.String())
	}
	if c.cfg.CompactBytes > 0 {
		args = append(args, "--compact-bytes", strconv.FormatInt(c.cfg.CompactBytes, 10))
	}
	if c.cfg.GCPollInterval > 0 {
		args = append(args, "--gc-poll-interval", c.cfg.GCPollInterval.String())
	}
	if id == c.cfg.SlowStore {
		args = append(args, "--slow-apply", "10")
	}
	if d := c.cfg.NodeTLSDir; d != "" {
		args = append(args, "--ca", filepath.Join(d, labtls.CAFile), "--cert", filepath.Join(d, labtls.CertFile), "--key", filepath.Join(d, labtls.KeyFile))
	}
	logf, err := os.OpenFile(filepath.Join(c.cfg.Dir, fmt.Sprintf("tikv-%d.log", id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store %d log: %w", id, err)
	}
	defer func() { _ = logf.Close() }() // the child holds its own descriptor
	cmd := exec.Command(c.cfg.Binary, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOMAXPROCS=1")
	cmd.Stderr = logf
	// The store dies with the test process, as a pod's process dies with its node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start store %d: %w", id, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				lines <- sc.Text()
			}
			_, _ = io.WriteString(logf, sc.Text()+"\n")
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			<-p.exited
			return nil, fmt.Errorf("store %d exited before serving (%v); its log: %s", id, cmd.ProcessState, logf.Name())
		}
		m := servingLine.FindStringSubmatch(l)
		p.addr, p.recovery = m[2], m[3] == "true"
		return p, nil
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("store %d did not serve: %w", id, ctx.Err())
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// waitLeadersFromPD waits until PD has heard, from a store process started before the report,
// of a leader for every region.
func (c *Cluster) waitLeadersFromPD(ctx context.Context) error {
	for {
		c.mu.Lock()
		procs := map[uint64]*proc{}
		for id, p := range c.procs {
			procs[id] = p
		}
		c.mu.Unlock()
		var leaderless []string
		leaders := c.PD.Leaders()
		for _, l := range leaders {
			p := procs[l.Store]
			if p == nil || !l.Reported.After(p.started) {
				leaderless = append(leaderless, strconv.FormatUint(l.Region, 10))
			}
		}
		if len(leaderless) == 0 && len(leaders) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leaders (%d of %d regions without one reported by a running store: %s): %w",
				len(leaderless), len(leaders), strings.Join(leaderless, ", "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var errProcesses = errors.New("the stores run as processes (Config.Binary); only stores in this process can be asked")
