// Package volumelock is the lock protocol between processes that write into a lab volume
// (a directory standing for an EBS volume, or the mount point of an ext4 image volume) and the
// AWS double that snapshots it. An image volume's capture also freezes its file system
// (awsdouble, VolumesExt4); the lock keeps a logical write of a lab writer whole across it.
//
// The protocol makes a point-in-time capture possible without copying data:
//
//   - Writers only append to files, or write a new file and rename it into place. They never
//     truncate or overwrite bytes of an existing file, because a snapshot shares the file's
//     inode (hard link) and records only its length.
//   - Every append + fsync (or write + rename) is done while holding a shared flock on
//     <volume>/.lock, so a capture never sees half of one logical write.
//   - A capture takes exclusive flocks on all volumes of the snapshot set, in sorted order,
//     records every file's length, hard-links the files and releases. The exclusive window is
//     short; writers only wait.
//   - Names starting with "." are private to the volume (the lock file, temporary files) and
//     are not part of the volume image.
//
// Writer implements the writer side; Exclusive is the capture side.
package volumelock

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// LockFile is the name of the lock file inside each volume directory.
const LockFile = ".lock"

// Lock is a set of held flocks; Unlock releases all of them.
type Lock struct {
	files []*os.File
}

// Shared takes the writer (shared) lock of one volume directory, blocking while a capture
// holds it exclusively.
func Shared(dir string) (*Lock, error) {
	return lock(syscall.LOCK_SH, dir)
}

// Exclusive takes the capture (exclusive) locks of all given volume directories in sorted
// order, so two captures of overlapping sets never deadlock.
func Exclusive(dirs ...string) (*Lock, error) {
	sorted := slices.Clone(dirs)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return lock(syscall.LOCK_EX, sorted...)
}

func lock(how int, dirs ...string) (*Lock, error) {
	l := &Lock{}
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			_ = l.Unlock()
			return nil, fmt.Errorf("open lock of volume %s: %w", dir, err)
		}
		if err := flock(f, how); err != nil {
			_ = f.Close()
			_ = l.Unlock()
			return nil, fmt.Errorf("flock volume %s: %w", dir, err)
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

// Unlock releases every lock held; closing the descriptor drops the flock.
func (l *Lock) Unlock() error {
	var first error
	for i := len(l.files) - 1; i >= 0; i-- {
		if err := l.files[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	l.files = nil
	return first
}

// Writer writes into one volume directory following the protocol.
type Writer struct {
	dir string
}

// NewWriter returns a Writer for the volume directory dir.
func NewWriter(dir string) *Writer {
	return &Writer{dir: dir}
}

// Dir is the volume directory.
func (w *Writer) Dir() string { return w.dir }

// Append appends p to the file name (relative to the volume, created if missing) and fsyncs it,
// all under the shared lock: once Append returns, a capture contains p entirely, and a capture
// that started earlier contains none of it.
func (w *Writer) Append(name string, p []byte) error {
	l, err := Shared(w.dir)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock() }()
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if _, err := f.Write(p); err != nil {
		_ = f.Close()
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

// Replace atomically replaces the file name with p (write a temporary file, fsync, rename),
// under the shared lock. Use it for rewrites such as compaction or dropping a torn tail:
// never truncate a file in place.
func (w *Writer) Replace(name string, p []byte) error {
	l, err := Shared(w.dir)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock() }()
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// 0644 as the files TiKV writes (CreateTemp makes 0600): a warm-up running as another
	// user reads them.
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if _, err := tmp.Write(p); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// Remove deletes the file name from the volume under the shared lock (snapshots that already
// hold it keep their hard link).
func (w *Writer) Remove(name string) error {
	l, err := Shared(w.dir)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock() }()
	if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// File is one append-only file of a volume kept open across appends, for writers that append
// often (a log). Each Append holds the volume's shared lock for its write and fsync.
type File struct {
	lock *os.File
	f    *os.File
}

// Open opens (creating) the file name of the volume for appending.
func (w *Writer) Open(name string) (*File, error) {
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	lock, err := os.OpenFile(filepath.Join(w.dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock of volume %s: %w", w.dir, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &File{lock: lock, f: f}, nil
}

// Append writes p at the end of the file and fsyncs it under the shared lock.
func (f *File) Append(p []byte) error {
	if err := flock(f.lock, syscall.LOCK_SH); err != nil {
		return fmt.Errorf("lock for append to %s: %w", f.f.Name(), err)
	}
	defer func() { _ = flock(f.lock, syscall.LOCK_UN) }()
	if _, err := f.f.Write(p); err != nil {
		return fmt.Errorf("append to %s: %w", f.f.Name(), err)
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (f *File) Close() error {
	err := f.f.Close()
	if lerr := f.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// Private reports whether a path relative to a volume is outside the volume image (any path
// element starting with ".").
func Private(rel string) bool {
	for _, elem := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(elem, ".") && elem != "." {
			return true
		}
	}
	return false
}
