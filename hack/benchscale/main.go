// Command benchscale is `make bench-scale`: it runs fedbr's heaviest steps at scale, each as
// the fedbr binary in a process of its own (as in a pod), against a region-only cluster served
// by another process (`fedbr-lab lab regions`), and prints each step's wall time, CPU time and
// peak resident memory per phase, measured from outside the step: /proc/PID samples every
// 100 ms, and the kernel's rusage at its exit for the whole run; and its Go heap per phase, from
// the step's own gctrace.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux fedbr runs on.
const clockTicks = 100

type options struct {
	fedbr, lab     string
	regions        int
	stores         int
	steps          string
	timeout        time.Duration
	workDir        string
	readyTimeout   time.Duration
	sampleInterval time.Duration
	memoryLimit    string
	limit          int64
}

func main() {
	var o options
	flag.StringVar(&o.fedbr, "fedbr", "bin/fedbr", "the fedbr binary whose steps are measured")
	flag.StringVar(&o.lab, "fedbr-lab", "bin/fedbr-lab", "the fedbr-lab binary serving the region-only cluster")
	flag.IntVar(&o.regions, "regions", 1_000_000, "regions of the cluster")
	flag.IntVar(&o.stores, "stores", 100, "TiKV stores of the cluster")
	flag.StringVar(&o.steps, "steps", "pause,restore-data", "steps to measure, comma-separated: pause, restore-data")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound on each step's run")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 5*time.Minute, "bound on the cluster's start")
	flag.DurationVar(&o.sampleInterval, "sample-interval", 100*time.Millisecond, "how often /proc is sampled")
	flag.StringVar(&o.workDir, "work-dir", "", "folder for the clusters' data (default: a temporary one, removed after)")
	flag.StringVar(&o.memoryLimit, "memory-limit", "", "run each step in a memory cgroup of this size (1Gi, 512Mi), as a container with that limit: the step sets its Go memory limit from it, and the kernel kills it past it (needs root)")
	flag.Parse()
	if o.memoryLimit != "" {
		n, err := parseBytes(o.memoryLimit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale: --memory-limit:", err)
			os.Exit(2)
		}
		o.limit = n
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// row is one line of the table.
type row struct {
	step, phase string
	wall        time.Duration
	cpu         time.Duration
	rss         int64 // bytes; 0: not measured
	// heap and live are the Go heap's largest size and the most of it live after a collection
	// (the runtime's gctrace), bytes; 0: not measured.
	heap, live int64
	perRegion  bool
}

func run(o options) error {
	if o.regions < 1 || o.stores < 3 {
		return fmt.Errorf("--regions %d --stores %d: want a region and 3 stores at least", o.regions, o.stores)
	}
	dir := o.workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "fedbr-bench-scale-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	version, _ := exec.Command(o.fedbr, "version").Output()
	loadStart := loadavg()
	var rows []row
	for _, step := range strings.Split(o.steps, ",") {
		step = strings.TrimSpace(step)
		rs, err := o.measure(step, filepath.Join(dir, step))
		if err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		rows = append(rows, rs...)
	}
	fmt.Printf("bench-scale %s: %d regions over %d stores (3 peers each); %d CPUs; load average %s at the start, %s at the end\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), o.regions, o.stores, runtime.NumCPU(), loadStart, loadavg())
	fmt.Printf("fedbr: %s", strings.TrimSpace(string(version))+"\n")
	if o.limit > 0 {
		fmt.Printf("each step in a memory cgroup of %s (%d MiB), swap included, as a container with that memory limit\n", o.memoryLimit, o.limit>>20)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "step\tphase\twall\tCPU\tCPU per region\tpeak RSS\tpeak heap\tpeak live heap")
	for _, r := range rows {
		wall, cpu, per, rss := "", "", "", "-"
		if r.perRegion {
			wall, cpu = fmt.Sprintf("%.1f s", r.wall.Seconds()), fmt.Sprintf("%.1f s", r.cpu.Seconds())
			per = fmt.Sprintf("%.1f µs", float64(r.cpu.Microseconds())/float64(o.regions))
		}
		if r.rss > 0 {
			rss = fmt.Sprintf("%.0f MiB", float64(r.rss)/(1<<20))
		}
		heap, live := "-", "-"
		if r.heap > 0 {
			heap, live = fmt.Sprintf("%.0f MiB", float64(r.heap)/(1<<20)), fmt.Sprintf("%.0f MiB", float64(r.live)/(1<<20))
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.step, r.phase, wall, cpu, per, rss, heap, live)
	}
	return tw.Flush()
}

// measure starts a fresh cluster, runs the step against it and returns its rows.
func (o options) measure(step, dir string) ([]row, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ready := filepath.Join(dir, "ready.json")
	cluster := exec.Command(o.lab, "lab", "regions", "--data-dir", filepath.Join(dir, "pd"), "--ready-file", ready,
		"--regions", strconv.Itoa(o.regions), "--stores", strconv.Itoa(o.stores))
	clusterLog, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = clusterLog.Close() }()
	cluster.Stdout, cluster.Stderr = clusterLog, clusterLog
	if err := cluster.Start(); err != nil {
		return nil, err
	}
	clusterDone := exitOf(cluster)
	defer func() {
		_ = cluster.Process.Signal(syscall.SIGTERM)
		if err := <-clusterDone; err != nil {
			fmt.Fprintf(os.Stderr, "bench-scale: the region-only cluster ended with %v (log %s)\n", err, clusterLog.Name())
		}
	}()
	pd, err := waitReady(ready, o.readyTimeout, clusterDone)
	if err != nil {
		return nil, fmt.Errorf("region-only cluster (log %s): %w", clusterLog.Name(), err)
	}
	// A ts just below PD's TSO (the double's clock): the backup ts the pause pins, the resolved
	// ts restore-data flashes back to.
	ts := uint64(time.Now().Add(-time.Second).UnixMilli()) << 18
	var args []string
	switch step {
	case "pause":
		args = []string{"br", "pause", "--pd", pd, "--backup-ts", strconv.FormatUint(ts, 10), "--ttl", "10m",
			"--status-file", filepath.Join(dir, "pause-status.json")}
	case "restore-data":
		args = []string{"br", "restore-data", "--pd", pd, "--resolved-ts", strconv.FormatUint(ts, 10), "--stores", strconv.Itoa(o.stores)}
	default:
		return nil, fmt.Errorf("unknown step %q: want pause or restore-data", step)
	}
	rows, err := o.runStep(step, dir, args)
	if err != nil {
		return nil, err
	}
	if rss := vmHWM(cluster.Process.Pid); rss > 0 {
		rows = append(rows, row{step: "(doubles)", phase: "cluster of " + step, rss: rss})
	}
	return rows, nil
}

// runStep runs one step and splits its run into phases: the pause's until Ready (from its status
// file) and the lift after SIGTERM; restore-data's region recovery and flashback (from its log).
func (o options) runStep(step, dir string, args []string) ([]row, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	command := o.fedbr
	var cg *cgroup
	if o.limit > 0 {
		var err error
		if cg, err = newCgroup(o.limit); err != nil {
			return nil, err
		}
		defer cg.remove()
		command, args = cg.wrap(command, args)
	}
	cmd := exec.CommandContext(ctx, command, args...)
	// The runtime's trace of each collection gives the step's Go heap, which /proc cannot.
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	logFile, err := os.Create(filepath.Join(dir, step+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := exitOf(cmd)
	m := newMeter(cmd.Process.Pid, o.sampleInterval)
	first := "until Ready"
	if step == "restore-data" {
		first = "recover regions"
	}
	m.phase(first)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logFile, line)
			if g := gcLine.FindStringSubmatch(line); g != nil {
				start, _ := strconv.ParseInt(g[1], 10, 64)
				end, _ := strconv.ParseInt(g[2], 10, 64)
				live, _ := strconv.ParseInt(g[3], 10, 64)
				m.gc(max(start, end)<<20, live<<20)
				continue
			}
			if step == "restore-data" && strings.Contains(line, "Flashing back every region") {
				m.phase("flash back")
			}
		}
	}()
	if step == "pause" {
		if err := waitPhase(ctx, filepath.Join(dir, "pause-status.json"), "Ready", done); err != nil {
			_ = cmd.Process.Kill()
			wg.Wait()
			_ = waitExit(done) // killed: its error says so
			m.stop()
			return nil, fmt.Errorf("%w (log %s)", err, logFile.Name())
		}
		m.phase("lift")
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	wg.Wait()
	werr := <-done
	end := time.Now()
	m.stop()
	if werr != nil {
		if cg != nil && cg.oomKills() > 0 {
			return nil, fmt.Errorf("killed for memory in its %s cgroup (peak %d MiB): %w (log %s)", o.memoryLimit, cg.peak()>>20, werr, logFile.Name())
		}
		return nil, fmt.Errorf("exited: %w (log %s)", werr, logFile.Name())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		return nil, errors.New("no rusage")
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	rows := m.rows(step, end, total)
	whole := row{step: step, phase: "whole", wall: end.Sub(start), cpu: total, rss: ru.Maxrss << 10, perRegion: true}
	for _, r := range rows {
		whole.heap, whole.live = max(whole.heap, r.heap), max(whole.live, r.live)
	}
	rows = append(rows, whole)
	if cg != nil {
		rows = append(rows, row{step: step, phase: "cgroup's peak charge", rss: cg.peak()})
	}
	return rows, nil
}

// meter samples a process's CPU time and resident memory and splits them into phases.
type meter struct {
	pid  int
	mu   sync.Mutex
	cur  *phaseStat
	all  []*phaseStat
	done chan struct{}
	wg   sync.WaitGroup
}

type phaseStat struct {
	name       string
	start      time.Time
	cpuAtStart time.Duration
	maxRSS     int64
	maxHeap    int64
	maxLive    int64
}

func newMeter(pid int, every time.Duration) *meter {
	m := &meter{pid: pid, done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.done:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *meter) sample() {
	rss := vmRSS(m.pid)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil && rss > m.cur.maxRSS {
		m.cur.maxRSS = rss
	}
}

// gc records one collection's heap sizes (gctrace) in the current phase.
func (m *meter) gc(heap, live int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil {
		m.cur.maxHeap, m.cur.maxLive = max(m.cur.maxHeap, heap), max(m.cur.maxLive, live)
	}
}

// gcLine reads the heap sizes of a gctrace line ("gc 12 @3.2s 5%: … 1138->1218->648 MB, …"):
// the heap at the collection's start and end, and what was live after it.
var gcLine = regexp.MustCompile(`^gc \d+ @[\d.]+s \d+%: .* (\d+)->(\d+)->(\d+) MB`)

// phase starts the named phase now.
func (m *meter) phase(name string) {
	cpu := cpuTime(m.pid)
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = &phaseStat{name: name, start: time.Now(), cpuAtStart: cpu}
	m.all = append(m.all, m.cur)
}

func (m *meter) stop() {
	close(m.done)
	m.wg.Wait()
}

// rows are the phases' figures; the last phase ends at end with the process's total CPU time.
func (m *meter) rows(step string, end time.Time, total time.Duration) []row {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []row
	for i, p := range m.all {
		until, cpuEnd := end, total
		if i+1 < len(m.all) {
			until, cpuEnd = m.all[i+1].start, m.all[i+1].cpuAtStart
		}
		out = append(out, row{step: step, phase: p.name, wall: until.Sub(p.start), cpu: cpuEnd - p.cpuAtStart, rss: p.maxRSS,
			heap: p.maxHeap, live: p.maxLive, perRegion: true})
	}
	return out
}

// cpuTime is a process's user and system CPU time so far (/proc/PID/stat utime, stime).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after its closing parenthesis count
	// from 3 (state).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// vmRSS and vmHWM are a process's resident memory now and at its peak, in bytes.
func vmRSS(pid int) int64 { return statusKB(pid, "VmRSS:") }
func vmHWM(pid int) int64 { return statusKB(pid, "VmHWM:") }

func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// waitExit is the error of a process exitOf waits for.
func waitExit(done <-chan error) error { return <-done }

// exitOf waits for cmd in the background: the channel gives its Wait's error once it exited.
func exitOf(cmd *exec.Cmd) <-chan error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

// waitReady waits for the cluster's ready file and returns its PD address.
func waitReady(path string, limit time.Duration, exited <-chan error) (string, error) {
	deadline := time.After(limit)
	for {
		if b, err := os.ReadFile(path); err == nil {
			var r struct {
				PD string `json:"pd"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return "", fmt.Errorf("ready file %s: %w", path, err)
			}
			return r.PD, nil
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("exited before it served: %w", err)
		case <-deadline:
			return "", fmt.Errorf("not serving within %s", limit)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPhase waits until the status file says phase, or the process ends.
func waitPhase(ctx context.Context, path, phase string, exited <-chan error) error {
	for {
		if b, err := os.ReadFile(path); err == nil {
			var st struct {
				Phase string `json:"phase"`
				Error string `json:"error"`
			}
			if json.Unmarshal(b, &st) == nil {
				switch st.Phase {
				case phase:
					return nil
				case "Failed":
					return fmt.Errorf("phase Failed: %s", st.Error)
				}
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before phase %s: %w", phase, err)
		case <-ctx.Done():
			return fmt.Errorf("no phase %s within the timeout", phase)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
