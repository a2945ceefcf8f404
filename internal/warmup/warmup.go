// Package warmup reads every block of volumes restored from EBS snapshots once. Such a volume
// is loaded lazily from S3: the first read of each block pays a large latency, and TiKV would
// pay it on its first reads. Warm-up pays it instead, before or beside TiKV, either file by
// file (FS mode: the newest files first, remembered in a checkpoint across restarts) or for a
// whole block device (Block mode). Reads use O_DIRECT so that the page cache is not filled
// with the whole volume.
package warmup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/podenv"
)

// Mode is how a target is read.
type Mode string

// Modes.
const (
	// FS reads every regular file under a directory, newest first.
	FS Mode = "fs"
	// Block reads a whole device from offset 0 to its size.
	Block Mode = "block"
)

// Align is the alignment O_DIRECT needs of offsets, lengths and buffers: a page, and a
// multiple of every EBS device's logical block size. ChunkSize must be a multiple of it.
const Align = 4096

// Defaults of the zero Options fields.
const (
	DefaultWorkers          = 32
	DefaultChunkSize        = 1 << 20
	DefaultProgressInterval = 10 * time.Second
)

// Options configure a warm-up run.
type Options struct {
	// FS are directories whose regular files are read.
	FS []string
	// Block are block devices (or regular files standing for them), or the mount points of
	// block devices, read whole.
	Block []string
	// Workers is the number of concurrent reads per target (each target is a volume with its
	// own throughput); 0 means DefaultWorkers.
	Workers int
	// ChunkSize is the length of one read, a positive multiple of Align; 0 means
	// DefaultChunkSize.
	ChunkSize int64
	// Direct reads with O_DIRECT. A file whose file system refuses it is read buffered.
	Direct bool
	// Checkpoint records the fully read files of each FS target in CheckpointName at its root
	// (in CheckpointDir when set), and skips them when they are unchanged in the next run (a
	// restarted pod resumes). A Block target records its segments read the same way
	// (BlockCheckpointName): at the root of a mount point, in CheckpointDir for a device or
	// regular file given itself.
	Checkpoint bool
	// CheckpointDir keeps the checkpoints of the FS targets, suffixed with the path as given,
	// cleaned (slashes as '_'), and of the Block targets given as a device or a regular file (a
	// directory that outlives the run, which a warm-up running as non-root may write: a volume's
	// root is root's); empty keeps the FS targets' at their roots and none for those Block ones.
	CheckpointDir string
	// Progress receives the log lines, one per Write; nil discards them.
	Progress io.Writer
	// ProgressInterval is the period of progress lines and checkpoint writes; 0 means
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// OnProgress, when set, receives the bytes read so far and the bytes to read over every
	// target with each progress line (the command reports them in its member's status.steps).
	OnProgress func(done, total int64)
	// WAL are directories whose RocksDB logs are verified (CheckWAL) before anything is
	// warmed up.
	WAL []string
	// ExitOnCorruption fails the run at the first WAL check that found corruption, before
	// anything is warmed up; without it corruption is only recorded in the summary.
	ExitOnCorruption bool
}

