package warmup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// recorder opens real files and records what is read from them, to check that every byte
// is read exactly once; its hooks inject failures.
type recorder struct {
	// fakeDirect opens without O_DIRECT but tells the engine it is on, so that the
	// engine's O_DIRECT handling is tested whatever the test's file system supports.
	fakeDirect bool
	// openErr and readErr return an error to inject, or nil to go on.
	openErr func(path string, flags int) error
	readErr func(path string, off int64, direct bool) error

	mu    sync.Mutex
	opens map[string]int
	reads map[string][][2]int64 // path → [start, end) of the bytes each read returned
}

func newRecorder() *recorder {
	return &recorder{opens: map[string]int{}, reads: map[string][][2]int64{}}
}

func (r *recorder) system() system {
	return system{open: r.open, mountinfo: "/proc/self/mountinfo"}
}

func (r *recorder) open(path string, flags int) (file, error) {
	if r.openErr != nil {
		if err := r.openErr(path, flags); err != nil {
			return nil, err
		}
	}
	direct := flags&oDirect != 0
	if r.fakeDirect {
		flags &^= oDirect
	}
	f, err := openFile(path, flags)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opens[path]++
	return &recordedFile{file: f, path: path, direct: direct, r: r}, nil
}

type recordedFile struct {
	file
	path   string
	direct bool
	r      *recorder
}

func (f *recordedFile) pread(p []byte, off int64) (int, error) {
	if f.r.readErr != nil {
		if err := f.r.readErr(f.path, off, f.direct); err != nil {
			return 0, err
		}
	}
	n, err := f.file.pread(p, off)
	if n > 0 {
		f.r.mu.Lock()
		f.r.reads[f.path] = append(f.r.reads[f.path], [2]int64{off, off + int64(n)})
		f.r.mu.Unlock()
	}
	return n, err
}

