// Package warmup is the `fedbr warmup` command: it reads every block of volumes restored
// from EBS snapshots once (package warmup, the engine), so that TiKV's first reads do not
// pay the lazy load from S3, and prints a JSON summary.
package warmup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	engine "github.com/fedbr/fedbr/internal/warmup"
)

type options struct {
	fs, block  []string
	wal        []string
	exitOnWAL  bool
	workers    int
	chunk      byteSize
	direct     bool
	checkpoint bool
	cpDir      string
	interval   time.Duration
	report     session.ReportFlags
	reportAs   string
}

// Phases reported under --report-as (and report.PhaseFailed).
const (
	phaseReading   = report.PhaseReading
	phaseCompleted = report.PhaseCompleted
)

// status is the progress document reported under --report-as: the bytes read of the bytes to
// read over every target, in the fields the agent reads of every long step.
type status struct {
	Phase   string     `json:"phase"`
	Since   *time.Time `json:"since,omitempty"`
	Done    int64      `json:"done"`
	Total   int64      `json:"total"`
	Percent float64    `json:"percent"`
	// ProgressAt is when Done last grew (report.ProgressClock), from the start of Reading.
	ProgressAt *time.Time `json:"progressAt,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// NewCmd returns `warmup`.
func NewCmd() *cobra.Command {
	o := &options{chunk: engine.DefaultChunkSize}
	cmd := &cobra.Command{
		Use:   "warmup (--fs DIR | --block PATH | --wal DIR)...",
		Short: "Read every block of volumes restored from EBS snapshots once, so that TiKV's first reads are fast",
		Long: `A volume restored from an EBS snapshot is loaded lazily from S3: the first read of each
block is slow. warmup reads every block once, before TiKV starts or beside it.

--fs DIR reads every regular file under DIR (symlinks are not followed), the newest first as
TiKV reads its newest SST and WAL files first; large files are read in concurrent chunks.
With --checkpoint, the files fully read are recorded (by path, size and modification time) in
DIR/` + engine.CheckpointName + `, or with --checkpoint-dir in that directory (the file's name
suffixed with DIR as given, slashes as '_': a volume's root is root's, so a warm-up running as
another user keeps its checkpoints there), written atomically every --progress-interval and at
the end, also after SIGTERM: a restarted run skips them, and reads a changed file again. A file
or directory the warm-up may not read fails the run, except lost+found (mke2fs's, root's only
in a new ext4 file system, not TiKV's), which is skipped with a log line.

--block PATH reads a whole block device from offset 0 to its size: PATH is the device, or the
mount point of one (its device is found in /proc/self/mountinfo; in a container the device
must be visible, e.g. privileged). A regular file is read as a device would be. With
--checkpoint the device is read in segments of 256 chunks, and the segments fully read are
recorded in ` + engine.BlockCheckpointName + `: at the root of the mount point given, or, for
a device or file given itself, in --checkpoint-dir (the file's name suffixed with the path as
given, slashes as '_'; without --checkpoint-dir no checkpoint is kept for it). A restarted run over a
device of the same size skips those segments; another size is read whole.

--wal DIR verifies the RocksDB write-ahead logs under DIR (TiKV's kv engine: <data-dir>/db, or
where rocksdb.wal-dir points) before anything is warmed up: every non-empty numbered log
(<number>.log) of each directory but the newest, which a snapshot may have torn, is read
whole and every record's checksum verified. Corruption is printed with the file and offset
and recorded in the summary; with --exit-on-corruption the run stops there and fails.

--fs and --block may be given several times; the targets are read concurrently, each with --workers
reads in flight. Reads use O_DIRECT so that the page cache is not filled with the whole
volume; a file system that refuses it is read buffered (logged once per target).

With --member (a VolumeRestoreMember) the progress (phase Reading, bytes done of total,
percent) is server-side applied to the member's status.steps entry --report-as at every
progress line, with the summary as its result before exiting 0.

Progress lines go to stderr; the JSON summary (per target and in total: files, bytes, files
skipped from the checkpoint, seconds, MiB/s, whether O_DIRECT was used; per --wal directory:
the logs verified, skipped and corrupted) goes to stdout. The exit status is 0 only if every
target was read completely and every WAL check finished (with --exit-on-corruption: found no
corruption).`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true // the flags were fine; a failure now is not a usage error
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.fs, "fs", nil, "a directory whose files to read (repeatable)")
	f.StringArrayVar(&o.block, "block", nil, "a block device, or the mount point of one, to read whole (repeatable)")
	f.StringArrayVar(&o.wal, "wal", nil, "a directory whose RocksDB logs to verify (repeatable)")
	f.BoolVar(&o.exitOnWAL, "exit-on-corruption", false, "fail the run, before warming anything up, when a --wal directory holds a corrupted RocksDB log")
	f.IntVar(&o.workers, "workers", engine.DefaultWorkers, "concurrent reads per target")
	f.Var(&o.chunk, "chunk", "size of one read: bytes, or with a K or M suffix; a multiple of 4K")
	f.BoolVar(&o.direct, "direct", true, "read with O_DIRECT, bypassing the page cache")
	f.BoolVar(&o.checkpoint, "checkpoint", true, "record the files read in each --fs DIR (the segments read of each --block PATH), and skip them in the next run")
	f.StringVar(&o.cpDir, "checkpoint-dir", "", "directory keeping the checkpoints of the --fs directories, and of the --block devices (or files) given themselves rather than as a mount point")
	f.DurationVar(&o.interval, "progress-interval", engine.DefaultProgressInterval, "period of the progress lines and checkpoint writes")
	o.report.Register(f)
	o.report.Kind = session.KindRestoreMember
	f.StringVar(&o.reportAs, "report-as", "warmup", "name of this warm-up's entry in --member's status.steps: one per warm-up reporting to the same member")
	_ = cmd.MarkFlagDirname("fs")
	_ = cmd.MarkFlagFilename("block")
	_ = cmd.MarkFlagDirname("wal")
	_ = cmd.MarkFlagDirname("checkpoint-dir")
	return cmd
}

func (o *options) validate() error {
	switch {
	case len(o.fs)+len(o.block)+len(o.wal) == 0:
		return fmt.Errorf("nothing to warm up: give at least one --fs DIR, --block PATH or --wal DIR")
	case o.exitOnWAL && len(o.wal) == 0:
		return fmt.Errorf("--exit-on-corruption needs a --wal DIR to verify")
	case o.workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", o.workers)
	case o.chunk <= 0 || o.chunk%engine.Align != 0:
		return fmt.Errorf("--chunk %s: want a positive multiple of 4K (%d bytes)", o.chunk.String(), engine.Align)
	case o.interval <= 0:
		return fmt.Errorf("--progress-interval %s: want a positive duration", o.interval)
	case o.cpDir != "" && len(o.fs)+len(o.block) == 0:
		return fmt.Errorf("--checkpoint-dir keeps the checkpoints of --fs directories and --block devices: give one")
	case o.cpDir != "" && !o.checkpoint:
		return fmt.Errorf("--checkpoint-dir with --checkpoint=false: no checkpoint would be kept there")
	}
	if o.cpDir != "" {
		if fi, err := os.Stat(o.cpDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--checkpoint-dir %s: want an existing directory", o.cpDir)
		}
	}
	if err := o.report.Validate(); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Label(o.reportAs); len(errs) > 0 {
		return fmt.Errorf("--report-as %q is not a step name (a DNS label): %s", o.reportAs, errs[0])
	}
	return checkPaths(o.fs, o.block, o.wal)
}

// checkPaths rejects empty paths, a path given twice, and an --fs directory inside another,
// whose files would be read twice. A --wal directory may be an --fs or --block one too (its
// logs are verified, and then warmed up with the rest).
func checkPaths(fs, block, wal []string) error {
	var targets, wals []given
	for _, p := range fs {
		targets = append(targets, given{"--fs", p})
	}
	for _, p := range block {
		targets = append(targets, given{"--block", p})
	}
	for _, p := range wal {
		wals = append(wals, given{"--wal", p})
	}
	if err := noRepeats(targets); err != nil {
		return err
	}
	if err := noRepeats(wals); err != nil {
		return err
	}
	for _, outer := range fs {
		for _, inner := range fs {
			a, _ := filepath.Abs(outer)
			b, _ := filepath.Abs(inner)
			if rel, err := filepath.Rel(a, b); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
				return fmt.Errorf("--fs %s is inside --fs %s: its files would be read twice", inner, outer)
			}
		}
	}
	return nil
}

// given is a path and the flag it was given with.
type given struct{ flag, path string }

// noRepeats rejects an empty path and a path given twice.
func noRepeats(all []given) error {
	seen := map[string]given{}
	for _, g := range all {
		if g.path == "" {
			return fmt.Errorf("%s: the path is empty", g.flag)
		}
		abs, err := filepath.Abs(g.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", g.flag, g.path, err)
		}
		if prev, ok := seen[abs]; ok {
			return fmt.Errorf("%s %s and %s %s are the same path: give it once", prev.flag, prev.path, g.flag, g.path)
		}
		seen[abs] = g
	}
	return nil
}

func (o *options) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logw := session.NewLockedWriter(cmd.ErrOrStderr())
	rep, err := o.report.Reporter(o.reportAs, session.Logf(logw))
	if err != nil {
		return err
	}
	started := time.Now()
	var (
		mu    sync.Mutex
		clock report.ProgressClock // the bytes read: a total found larger is no progress
	)
	progress := func(done, total int64) {
		pct := 100.0
		if total > 0 {
			pct = float64(done) * 100 / float64(total)
		}
		mu.Lock()
		at := clock.Observe(done, 0, time.Now())
		mu.Unlock()
		rep.Update(phaseReading, status{Phase: phaseReading, Since: &started, Done: done, Total: total, Percent: pct, ProgressAt: &at})
	}
	progress(0, 0)
	sum, err := engine.Run(ctx, engine.Options{
		FS:               o.fs,
		Block:            o.block,
		Workers:          o.workers,
		ChunkSize:        int64(o.chunk),
		Direct:           o.direct,
		Checkpoint:       o.checkpoint,
		CheckpointDir:    o.cpDir,
		WAL:              o.wal,
		ExitOnCorruption: o.exitOnWAL,
		Progress:         logw,
		ProgressInterval: o.interval,
		OnProgress:       progress,
	})
	if err != nil {
		rep.Fail(context.WithoutCancel(ctx), err, func(err error) any {
			t := time.Now()
			return status{Phase: report.PhaseFailed, Since: &t, Done: sum.Bytes, Error: err.Error()}
		})
	}
	if len(sum.Targets)+len(sum.WAL) == 0 {
		return err // nothing was started: the error says why
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if encErr := enc.Encode(sum); encErr != nil && err == nil {
		return fmt.Errorf("print the summary: %w", encErr)
	}
	if err != nil {
		return err
	}
	t := time.Now()
	rep.Update(phaseCompleted, status{Phase: phaseCompleted, Since: &t, Done: sum.Bytes, Total: sum.Bytes, Percent: 100})
	if err := rep.Result(context.WithoutCancel(ctx), sum); err != nil {
		return fmt.Errorf("every target was read, but the result could not be reported: %w", err)
	}
	return nil
}

// byteSize is a flag of bytes with an optional K (2^10) or M (2^20) suffix.
type byteSize int64

func (s *byteSize) String() string {
	switch n := int64(*s); {
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	default:
		return strconv.FormatInt(n, 10)
	}
}

func (s *byteSize) Set(v string) error {
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	*s = byteSize(n)
	return nil
}

func (s *byteSize) Type() string { return "size" }

func parseByteSize(v string) (int64, error) {
	num, shift := strings.TrimSpace(v), 0
	switch {
	case strings.HasSuffix(strings.ToUpper(num), "K"):
		num, shift = num[:len(num)-1], 10
	case strings.HasSuffix(strings.ToUpper(num), "M"):
		num, shift = num[:len(num)-1], 20
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<62)>>shift || n < -(1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size: want bytes with an optional K or M suffix, e.g. 1M", v)
	}
	return n << shift, nil
}
