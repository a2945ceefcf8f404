package warmup

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Phases of a target, for the progress lines; 0 is not started yet.
const (
	phaseListing int32 = iota + 1
	phaseReading
	phaseDone
)

// target is one --fs directory or --block device being warmed up. The counters are read by
// the progress goroutine while the workers update them.
type target struct {
	path   string
	mode   Mode
	root   string // FS: the directory, symlinks resolved
	device string // Block: the device or file read
	// cpDir and cpName are where the target's checkpoint is kept (a Block target's: nowhere when
	// cpDir is empty).
	cpDir, cpName string

	direct   bool        // reads start with O_DIRECT
	buffered atomic.Bool // some file fell back to buffered reads
	fellBack sync.Once   // logs the first fallback

	phase     atomic.Int32
	listed    atomic.Int64 // files found so far while listing
	readStart atomic.Int64 // unix nanoseconds when reading started
	total     atomic.Int64 // bytes to read in this run
	bytes     atomic.Int64 // bytes read
	doneFiles atomic.Int64
	vanished  atomic.Int64
	// unreadable are the listed files skipped as not TiKV's and not readable.
	unreadable atomic.Int64

	// Set before reading, read after the run.
	skipped      int
	skippedBytes int64
	elapsed      time.Duration
	err          error
}

// run reads the target and records the outcome in t.err.
func (t *target) run(ctx context.Context, o Options, sys system, log *logger) error {
	start := time.Now()
	t.direct = o.Direct && oDirect != 0
	if t.mode == FS {
		t.err = t.runFS(ctx, o, sys, log)
	} else {
		t.err = t.runBlock(ctx, o, sys, log)
	}
	t.elapsed = time.Since(start)
	t.phase.Store(phaseDone)
	read, total := t.bytes.Load(), t.total.Load()
	if t.err != nil {
		log.logf("Stopped warming up %s %s after %s of %s: %v", t.mode, t.path, formatBytes(read), formatBytes(total), t.err)
		t.err = fmt.Errorf("warm up %s %s: stopped after %s of %s: %w", t.mode, t.path, formatBytes(read), formatBytes(total), t.err)
		return t.err
	}
	log.logf("Warmed up %s %s: %s in %.1fs (%.1f MiB/s)", t.mode, t.path, formatBytes(read), t.elapsed.Seconds(), mibPerSecond(read, t.elapsed))
	return nil
}

func (t *target) runFS(ctx context.Context, o Options, sys system, log *logger) error {
	log.logf("Listing the files of %s", t.path)
	t.phase.Store(phaseListing)
	entries, err := list(ctx, t.root, &t.listed, log)
	if err != nil {
		return fmt.Errorf("list the files: %w", err)
	}
	todo, skipped := entries, []entry(nil)
	var cp *checkpointer
	if o.Checkpoint {
		prev, err := loadCheckpointFile(t.cpDir, t.cpName)
		if err != nil {
			log.logf("Ignoring the checkpoint of %s, every file is read: %v", t.path, err)
		}
		todo, skipped = pending(entries, prev)
		cp = newCheckpointer(t.cpDir, skipped, len(prev) != len(skipped), log)
		cp.name = t.cpName
		// Saved at the end also after a failure or a cancellation, so that a re-run resumes;
		// the periodic saves (started here, stopped first) cover a kill without a chance.
		defer cp.save()
		defer cp.every(o.ProgressInterval)()
	}
	order(todo)
	t.skipped = len(skipped)
	t.skippedBytes = totalSize(skipped)
	t.total.Store(totalSize(todo))
	log.logf("Reading %d files (%s) of %s, newest first; %d files (%s) were read by an earlier run",
		len(todo), formatBytes(t.total.Load()), t.path, t.skipped, formatBytes(t.skippedBytes))
	files := make([]*fileState, len(todo))
	for i, e := range todo {
		files[i] = newFileState(e, filepath.Join(t.root, e.Rel), o.ChunkSize)
	}
	r := &reader{t: t, sys: sys, log: log, chunk: o.ChunkSize, flags: syscall.O_NOFOLLOW}
	if cp != nil {
		r.onDone = func(s *fileState) { cp.add(s.entry) }
	}
	return r.run(ctx, o.Workers, files)
}

// segmentChunks is the length of a Block target's segment in chunks: the unit its checkpoint
// records (256 MiB with the default chunk).
const segmentChunks = 256

// runBlock reads the device in segments of segmentChunks chunks, in order; with a checkpoint,
// the segments fully read are recorded and a later run over a device of the same size skips
// them.
func (t *target) runBlock(ctx context.Context, o Options, sys system, log *logger) error {
	f, err := sys.open(t.device, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", t.device, err)
	}
	size, err := f.size()
	_ = f.close()
	if err != nil {
		return fmt.Errorf("size of %s: %w", t.device, err)
	}
	seg := o.ChunkSize * segmentChunks
	var prev map[string]stamp
	useCP := o.Checkpoint && t.cpDir != ""
	if o.Checkpoint && !useCP {
		log.logf("No checkpoint for %s: a device given itself keeps its checkpoint in --checkpoint-dir, which is not set", t.path)
	}
	if useCP {
		if prev, err = loadCheckpointFile(t.cpDir, t.cpName); err != nil {
			log.logf("Ignoring the checkpoint of %s, the whole device is read: %v", t.path, err)
		}
	}
	var todo []*fileState
	var done []entry
	for off := int64(0); off < size; off += seg {
		e := entry{Rel: fmt.Sprintf("segment@%d", off), Size: min(seg, size-off), MTime: size}
		if st, ok := prev[e.Rel]; ok && st == (stamp{Size: e.Size, MTime: e.MTime}) {
			done = append(done, e)
			continue
		}
		s := newFileState(e, t.device, o.ChunkSize)
		s.base = off
		todo = append(todo, s)
	}
	t.skipped, t.skippedBytes = len(done), totalSize(done)
	t.total.Store(size - t.skippedBytes)
	log.logf("Reading %s (%s) of %s in %d segments; %d segments (%s) were read by an earlier run",
		t.device, formatBytes(size-t.skippedBytes), t.path, len(todo), len(done), formatBytes(t.skippedBytes))
	r := &reader{t: t, sys: sys, log: log, chunk: o.ChunkSize}
	if useCP {
		cp := newCheckpointer(t.cpDir, done, len(prev) != len(done), log)
		cp.name = t.cpName
		defer cp.save()
		defer cp.every(o.ProgressInterval)()
		r.onDone = func(s *fileState) { cp.add(s.entry) }
	}
	err = r.run(ctx, o.Workers, todo)
	// A device read is one file, however many segments: counted once, when it is all read.
	t.doneFiles.Store(0)
	if err == nil {
		t.doneFiles.Store(1)
	}
	return err
}

func (t *target) result() Target {
	r := Target{
		Path:            t.path,
		Mode:            t.mode,
		Device:          t.device,
		Files:           int(t.doneFiles.Load()),
		Bytes:           t.bytes.Load(),
		SkippedFiles:    t.skipped,
		SkippedBytes:    t.skippedBytes,
		VanishedFiles:   int(t.vanished.Load()),
		UnreadableFiles: int(t.unreadable.Load()),
		Seconds:         t.elapsed.Seconds(),
		MBPerSecond:     mibPerSecond(t.bytes.Load(), t.elapsed),
		Direct:          t.direct && !t.buffered.Load(),
		Complete:        t.err == nil,
	}
	if t.err != nil {
		r.Error = t.err.Error()
	}
	return r
}

func totalSize(es []entry) int64 {
	var n int64
	for _, e := range es {
		n += e.Size
	}
	return n
}
