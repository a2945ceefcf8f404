package warmup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// entry is a regular file found under an FS target.
type entry struct {
	Rel   string // path relative to the target's root: the checkpoint's key
	Size  int64
	MTime int64 // modification time, unix nanoseconds
}

// fsRoot checks that dir, what the caller calls it, is a directory and returns it with
// symlinks resolved: the path given may be a link (a volume's mount point behind one), the
// links under it are not followed.
func fsRoot(what, dir string) (string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s %s is not a directory (a device is read with --block)", what, dir)
	}
	return filepath.Abs(root)
}

// list returns the regular files under root, without following symlinks and without
// checkpoint files, counting them in found as it goes. A directory the warm-up may not read is
// skipped with a log line when it is not TiKV's (permissionDenied), and fails the listing when
// it is.
func list(ctx context.Context, root string, found *atomic.Int64, log *logger) ([]entry, error) {
	var files []entry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != root && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while listing
			}
			rel, relErr := filepath.Rel(root, path)
			if path == root || relErr != nil || !errors.Is(err, fs.ErrPermission) {
				return err
			}
			if err := permissionDenied(rel, err); err != nil {
				return err
			}
			log.logf("Skipping %s: not TiKV's, and user %d may not read it (%v)", path, os.Geteuid(), err)
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || isCheckpoint(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, entry{Rel: rel, Size: info.Size(), MTime: info.ModTime().UnixNano()})
		found.Add(1)
		return nil
	})
	return files, err
}

// notTiKVs tells the entries of a TiKV volume that TiKV did not write, by their path under the
// volume's root (a target's root): lost+found, which mke2fs creates root's only (0700) in every
// new ext4 file system. Everything else on the volume is TiKV's data.
func notTiKVs(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return first == lostFound
}

// lostFound is the directory mke2fs makes at the root of an ext4 file system.
const lostFound = "lost+found"

// ErrNotReadable marks a file of TiKV's that the warm-up may not read.
var ErrNotReadable = errors.New("TiKV's files must be readable by the warm-up")

// permissionDenied decides about a path, rel under a target's root, that the warm-up may not
// read (err is a permission error): nil skips it (not TiKV's, see notTiKVs: the caller logs
// it), any other error fails the run, naming the user the warm-up runs as.
func permissionDenied(rel string, err error) error {
	if notTiKVs(rel) {
		return nil
	}
	return fmt.Errorf("%w: %w (the warm-up runs as user %d, group %d; TiKV writes its files 0644 in 0755 directories, readable by every user)",
		err, ErrNotReadable, os.Geteuid(), os.Getegid())
}

// isCheckpoint tells a checkpoint file, or one being written, from data.
func isCheckpoint(name string) bool {
	return name == CheckpointName || strings.HasPrefix(name, CheckpointName+tempSuffix) ||
		strings.HasPrefix(name, BlockCheckpointName)
}

// order sorts files newest first, ties by path: TiKV reads its newest SST and WAL files
// first, so they are warmed first.
func order(files []entry) {
	slices.SortFunc(files, func(a, b entry) int {
		if c := cmp.Compare(b.MTime, a.MTime); c != 0 {
			return c
		}
		return strings.Compare(a.Rel, b.Rel)
	})
}

// pending splits files into those to read and those an earlier run read fully (recorded in
// the checkpoint with the same size and modification time: a changed file is read again).
func pending(files []entry, done map[string]stamp) (todo, skipped []entry) {
	for _, e := range files {
		if s, ok := done[e.Rel]; ok && s == (stamp{Size: e.Size, MTime: e.MTime}) {
			skipped = append(skipped, e)
		} else {
			todo = append(todo, e)
		}
	}
	return todo, skipped
}
