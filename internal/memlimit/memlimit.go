// Package memlimit gives the Go runtime a soft memory limit under the container's: without
// one, the garbage collector lets the heap grow to twice what is live before it collects, and a
// step that holds 600 MiB at its peak (restore-data reading a million regions' metas) reaches
// 1.2 GiB and is killed under a 1 GiB limit it could have kept to. With the limit the collector
// works harder as the heap nears it instead.
package memlimit

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the container's memory limit the Go heap is held to; the rest is for
// what the runtime does not count (stacks outside the heap, the binary, the kernel's buffers).
const Share = 0.9

// unlimited is the smallest cgroup v1 limit that means none (v1 writes "no limit" as the
// largest page-aligned int64).
const unlimited = 1 << 62

// Set sets the runtime's soft memory limit to Share of the memory limit of the cgroup the
// process runs in, read under root ("/" in a pod): cgroup v2's memory.max or v1's
// memory.limit_in_bytes. It does nothing when GOMEMLIMIT is set (the runtime took it, and the
// user's word wins) or the cgroup has no limit. It returns the limit it set, 0 if none.
func Set(root string, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := Cgroup(root)
	if limit <= 0 {
		return 0
	}
	soft := int64(float64(limit) * Share)
	debug.SetMemoryLimit(soft)
	return soft
}

// Cgroup is the memory limit in bytes of the cgroup the process runs in, read under root; 0
// when there is none or it cannot be read.
func Cgroup(root string) int64 {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")) //nolint:gosec // G304: /proc/self/cgroup under "/", or a test's tree
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2's line is 0::path.
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = "sys/fs/cgroup", "memory.max"
		case hasController(parts[1], "memory"):
			dir, file = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		// The path as the host names it, then the mount's root: a container whose cgroups
		// are not namespaced sees the host's path in /proc/self/cgroup and its own cgroup
		// mounted at the root.
		for _, p := range []string{filepath.Join(root, dir, parts[2], file), filepath.Join(root, dir, file)} {
			if n, ok := readLimit(p); ok {
				return n
			}
		}
	}
	return 0
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a limit file: a number of bytes, or "max" (v2) or a huge number (v1) for
// none, which reads as 0 and true.
func readLimit(path string) (int64, bool) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: a cgroup limit file under "/" named by /proc/self/cgroup, or a test's
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	if n >= unlimited {
		return 0, true
	}
	return n, true
}