// Target is the result of one target.
type Target struct {
	Path string `json:"path"`
	Mode Mode   `json:"mode"`
	// Device is the device or file read in Block mode: Path itself, or the device mounted there.
	Device string `json:"device,omitempty"`
	// Files is the number of files fully read in this run (1 for a device).
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// SkippedFiles and SkippedBytes were fully read by an earlier run (from the checkpoint).
	SkippedFiles int   `json:"skippedFiles"`
	SkippedBytes int64 `json:"skippedBytes"`
	// VanishedFiles were removed between listing and reading (TiKV compacts beside us).
	VanishedFiles int `json:"vanishedFiles,omitempty"`
	// UnreadableFiles were skipped: not TiKV's (mke2fs's lost+found) and not readable by the
	// warm-up's user. An unreadable directory is skipped whole and not counted.
	UnreadableFiles int     `json:"unreadableFiles,omitempty"`
	Seconds         float64 `json:"seconds"`
	// MBPerSecond is in MiB (2^20 bytes), the unit of EBS throughput, per second.
	MBPerSecond float64 `json:"mbPerSecond"`
	// Direct is true when every read of the target used O_DIRECT.
	Direct bool `json:"direct"`
	// Complete is true when every byte of the target was read; Error says why not.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// Summary is the result of a run, printed as JSON. Files, Bytes and SkippedFiles are the
// totals over the targets, Seconds the run's wall time: the targets are read concurrently.
type Summary struct {
	Targets      []Target `json:"targets"`
	Files        int      `json:"files"`
	Bytes        int64    `json:"bytes"`
	SkippedFiles int      `json:"skippedFiles"`
	Seconds      float64  `json:"seconds"`
	MBPerSecond  float64  `json:"mbPerSecond"`
	Complete     bool     `json:"complete"`
	// WAL are the WAL checks, one per Options.WAL directory, and WALCorruptions the corrupted
	// logs they found in total.
	WAL            []WALResult `json:"wal,omitempty"`
	WALCorruptions int         `json:"walCorruptions,omitempty"`
}

// system is the I/O the engine does on files and devices, replaced in tests to inject
// failures.
type system struct {
	open      func(path string, flags int) (file, error)
	mountinfo string
}

// Run warms up every target concurrently and returns when all are read, one failed (the
// others are stopped), or ctx ends. The summary describes what was read even when the error
// is not nil; the error is nil only if every target was read completely.
func Run(ctx context.Context, o Options) (Summary, error) {
	return run(ctx, o, system{open: openFile, mountinfo: podenv.Path("/proc/self/mountinfo")})
}

func run(ctx context.Context, o Options, sys system) (Summary, error) {
	o, err := withDefaults(o)
	if err != nil {
		return Summary{}, err
	}
	log := newLogger(o.Progress)
	targets, err := resolve(o, sys)
	if err != nil {
		return Summary{}, err
	}
	start := time.Now()
	wal, err := checkWALs(ctx, o, log)
	if err != nil {
		sum := summarize(nil, time.Since(start))
		sum.addWAL(wal)
		sum.Complete = false
		return sum, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			if err := t.run(ctx, o, sys, log); err != nil {
				cancel() // one target failed: the run fails, stop the others
			}
		})
	}
	stop := startProgress(targets, o.ProgressInterval, log, o.OnProgress)
	wg.Wait()
	stop()
	sum := summarize(targets, time.Since(start))
	sum.addWAL(wal)
	return sum, runError(targets)
}

// checkWALs verifies the RocksDB logs of every WAL directory. The error says a check could
// not finish, or, with ExitOnCorruption, which logs are corrupted (ErrWALCorrupted).
func checkWALs(ctx context.Context, o Options, log *logger) ([]WALResult, error) {
	var out []WALResult
	var corrupted []string
	for _, dir := range o.WAL {
		log.logf("Verifying the RocksDB logs under %s", dir)
		res, err := CheckWAL(ctx, dir)
		if err != nil {
			res.Error = err.Error()
		}
		out = append(out, res)
		if err != nil {
			return out, fmt.Errorf("check the RocksDB logs under %s: %w", dir, err)
		}
		for _, c := range res.Corruptions {
			log.logf("Corruption in RocksDB log %s", c)
			corrupted = append(corrupted, c.String())
		}
		log.logf("Verified %d RocksDB logs (%s) under %s, %d corrupted; the newest of each directory not verified (a snapshot may have torn it): %s",
			res.Files, formatBytes(res.Bytes), dir, len(res.Corruptions), strings.Join(res.Skipped, ", "))
		if o.ExitOnCorruption && len(corrupted) > 0 {
			return out, fmt.Errorf("%w: %s", ErrWALCorrupted, strings.Join(corrupted, "; "))
		}
	}
	return out, nil
}

func (s *Summary) addWAL(wal []WALResult) {
	s.WAL = wal
	for _, w := range wal {
		s.WALCorruptions += len(w.Corruptions)
	}
}