// checkReadOnce checks that the reads of path cover [0, size) without gap or overlap.
func (r *recorder) checkReadOnce(t *testing.T, path string, size int64) {
	t.Helper()
	r.mu.Lock()
	reads := slices.Clone(r.reads[path])
	r.mu.Unlock()
	slices.SortFunc(reads, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	var at int64
	for _, rd := range reads {
		if rd[0] != at {
			t.Errorf("%s: read [%d, %d) after [0, %d): a gap or an overlap", path, rd[0], rd[1], at)
		}
		at = rd[1]
	}
	if at != size {
		t.Errorf("%s: read up to %d, want its size %d", path, at, size)
	}
}

func (r *recorder) opened() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var paths []string
	for p := range r.opens {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

var base = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// tree writes files (relative path → size) under a new directory, the first one newest,
// and returns the directory.
func tree(t *testing.T, files []sizedFile) string {
	t.Helper()
	dir := t.TempDir()
	for i, f := range files {
		writeFile(t, filepath.Join(dir, f.rel), f.size, base.Add(-time.Duration(i)*time.Minute))
	}
	return dir
}

type sizedFile struct {
	rel  string
	size int64
}

func totalOf(files []sizedFile) int64 {
	var n int64
	for _, f := range files {
		n += f.size
	}
	return n
}

func TestFSReadsEveryByteOnce(t *testing.T) {
	const chunk = 4 * Align
	files := []sizedFile{
		{"db/000042.sst", 10*chunk + 123}, // many chunks, read concurrently; not a multiple of the chunk
		{"db/empty", 0},
		{"raft/0000001.raftlog", 2 * chunk},
		{"raft/deeper/still/tiny", 1},
		{"chunk-minus-one", chunk - 1},
		{"unaligned", 5000},
	}
	dir := tree(t, files)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), 12345, base)
	for link, to := range map[string]string{"link-to-file": filepath.Join(outside, "secret"), "db/link-to-dir": outside} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint left by an earlier run is not data, even when checkpoints are off.
	writeFile(t, filepath.Join(dir, CheckpointName), 777, base)

	rec := newRecorder()
	var log bytes.Buffer
	sum, err := run(context.Background(), Options{FS: []string{dir}, Workers: 4, ChunkSize: chunk, Direct: true, Progress: &log, ProgressInterval: time.Millisecond}, rec.system())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rec.checkReadOnce(t, filepath.Join(dir, f.rel), f.size)
	}
	var want []string
	for _, f := range files {
		if f.size > 0 {
			want = append(want, filepath.Join(dir, f.rel))
		}
	}
	slices.Sort(want)
	if got := rec.opened(); !slices.Equal(got, want) {
		t.Errorf("opened %v\nwant   %v (no symlink followed, no checkpoint, no empty file)", got, want)
	}
	tg := sum.Targets[0]
	if tg.Path != dir || tg.Mode != FS || tg.Files != len(files) || tg.Bytes != totalOf(files) || !tg.Complete || tg.SkippedFiles != 0 {
		t.Errorf("target %+v, want %d files and %d bytes, complete", tg, len(files), totalOf(files))
	}
	if sum.Bytes != totalOf(files) || sum.Files != len(files) || !sum.Complete {
		t.Errorf("summary %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointName)); err != nil {
		t.Errorf("the old checkpoint is gone: %v", err)
	}
	if !strings.Contains(log.String(), "Reading 6 files") || !strings.Contains(log.String(), "Warmed up fs "+dir) {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestBlockReadsWholeDevice(t *testing.T) {
	// A regular file stands for a device.
	for _, size := range []int64{0, 1, 3*Align + 100, 64 * Align} {
		dev := filepath.Join(t.TempDir(), "xvdb")
		writeFile(t, dev, size, base)
		rec := newRecorder()
		sum, err := run(context.Background(), Options{Block: []string{dev}, Workers: 3, ChunkSize: 2 * Align, Direct: true}, rec.system())
		if err != nil {
			t.Fatal(err)
		}
		rec.checkReadOnce(t, dev, size)
		tg := sum.Targets[0]
		if tg.Mode != Block || tg.Device != dev || tg.Bytes != size || tg.Files != 1 || !tg.Complete {
			t.Errorf("size %d: target %+v", size, tg)
		}
	}
}

func TestDirectReads(t *testing.T) {
	dir := tree(t, []sizedFile{{"a", 3*Align + 7}, {"b", Align}})
	if !supportsDirect(dir, "b") {
		t.Skipf("the file system of %s refuses O_DIRECT", dir)
	}
	for _, direct := range []bool{true, false} {
		sum, err := Run(context.Background(), Options{FS: []string{dir}, Direct: direct})
		if err != nil {
			t.Fatal(err)
		}
		if tg := sum.Targets[0]; tg.Direct != direct || tg.Bytes != 4*Align+7 {
			t.Errorf("direct %v: target %+v", direct, tg)
		}
	}
}

// supportsDirect tells whether the file system of dir reads its file name with O_DIRECT.
func supportsDirect(dir, name string) bool {
	f, err := openFile(filepath.Join(dir, name), oDirect)
	if err != nil {
		return false
	}
	defer func() { _ = f.close() }()
	_, err = f.pread(alignedBuffer(Align), 0)
	return err == nil
}

func TestDirectFallback(t *testing.T) {
	files := []sizedFile{{"a", 3*Align + 7}, {"b", 5 * Align}, {"c", 1}, {"d/e", 2 * Align}}
	for _, tc := range []struct {
		name       string
		rec        *recorder
		wantDirect bool
	}{
		{"accepted", &recorder{fakeDirect: true}, true},
		{"open refuses O_DIRECT", &recorder{openErr: func(_ string, flags int) error {
			if flags&oDirect != 0 {
				return syscall.EINVAL
			}
			return nil
		}}, false},
		{"read refuses O_DIRECT", &recorder{fakeDirect: true, readErr: func(_ string, _ int64, direct bool) error {
			if direct {
				return syscall.EINVAL
			}
			return nil
		}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tree(t, files)
			rec := tc.rec
			rec.opens, rec.reads = map[string]int{}, map[string][][2]int64{}
			var log bytes.Buffer
			sum, err := run(context.Background(), Options{FS: []string{dir}, Workers: 4, ChunkSize: 2 * Align, Direct: true, Progress: &log}, rec.system())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				rec.checkReadOnce(t, filepath.Join(dir, f.rel), f.size)
			}
			if tg := sum.Targets[0]; tg.Direct != tc.wantDirect || tg.Bytes != totalOf(files) || !tg.Complete {
				t.Errorf("target %+v, want direct %v", tg, tc.wantDirect)
			}
			n := strings.Count(log.String(), "with buffered I/O")
			if want := map[bool]int{true: 0, false: 1}[tc.wantDirect]; n != want {
				t.Errorf("%d fallback lines, want %d (once per target):\n%s", n, want, log.String())
			}
		})
	}
}

func TestCheckpointSkipsReadFiles(t *testing.T) {
	files := []sizedFile{{"db/1.sst", 3 * Align}, {"db/2.sst", Align + 1}, {"raft/1.log", 2}, {"raft/empty", 0}, {"LOCK", 10}}
	dir := tree(t, files)
	o := Options{FS: []string{dir}, Workers: 2, ChunkSize: Align, Direct: true, Checkpoint: true}

	first, err := run(context.Background(), o, newRecorder().system())
	if err != nil {
		t.Fatal(err)
	}
	if tg := first.Targets[0]; tg.Files != len(files) || tg.Bytes != totalOf(files) || tg.SkippedFiles != 0 {
		t.Fatalf("first run: %+v", tg)
	}

	rec := newRecorder()
	second, err := run(context.Background(), o, rec.system())
	if err != nil {
		t.Fatal(err)
	}
	if tg := second.Targets[0]; tg.Files != 0 || tg.Bytes != 0 || tg.SkippedFiles != len(files) || tg.SkippedBytes != totalOf(files) || !tg.Complete {
		t.Errorf("second run: %+v, want every file skipped", tg)
	}
	if got := rec.opened(); len(got) != 0 {
		t.Errorf("second run opened %v", got)
	}

	changed := filepath.Join(dir, "db/2.sst")
	writeFile(t, changed, Align+1, base.Add(time.Hour)) // same size, newer
	rec = newRecorder()
	third, err := run(context.Background(), o, rec.system())
	if err != nil {
		t.Fatal(err)
	}
	if tg := third.Targets[0]; tg.Files != 1 || tg.Bytes != Align+1 || tg.SkippedFiles != len(files)-1 {
		t.Errorf("after a change: %+v, want only the changed file read", tg)
	}
	if got := rec.opened(); !slices.Equal(got, []string{changed}) {
		t.Errorf("after a change, opened %v, want only %s", got, changed)
	}
	rec.checkReadOnce(t, changed, Align+1)

	// A removed file leaves the checkpoint at the next run.
	if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), o, newRecorder().system()); err != nil {
		t.Fatal(err)
	}
	if cp, err := loadCheckpoint(dir); len(cp) != len(files)-1 || err != nil {
		t.Errorf("checkpoint after a removal: %v, %v", cp, err)
	}

	o.Checkpoint = false
	fourth, err := run(context.Background(), o, newRecorder().system())
	if err != nil {
		t.Fatal(err)
	}
	if tg := fourth.Targets[0]; tg.Files != len(files)-1 || tg.SkippedFiles != 0 {
		t.Errorf("without checkpoint: %+v, want every file read", tg)
	}
}

