package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroup is a memory cgroup a step runs in, as in a container with a memory limit: the step
// reads the limit as in a pod (internal/memlimit) and the kernel kills it past the limit.
type cgroup struct {
	dir string
	v2  bool
}

// newCgroup makes a memory cgroup limited to limit bytes, swap included: cgroup v1's memory
// hierarchy, else v2's (which needs the memory controller enabled for its children).
func newCgroup(limit int64) (*cgroup, error) {
	name := fmt.Sprintf("fedbr-bench-scale-%d", os.Getpid())
	write := func(dir, file string, v string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644)
	}
	n := strconv.FormatInt(limit, 10)
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		c := &cgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("make a memory cgroup (run as root): %w", err)
		}
		if err := write(c.dir, "memory.limit_in_bytes", n); err != nil {
			c.remove()
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(c.dir, "memory.memsw.limit_in_bytes")); err == nil {
			if err := write(c.dir, "memory.memsw.limit_in_bytes", n); err != nil {
				c.remove()
				return nil, err
			}
		}
		return c, nil
	}
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(ctl), "memory") {
		c := &cgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("make a memory cgroup (run as root): %w", err)
		}
		for file, v := range map[string]string{"memory.max": n, "memory.swap.max": "0"} {
			if err := write(c.dir, file, v); err != nil && file == "memory.max" {
				c.remove()
				return nil, err
			}
		}
		return c, nil
	}
	return nil, errors.New("no memory cgroup to limit the step in: neither cgroup v1's memory hierarchy nor v2's memory controller")
}

// wrap runs command in the cgroup: a shell joins it and then becomes the command (same pid).
func (c *cgroup) wrap(command string, args []string) (string, []string) {
	script := `echo $$ > "$0/cgroup.procs" && exec "$@"`
	return "/bin/sh", append([]string{"-c", script, c.dir, command}, args...)
}

// peak is the most memory the cgroup was charged, in bytes (0 if unknown).
func (c *cgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// oomKills is how many processes the kernel killed in the cgroup for memory.
func (c *cgroup) oomKills() int {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func (c *cgroup) remove() { _ = os.Remove(c.dir) }

// parseBytes reads a size as Kubernetes writes one: 1Gi, 1GiB, 512Mi, 1000M or bytes.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "B")
	mult := int64(1)
	for suffix, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 1e3, "M": 1e6, "G": 1e9} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("a size such as 1Gi or 512Mi, not %q", s)
	}
	return n * mult, nil
}
