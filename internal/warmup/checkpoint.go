package warmup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CheckpointName is the file, at the root of each FS target, that records the files fully
// read. It is never read as data.
const CheckpointName = ".fedbr-warmup-checkpoint"

// BlockCheckpointName is the file that records the segments of a Block target fully read: at
// the root of the mount point given, or in Options.CheckpointDir for a device or a regular
// file given itself, suffixed with that path as given, cleaned (slashes as '_'). A segment's
// entry is keyed "segment@OFFSET" and stamped with its length and the device's size in place
// of a modification time, so that a device of another size is read whole again.
const BlockCheckpointName = ".fedbr-warmup-block-checkpoint"

// tempSuffix starts the name of a checkpoint being written, renamed over CheckpointName when
// complete.
const tempSuffix = ".tmp"

// checkpointVersion changes when the format does; another version is ignored.
const checkpointVersion = 1

// checkpointFile is the checkpoint's JSON.
type checkpointFile struct {
	Version int              `json:"version"`
	Files   map[string]stamp `json:"files"`
}

// stamp identifies the version of a file that was read.
type stamp struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime"` // unix nanoseconds
}

// loadCheckpoint returns the files recorded in root's checkpoint: none if there is no
// checkpoint, and an error (the caller reads every file) if it cannot be used.
func loadCheckpoint(root string) (map[string]stamp, error) {
	return loadCheckpointFile(root, CheckpointName)
}

// loadCheckpointFile is loadCheckpoint of the checkpoint called name in dir.
func loadCheckpointFile(dir, name string) (map[string]stamp, error) {
	data, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: the checkpoint in the warm-up's own target or --checkpoint-dir
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCheckpoint(data)
}

func parseCheckpoint(data []byte) (map[string]stamp, error) {
	var cf checkpointFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return nil, fmt.Errorf("parse checkpoint: %w", err)
	}
	if cf.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint version %d: want %d", cf.Version, checkpointVersion)
	}
	return cf.Files, nil
}

// writeCheckpoint replaces root's checkpoint atomically: a reader (the next run, after a
// kill at any point) sees the previous checkpoint or this one, never a partial file.
func writeCheckpoint(root string, files map[string]stamp) (err error) {
	return writeCheckpointFile(root, CheckpointName, files)
}

// writeCheckpointFile is writeCheckpoint of the checkpoint called name in dir.
func writeCheckpointFile(dir, name string, files map[string]stamp) (err error) {
	data, err := json.Marshal(checkpointFile{Version: checkpointVersion, Files: files})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+tempSuffix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// checkpointer collects the files (FS) or segments (Block) fully read by one target and saves
// them in name under root.
type checkpointer struct {
	root, name string
	log        *logger

	mu    sync.Mutex
	files map[string]stamp
	dirty bool // files changed since the last save

	saveMu sync.Mutex // one save at a time; guards broken
	broken bool       // a save failed: no more attempts
}

// newCheckpointer starts from the files an earlier run read; dirty says that the
// checkpoint on disk records others (files changed or removed since) and must be rewritten.
func newCheckpointer(root string, read []entry, dirty bool, log *logger) *checkpointer {
	c := &checkpointer{root: root, name: CheckpointName, log: log, files: map[string]stamp{}, dirty: dirty}
	for _, e := range read {
		c.files[e.Rel] = stamp{Size: e.Size, MTime: e.MTime}
	}
	return c
}

func (c *checkpointer) add(e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[e.Rel] = stamp{Size: e.Size, MTime: e.MTime}
	c.dirty = true
}

// save writes the checkpoint if files changed. A failure (a read-only volume) is logged once
// and stops further saves: the warm-up itself goes on.
func (c *checkpointer) save() {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if c.broken {
		return
	}
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return
	}
	files := maps.Clone(c.files)
	c.dirty = false
	c.mu.Unlock()
	if err := writeCheckpointFile(c.root, c.name, files); err != nil {
		c.broken = true
		c.log.logf("Not writing the checkpoint %s any more, a restarted run will read everything again: %v", filepath.Join(c.root, c.name), err)
	}
}

// every saves every d until the returned stop is called.
func (c *checkpointer) every(d time.Duration) (stop func()) {
	return tick(d, func(time.Time) { c.save() })
}