func TestCancelledRunResumes(t *testing.T) {
	var files []sizedFile
	for _, name := range []string{"f9", "f8", "f7", "f6", "f5", "f4", "f3", "f2", "f1", "f0"} { // newest first
		files = append(files, sizedFile{name, 2 * Align})
	}
	dir := tree(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	stopAt := filepath.Join(dir, "f6")
	rec.readErr = func(path string, off int64, _ bool) error {
		if path == stopAt && off == 0 {
			cancel() // as SIGTERM would, in the middle of f6
		}
		return nil
	}
	o := Options{FS: []string{dir}, Workers: 1, ChunkSize: Align, Direct: true, Checkpoint: true}
	first, err := run(ctx, o, rec.system())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	tg := first.Targets[0]
	// One worker reads in order; it stops after the chunk it is reading: f6 is not finished.
	if tg.Complete || tg.Files != 3 || first.Complete {
		t.Fatalf("cancelled run: %+v, want f9, f8 and f7 read and not the rest", tg)
	}
	cp, err := loadCheckpoint(dir)
	if err != nil || len(cp) != tg.Files {
		t.Fatalf("checkpoint after cancel: %v, %v; want the %d files read", cp, err, tg.Files)
	}

	rec = newRecorder()
	second, err := run(context.Background(), o, rec.system())
	if err != nil {
		t.Fatal(err)
	}
	tg2 := second.Targets[0]
	if tg2.SkippedFiles != tg.Files || tg2.Files != len(files)-tg.Files || tg2.Bytes+tg2.SkippedBytes != totalOf(files) {
		t.Errorf("resumed run: %+v, want the %d files of the cancelled run skipped", tg2, tg.Files)
	}
	for _, p := range rec.opened() {
		if _, ok := cp[filepath.Base(p)]; ok {
			t.Errorf("resumed run read %s again", p)
		}
	}
}

func TestCheckpointSavedWhileReading(t *testing.T) {
	files := []sizedFile{{"a", Align}, {"b", Align}, {"c", Align}, {"last", Align}}
	dir := tree(t, files)
	release := make(chan struct{})
	rec := newRecorder()
	rec.readErr = func(path string, _ int64, _ bool) error {
		if filepath.Base(path) == "last" {
			<-release // a kill here would leave only the periodic checkpoint
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := run(context.Background(), Options{FS: []string{dir}, Workers: 1, ChunkSize: Align, Direct: true, Checkpoint: true, ProgressInterval: 5 * time.Millisecond}, rec.system())
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cp, _ := loadCheckpoint(dir)
		if len(cp) == 3 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("no periodic checkpoint of the 3 files read: %v", cp)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cp, err := loadCheckpoint(dir); len(cp) != 4 || err != nil {
		t.Errorf("final checkpoint: %v, %v; want 4 files", cp, err)
	}
}

func TestReadErrorNamesFileAndOffset(t *testing.T) {
	dir := tree(t, []sizedFile{{"ok", 2 * Align}, {"bad", 3 * Align}})
	dev := filepath.Join(t.TempDir(), "xvdf")
	writeFile(t, dev, 3*Align, base)
	for _, tc := range []struct {
		name, path string
		o          Options
	}{
		{"file", filepath.Join(dir, "bad"), Options{FS: []string{dir}, Checkpoint: true}},
		{"device", dev, Options{Block: []string{dev}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			rec.readErr = func(path string, off int64, _ bool) error {
				if path == tc.path && off == Align {
					return syscall.EIO
				}
				return nil
			}
			tc.o.Workers, tc.o.ChunkSize, tc.o.Direct = 2, Align, true
			sum, err := run(context.Background(), tc.o, rec.system())
			want := "read " + tc.path + " at offset 4096: input/output error"
			if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want EIO and %q", err, want)
			}
			if tg := sum.Targets[0]; tg.Complete || sum.Complete || !strings.Contains(tg.Error, want) {
				t.Errorf("target %+v, want incomplete with the error", tg)
			}
		})
	}
	// The file read before the failure is in the checkpoint, the failed one is not.
	cp, err := loadCheckpoint(dir)
	if _, bad := cp["bad"]; err != nil || bad {
		t.Errorf("checkpoint %v, %v", cp, err)
	}
}

// TestUnreadableFile: a file or directory of TiKV's that the warm-up may not read fails the
// run, naming it and the user (run as a non-root user: root reads whatever the mode).
func TestUnreadableFile(t *testing.T) {
	if !asNonRoot(t) {
		return
	}
	for _, locked := range []string{"locked", "sub"} { // a file, a directory
		t.Run(locked, func(t *testing.T) {
			dir := tree(t, []sizedFile{{"ok", Align}, {"locked", Align}, {"sub/x", Align}})
			path := filepath.Join(dir, locked)
			if err := os.Chmod(path, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(path, 0o755) }) // so that TempDir can remove it
			_, err := Run(context.Background(), Options{FS: []string{dir}, Direct: true})
			if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, ErrNotReadable) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want permission denied, ErrNotReadable, naming %s", err, path)
			}
		})
	}
}

func TestVanishedFileIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(gone string) *recorder
	}{
		{"at open", func(gone string) *recorder {
			rec := newRecorder()
			rec.openErr = func(path string, _ int) error {
				if path == gone {
					return syscall.ENOENT // deleted by TiKV after the listing
				}
				return nil
			}
			return rec
		}},
		{"at the buffered reopen after O_DIRECT reads failed", func(gone string) *recorder {
			rec := newRecorder()
			rec.fakeDirect = true
			// The 8 chunks of the file fail together, so that they all fall back.
			var arrived atomic.Int32
			all := make(chan struct{})
			rec.readErr = func(path string, _ int64, direct bool) error {
				if !direct {
					return nil
				}
				if path == gone {
					if arrived.Add(1) == 8 {
						close(all)
					}
					select {
					case <-all:
					case <-time.After(time.Second):
					}
				}
				return syscall.EINVAL
			}
			rec.openErr = func(path string, flags int) error {
				if path == gone && flags&oDirect == 0 {
					return syscall.ENOENT
				}
				return nil
			}
			return rec
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tree(t, []sizedFile{{"kept", Align}, {"compacted", 8 * Align}})
			o := Options{FS: []string{dir}, Workers: 8, ChunkSize: Align, Direct: true, Checkpoint: true}
			sum, err := run(context.Background(), o, tc.rec(filepath.Join(dir, "compacted")).system())
			if err != nil {
				t.Fatal(err)
			}
			if tg := sum.Targets[0]; tg.Files != 1 || tg.VanishedFiles != 1 || tg.Bytes != Align || !tg.Complete {
				t.Errorf("target %+v, want the vanished file skipped", tg)
			}
			again, err := run(context.Background(), o, newRecorder().system())
			if err != nil {
				t.Fatal(err)
			}
			if tg := again.Targets[0]; tg.Files != 1 || tg.SkippedFiles != 1 || tg.Bytes != 8*Align {
				t.Errorf("re-run %+v: a vanished file is not recorded as read", tg)
			}
		})
	}
}

