package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestCgroup reads the limit where a pod finds it, on cgroup v2 and v1, with the path the
// process's cgroup file names or at the mount's root.
func TestCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2, namespaced: 0::/", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30},
		{"v2, the host's path", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n"}, 512 << 20},
		{"v2, the host's path, own cgroup at the root", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20},
		{"v2, no limit", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"v1", map[string]string{"proc/self/cgroup": "12:pids:/x\n4:memory:/kubepods/pod1/c1\n1:cpu,cpuacct:/x\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648\n"}, 2 << 30},
		{"v1, shared controllers", map[string]string{"proc/self/cgroup": "4:memory,hugetlb:/a\n", "sys/fs/cgroup/memory/a/memory.limit_in_bytes": "1048576000"}, 1048576000},
		{"v1, no limit", map[string]string{"proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"no cgroup file", map[string]string{}, 0},
		{"unreadable limit", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cgroup(tree(t, tc.files)); got != tc.want {
				t.Errorf("Cgroup = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSet: the runtime's limit becomes 90% of the cgroup's, unless GOMEMLIMIT is set or there
// is no limit.
func TestSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1000000000\n"})
	env := func(v string) func(string) string { return func(string) string { return v } }
	if got := Set(root, env("512MiB")); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Errorf("with GOMEMLIMIT set: Set = %d, limit %d, want 0 and the runtime's own", got, debug.SetMemoryLimit(-1))
	}
	if got := Set(root, env("")); got != 900000000 || debug.SetMemoryLimit(-1) != 900000000 {
		t.Errorf("Set = %d, runtime limit %d, want 900000000", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(before)
	if got := Set(tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}), env("")); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Errorf("no limit: Set = %d, want 0 and the runtime's limit untouched", got)
	}
}