// withDefaults fills the zero fields and rejects the invalid ones.
func withDefaults(o Options) (Options, error) {
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	switch {
	case len(o.FS)+len(o.Block)+len(o.WAL) == 0:
		return o, errors.New("nothing to warm up: give at least one FS directory, Block device or WAL directory")
	case o.Workers < 0:
		return o, fmt.Errorf("workers %d: want at least 1", o.Workers)
	case o.ChunkSize < 0 || o.ChunkSize%Align != 0:
		return o, fmt.Errorf("chunk size %d: want a positive multiple of %d", o.ChunkSize, Align)
	case o.ProgressInterval < 0:
		return o, fmt.Errorf("progress interval %s: want a positive duration", o.ProgressInterval)
	}
	return o, nil
}

// resolve checks every target before any is read, so that a typo fails the run at once.
func resolve(o Options, sys system) ([]*target, error) {
	var targets []*target
	seen := map[string]string{} // what is read → the path given
	add := func(t *target, what string) error {
		if prev, ok := seen[what]; ok {
			return fmt.Errorf("%s and %s are the same target (%s)", prev, t.path, what)
		}
		seen[what] = t.path
		targets = append(targets, t)
		return nil
	}
	for _, p := range o.FS {
		root, err := fsRoot("fs target", p)
		if err != nil {
			return nil, err
		}
		t := &target{path: p, mode: FS, root: root, cpDir: root, cpName: CheckpointName}
		if o.CheckpointDir != "" {
			// Named by the path as given, as a Block target's (a restarted pod gives it again).
			t.cpDir, t.cpName = o.CheckpointDir, CheckpointName+strings.ReplaceAll(filepath.Clean(p), "/", "_")
		}
		if err := add(t, root); err != nil {
			return nil, err
		}
	}
	for _, p := range o.WAL {
		if _, err := fsRoot("WAL directory", p); err != nil {
			return nil, err
		}
	}
	for _, p := range o.Block {
		dev, err := blockDevice(p, sys.mountinfo)
		if err != nil {
			return nil, err
		}
		real, err := filepath.EvalSymlinks(dev)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", dev, err)
		}
		t := &target{path: p, mode: Block, device: dev, cpName: BlockCheckpointName}
		switch {
		case dev != p: // a mount point: its checkpoint at its root, as an FS target's
			t.cpDir = p
		case o.CheckpointDir != "":
			// Named by the path as given, which a restarted pod is given again (an absolute
			// path could differ between two runs' roots).
			t.cpDir, t.cpName = o.CheckpointDir, BlockCheckpointName+strings.ReplaceAll(filepath.Clean(p), "/", "_")
		}
		if err := add(t, real); err != nil {
			return nil, err
		}
	}
	return targets, nil
}

// runError is nil when every target completed; otherwise the targets' own failures, or the
// cancellation when that is all there is.
func runError(targets []*target) error {
	var failed, cancelled []error
	for _, t := range targets {
		switch {
		case t.err == nil:
		case errors.Is(t.err, context.Canceled) || errors.Is(t.err, context.DeadlineExceeded):
			cancelled = append(cancelled, t.err)
		default:
			failed = append(failed, t.err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	return errors.Join(cancelled...)
}

func summarize(targets []*target, elapsed time.Duration) Summary {
	sum := Summary{Targets: []Target{}, Complete: true, Seconds: elapsed.Seconds()}
	for _, t := range targets {
		r := t.result()
		sum.Targets = append(sum.Targets, r)
		sum.Files += r.Files
		sum.Bytes += r.Bytes
		sum.SkippedFiles += r.SkippedFiles
		sum.Complete = sum.Complete && r.Complete
	}
	sum.MBPerSecond = mibPerSecond(sum.Bytes, elapsed)
	return sum
}

func mibPerSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / (1 << 20) / d.Seconds()
}

// logger writes whole lines to the progress writer, which several goroutines share.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func newLogger(w io.Writer) *logger {
	if w == nil {
		w = io.Discard
	}
	return &logger{w: w}
}

func (l *logger) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, format+"\n", args...)
}