func TestSeveralTargets(t *testing.T) {
	a := tree(t, []sizedFile{{"x", 3 * Align}, {"y", 1}})
	b := tree(t, []sizedFile{{"z", Align}})
	dev := filepath.Join(t.TempDir(), "xvdc")
	writeFile(t, dev, 5*Align+3, base)
	sum, err := Run(context.Background(), Options{FS: []string{a, b}, Block: []string{dev}, Workers: 2, ChunkSize: Align, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Targets) != 3 || sum.Files != 4 || sum.Bytes != 3*Align+1+Align+5*Align+3 || !sum.Complete {
		t.Errorf("summary %+v", sum)
	}
}

func TestBadTargets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, 10, base)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"nothing", Options{}, "nothing to warm up"},
		{"missing directory", Options{FS: []string{filepath.Join(dir, "missing")}}, "missing: no such file or directory"},
		{"fs of a file", Options{FS: []string{file}}, "is not a directory"},
		{"same directory through a link", Options{FS: []string{dir, link}}, "are the same target"},
		{"same device twice", Options{Block: []string{file, file}}, "are the same target"},
		{"block of a directory that is not a mount point", Options{Block: []string{dir}}, "is not a mount point: block mode reads the whole device mounted there; use --fs " + dir},
		{"block of a character device", Options{Block: []string{"/dev/null"}}, "/dev/null is not a block device, a regular file or a mount point"},
		{"missing device", Options{Block: []string{filepath.Join(dir, "xvdz")}}, "xvdz: no such file or directory"},
		{"unaligned chunk", Options{FS: []string{dir}, ChunkSize: 1000}, "want a positive multiple of 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestFailureStopsOtherTargets: a read error in one target fails the run and stops the
// others; the error is the failure, not the others' cancellation.
func TestFailureStopsOtherTargets(t *testing.T) {
	bad := tree(t, []sizedFile{{"bad", 2 * Align}})
	dev := filepath.Join(t.TempDir(), "xvdg")
	writeFile(t, dev, 64*Align, base)
	failed := make(chan struct{})
	var once sync.Once
	rec := newRecorder()
	rec.readErr = func(path string, off int64, _ bool) error {
		switch {
		case path == filepath.Join(bad, "bad"):
			once.Do(func() { close(failed) })
			return syscall.EIO
		case path == dev && off == 0:
			<-failed // the device is still being read when the file fails
		}
		return nil
	}
	sum, err := run(context.Background(), Options{FS: []string{bad}, Block: []string{dev}, Workers: 1, ChunkSize: Align, Direct: true}, rec.system())
	if !errors.Is(err, syscall.EIO) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the EIO alone", err)
	}
	if tg := sum.Targets[1]; tg.Complete || tg.Bytes >= 64*Align || !strings.Contains(tg.Error, "context canceled") {
		t.Errorf("device target %+v, want it stopped", tg)
	}
}

