package warmup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []entry
		want []string
	}{
		{"empty", nil, nil},
		{"newest first", []entry{{Rel: "old", MTime: 1}, {Rel: "new", MTime: 3}, {Rel: "mid", MTime: 2}}, []string{"new", "mid", "old"}},
		{"ties by path", []entry{{Rel: "b", MTime: 5}, {Rel: "a/z", MTime: 5}, {Rel: "c", MTime: 9}, {Rel: "a", MTime: 5}}, []string{"c", "a", "a/z", "b"}},
		{"size does not matter", []entry{{Rel: "big", Size: 1 << 30, MTime: 1}, {Rel: "small", Size: 1, MTime: 2}}, []string{"small", "big"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := slices.Clone(tc.in)
			order(files)
			if diff := cmp.Diff(tc.want, rels(files)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPending(t *testing.T) {
	files := []entry{{Rel: "same", Size: 10, MTime: 100}, {Rel: "grown", Size: 20, MTime: 100}, {Rel: "touched", Size: 10, MTime: 200}, {Rel: "new", Size: 1, MTime: 1}}
	for _, tc := range []struct {
		name              string
		done              map[string]stamp
		wantTodo, wantSkp []string
	}{
		{"no checkpoint", nil, []string{"same", "grown", "touched", "new"}, nil},
		{"unchanged skipped, changed read again", map[string]stamp{
			"same": {Size: 10, MTime: 100}, "grown": {Size: 10, MTime: 100}, "touched": {Size: 10, MTime: 100}, "removed": {Size: 1, MTime: 1},
		}, []string{"grown", "touched", "new"}, []string{"same"}},
		{"everything read", map[string]stamp{
			"same": {10, 100}, "grown": {20, 100}, "touched": {10, 200}, "new": {1, 1},
		}, nil, []string{"same", "grown", "touched", "new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			todo, skipped := pending(files, tc.done)
			if diff := cmp.Diff(tc.wantTodo, rels(todo)); diff != "" {
				t.Errorf("todo (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSkp, rels(skipped)); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

func rels(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Rel)
	}
	return out
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		size, chunk int64
		want        [][2]int64 // offset, length
	}{
		{0, 4096, nil},
		{1, 4096, [][2]int64{{0, 1}}},
		{4096, 4096, [][2]int64{{0, 4096}}},
		{4097, 4096, [][2]int64{{0, 4096}, {4096, 1}}},
		{10000, 4096, [][2]int64{{0, 4096}, {4096, 4096}, {8192, 1808}}},
		{3 << 20, 1 << 20, [][2]int64{{0, 1 << 20}, {1 << 20, 1 << 20}, {2 << 20, 1 << 20}}},
	} {
		var got [][2]int64
		for i := range chunkCount(tc.size, tc.chunk) {
			off, n := chunkAt(tc.size, tc.chunk, i)
			got = append(got, [2]int64{off, n})
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("chunks of %d by %d (-want +got):\n%s", tc.size, tc.chunk, diff)
		}
	}
}

// scripted is a file of size bytes whose reads return at most most bytes each; like a
// device opened with O_DIRECT, it refuses unaligned reads when direct.
type scripted struct {
	length int64
	most   int
	direct bool
	fail   error
	calls  [][2]int64 // offset, length asked
}

func (f *scripted) pread(p []byte, off int64) (int, error) {
	f.calls = append(f.calls, [2]int64{off, int64(len(p))})
	if f.fail != nil {
		return 0, f.fail
	}
	if f.direct && (off%Align != 0 || len(p)%Align != 0) {
		return 0, syscall.EINVAL
	}
	n := min(int64(len(p)), int64(f.most), max(f.length-off, 0))
	return int(n), nil
}
func (f *scripted) size() (int64, error) { return f.length, nil }
func (f *scripted) close() error         { return nil }

func TestReadFull(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      scripted
		off, n    int64
		want      int64
		wantCalls [][2]int64
		wantErr   error
	}{
		{"buffered in one read", scripted{length: 10000, most: 1 << 20}, 0, 10000, 10000, [][2]int64{{0, 10000}}, nil},
		{"buffered short reads", scripted{length: 10000, most: 4096}, 0, 10000, 10000, [][2]int64{{0, 10000}, {4096, 5904}, {8192, 1808}}, nil},
		{"buffered file shrank", scripted{length: 5000, most: 1 << 20}, 0, 8192, 5000, [][2]int64{{0, 8192}, {5000, 3192}}, nil},
		{"direct last chunk reads an aligned length", scripted{length: 10000, most: 1 << 20, direct: true}, 8192, 1808, 1808, [][2]int64{{8192, 4096}}, nil},
		{"direct short aligned reads go on", scripted{length: 8192, most: 4096, direct: true}, 0, 8192, 8192, [][2]int64{{0, 8192}, {4096, 4096}}, nil},
		{"direct unaligned end stops", scripted{length: 5000, most: 1 << 20, direct: true}, 0, 8192, 5000, [][2]int64{{0, 8192}}, nil},
		{"direct file grew", scripted{length: 20000, most: 1 << 20, direct: true}, 8192, 1808, 1808, [][2]int64{{8192, 4096}}, nil},
		{"error", scripted{length: 8192, most: 1 << 20, fail: syscall.EIO}, 4096, 4096, 0, [][2]int64{{4096, 4096}}, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.file
			got, err := readFull(&f, f.direct, alignedBuffer(16384), tc.off, tc.n)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("read %d bytes, want %d", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantCalls, f.calls); diff != "" {
				t.Errorf("preads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{Align, 3 * Align, 1 << 20} {
		for range 20 {
			b := alignedBuffer(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("len %d cap %d, want %d", len(b), cap(b), n)
			}
			if addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))); addr%Align != 0 {
				t.Fatalf("buffer at %#x is not aligned to %d", addr, Align)
			}
		}
	}
}

func TestCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]stamp{"db/000001.sst": {Size: 10, MTime: 123}, "raft/1.log": {Size: 0, MTime: 5}}
	if err := writeCheckpoint(dir, files); err != nil {
		t.Fatal(err)
	}
	got, err := loadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(files, got); diff != "" {
		t.Errorf("checkpoint (-want +got):\n%s", diff)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if diff := cmp.Diff([]string{filepath.Join(dir, CheckpointName)}, names); diff != "" {
		t.Errorf("files left (-want +got):\n%s", diff)
	}
	if got, err := loadCheckpoint(t.TempDir()); got != nil || err != nil {
		t.Errorf("no checkpoint: %v, %v; want none and no error", got, err)
	}
	for _, bad := range []string{`{"version":2,"files":{}}`, `{"files":`, ``} {
		if _, err := parseCheckpoint([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestMountDevice(t *testing.T) {
	const mountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,discard
100 27 259:5 / /var/lib/tikv rw,relatime shared:50 master:3 - ext4 /dev/nvme1n1 rw
101 27 0:60 / /var/lib/scratch rw - tmpfs tmpfs rw,size=1g
102 27 259:6 / /mnt/with\040space rw - xfs /dev/disk/by-label/a\040b rw
103 27 0:70 / /var/lib/shadowed rw - tmpfs tmpfs rw
104 27 259:7 / /var/lib/shadowed rw - ext4 /dev/nvme2n1 rw
105 27 259:8 /pvc-1 /var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime - ext4 /dev/nvme3n1 rw
106 27 0:80 / /var/lib/nfs rw - nfs4 10.0.0.1:/export rw
`
	for _, tc := range []struct {
		name, text, dir string
		want            mount
		wantErr         string
	}{
		{name: "mount point", text: mountinfo, dir: "/var/lib/tikv", want: mount{Dev: "259:5", Root: "/", Point: "/var/lib/tikv", FSType: "ext4", Source: "/dev/nvme1n1"}},
		{name: "root file system", text: mountinfo, dir: "/", want: mount{Dev: "259:1", Root: "/", Point: "/", FSType: "ext4", Source: "/dev/nvme0n1p1"}},
		{name: "escaped spaces", text: mountinfo, dir: "/mnt/with space", want: mount{Dev: "259:6", Root: "/", Point: "/mnt/with space", FSType: "xfs", Source: "/dev/disk/by-label/a b"}},
		{name: "the last mount hides the others", text: mountinfo, dir: "/var/lib/shadowed", want: mount{Dev: "259:7", Root: "/", Point: "/var/lib/shadowed", FSType: "ext4", Source: "/dev/nvme2n1"}},
		{name: "bind mount of a subdirectory", text: mountinfo, dir: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-1/mount",
			want: mount{Dev: "259:8", Root: "/pvc-1", Point: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-1/mount", FSType: "ext4", Source: "/dev/nvme3n1"}},
		{name: "not a mount point", text: mountinfo, dir: "/var/lib", wantErr: "/var/lib is not a mount point: block mode reads the whole device mounted there; use --fs /var/lib"},
		{name: "below a mount point", text: mountinfo, dir: "/var/lib/tikv/db", wantErr: "is not a mount point"},
		{name: "escaped path is not the raw one", text: mountinfo, dir: `/mnt/with\040space`, wantErr: "is not a mount point"},
		{name: "tmpfs", text: mountinfo, dir: "/var/lib/scratch", wantErr: `/var/lib/scratch is mounted from "tmpfs" (tmpfs), not from a block device under /dev: use --fs /var/lib/scratch`},
		{name: "nfs", text: mountinfo, dir: "/var/lib/nfs", wantErr: `mounted from "10.0.0.1:/export" (nfs4)`},
		{name: "no separator", text: "27 1 259:1 / / rw ext4 /dev/vda rw\n", dir: "/", wantErr: "mountinfo line 1 is malformed"},
		{name: "too short after separator", text: "27 1 259:1 / / rw - ext4\n", dir: "/", wantErr: "mountinfo line 1 is malformed"},
		{name: "empty", text: "", dir: "/", wantErr: "/ is not a mount point"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mountDevice(tc.text, tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mount (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{0, 10 << 30, 0, "Warming up fs /d: 0 B of 10.0 GiB (0.0%), 0.0 MiB/s, ETA unknown"},
		{1 << 30, 4 << 30, 10 * time.Second, "Warming up fs /d: 1.0 GiB of 4.0 GiB (25.0%), 102.4 MiB/s, ETA 30s"},
		{4 << 30, 4 << 30, 40 * time.Second, "Warming up fs /d: 4.0 GiB of 4.0 GiB (100.0%), 102.4 MiB/s, ETA 0s"},
		{0, 0, time.Second, "Warming up fs /d: 0 B of 0 B (100.0%), 0.0 MiB/s, ETA unknown"},
	} {
		if got := progressLine(FS, "/d", tc.done, tc.total, tc.elapsed); got != tc.want {
			t.Errorf("progressLine(%d, %d, %s) =\n%q, want\n%q", tc.done, tc.total, tc.elapsed, got, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 256 << 20: "256.0 MiB", 3 << 40: "3.0 TiB", 5 << 50: "5.0 PiB", 5 << 60: "5120.0 PiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := withDefaults(Options{FS: []string{"/d"}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Workers != DefaultWorkers || o.ChunkSize != DefaultChunkSize || o.ProgressInterval != DefaultProgressInterval {
		t.Errorf("defaults: %+v", o)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "nothing to warm up"},
		{Options{FS: []string{"/d"}, Workers: -1}, "workers -1"},
		{Options{FS: []string{"/d"}, ChunkSize: 1000}, fmt.Sprintf("want a positive multiple of %d", Align)},
		{Options{Block: []string{"/d"}, ChunkSize: -4096}, "chunk size -4096"},
		{Options{Block: []string{"/d"}, ProgressInterval: -time.Second}, "progress interval -1s"},
	} {
		if _, err := withDefaults(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.o, err, tc.want)
		}
	}
}

// writeFile writes size bytes (a pattern, so that the blocks are allocated) with mtime.
func writeFile(t testing.TB, path string, size int64, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + len(path))
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