// TestBlockCheckpointResumes: a Block target (a regular file standing for the device) keeps
// its checkpoint in CheckpointDir by segment; a run stopped in the third segment leaves the
// first two recorded, the next run reads only from the third on, a run after a complete one
// reads nothing, and a device of another size is read whole again.
func TestBlockCheckpointResumes(t *testing.T) {
	seg := int64(Align * segmentChunks)
	size := 3*seg + 5*Align + 100 // four segments, the last one short and unaligned
	dev := filepath.Join(t.TempDir(), "xvdf")
	writeFile(t, dev, size, base)
	cpDir := t.TempDir()
	o := Options{Block: []string{dev}, Workers: 1, ChunkSize: Align, Direct: true, Checkpoint: true, CheckpointDir: cpDir}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	rec.readErr = func(_ string, off int64, _ bool) error {
		if off == 2*seg {
			cancel() // as SIGTERM would, at the start of the third segment
		}
		return nil
	}
	first, err := run(ctx, o, rec.system())
	if !errors.Is(err, context.Canceled) || first.Targets[0].Complete {
		t.Fatalf("stopped run: %v, %+v", err, first.Targets[0])
	}
	name := BlockCheckpointName + strings.ReplaceAll(dev, "/", "_")
	cp, err := loadCheckpointFile(cpDir, name)
	if err != nil || len(cp) != 2 || cp["segment@0"] != (stamp{Size: seg, MTime: size}) || cp[fmt.Sprintf("segment@%d", seg)] != (stamp{Size: seg, MTime: size}) {
		t.Fatalf("checkpoint after the stop: %v, %v; want the first two segments", cp, err)
	}

	rec = newRecorder()
	second, err := run(context.Background(), o, rec.system())
	if err != nil {
		t.Fatal(err)
	}
	tg := second.Targets[0]
	if !tg.Complete || tg.Files != 1 || tg.SkippedFiles != 2 || tg.SkippedBytes != 2*seg || tg.Bytes != size-2*seg {
		t.Errorf("resumed run: %+v, want the first two segments skipped and the rest read", tg)
	}
	rec.mu.Lock()
	reads := slices.Clone(rec.reads[dev])
	rec.mu.Unlock()
	for _, rd := range reads {
		if rd[0] < 2*seg {
			t.Errorf("resumed run read [%d, %d) again", rd[0], rd[1])
		}
	}
	rec.checkReadOnceFrom(t, dev, 2*seg, size)

	rec = newRecorder()
	third, err := run(context.Background(), o, rec.system())
	if err != nil || third.Targets[0].Bytes != 0 || third.Targets[0].SkippedBytes != size || len(rec.reads[dev]) != 0 {
		t.Errorf("run after a complete one: %v, %+v, %d reads; want nothing read", err, third.Targets[0], len(rec.reads[dev]))
	}

	writeFile(t, dev, size+Align, base) // another device (size) under the same path
	rec = newRecorder()
	fourth, err := run(context.Background(), o, rec.system())
	if err != nil || fourth.Targets[0].SkippedBytes != 0 || fourth.Targets[0].Bytes != size+Align {
		t.Errorf("a device of another size: %v, %+v; want it read whole", err, fourth.Targets[0])
	}
	rec.checkReadOnce(t, dev, size+Align)
}

// TestBlockWithoutCheckpointDir: a device given itself without CheckpointDir keeps no
// checkpoint (said in the log); a mount point would keep it at its root.
func TestBlockWithoutCheckpointDir(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "xvdg")
	writeFile(t, dev, 3*Align, base)
	var log strings.Builder
	if _, err := run(context.Background(), Options{Block: []string{dev}, ChunkSize: Align, Checkpoint: true, Progress: &log}, newRecorder().system()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "No checkpoint for "+dev) {
		t.Errorf("log does not say there is no checkpoint:\n%s", log.String())
	}
	if names, _ := filepath.Glob(filepath.Join(dir, BlockCheckpointName+"*")); len(names) != 0 {
		t.Errorf("checkpoints written: %v", names)
	}
}

// checkReadOnceFrom checks that the reads of path cover [from, size) without gap or overlap.
func (r *recorder) checkReadOnceFrom(t *testing.T, path string, from, size int64) {
	t.Helper()
	r.mu.Lock()
	reads := slices.Clone(r.reads[path])
	r.mu.Unlock()
	slices.SortFunc(reads, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	at := from
	for _, rd := range reads {
		if rd[0] != at {
			t.Errorf("%s: read [%d, %d) after [%d, %d): a gap or an overlap", path, rd[0], rd[1], from, at)
		}
		at = rd[1]
	}
	if at != size {
		t.Errorf("%s: read up to %d, want its size %d", path, at, size)
	}
}
