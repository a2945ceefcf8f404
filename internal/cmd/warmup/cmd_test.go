package warmup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	engine "github.com/fedbr/fedbr/internal/warmup"
)

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to warm up: give at least one --fs DIR, --block PATH or --wal DIR"},
		{[]string{"--fs", "/d", "--exit-on-corruption"}, "--exit-on-corruption needs a --wal DIR to verify"},
		{[]string{"--wal", "/d", "--wal", "/d/"}, "--wal /d and --wal /d/ are the same path"},
		{[]string{"--wal", ""}, "--wal: the path is empty"},
		{[]string{"--fs", "/d", "--workers", "0"}, "--workers 0: want at least 1"},
		{[]string{"--fs", "/d", "--chunk", "0"}, "--chunk 0: want a positive multiple of 4K"},
		{[]string{"--fs", "/d", "--chunk", "1000"}, "--chunk 1000: want a positive multiple of 4K"},
		{[]string{"--fs", "/d", "--chunk", "-4K"}, "--chunk -4K: want a positive multiple of 4K"},
		{[]string{"--fs", "/d", "--chunk", "1G"}, `"1G" is not a size`},
		{[]string{"--fs", "/d", "--chunk", "M"}, `"M" is not a size`},
		{[]string{"--fs", "/d", "--progress-interval", "0s"}, "--progress-interval 0s: want a positive duration"},
		{[]string{"--fs", "/d", "--fs", "/d/"}, "--fs /d and --fs /d/ are the same path"},
		{[]string{"--fs", "/d", "--block", "/x/../d"}, "--fs /d and --block /x/../d are the same path"},
		{[]string{"--block", "/dev/xvdb", "--block", "/dev/xvdb"}, "are the same path"},
		{[]string{"--fs", "/d/sub", "--fs", "/d"}, "--fs /d/sub is inside --fs /d"},
		{[]string{"--fs", ""}, "--fs: the path is empty"},
		{[]string{"--fs", "/d", "extra"}, "unknown command"},
		{[]string{"--wal", "/d", "--checkpoint-dir", "/tmp"}, "--checkpoint-dir keeps the checkpoints of --fs directories and --block devices: give one"},
		{[]string{"--block", "/dev/xvdb", "--checkpoint-dir", "/tmp", "--checkpoint=false"}, "--checkpoint-dir with --checkpoint=false"},
		{[]string{"--block", "/dev/xvdb", "--checkpoint-dir", "/nonexistent/fedbr"}, "--checkpoint-dir /nonexistent/fedbr: want an existing directory"},
	} {
		cmd := NewCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, name := range []string{"fs", "block", "wal", "exit-on-corruption", "workers", "chunk", "direct", "checkpoint", "checkpoint-dir", "progress-interval"} {
		if f := NewCmd().Flags().Lookup(name); f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}

func TestGoodFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--fs", "/a", "--fs", "/b", "--fs", "/ab"}, // /ab is not inside /a
		{"--fs", "/a", "--block", "/dev/xvdb", "--chunk", "4K", "--workers", "1", "--progress-interval", "1ms"},
		{"--block", "/mnt/a,b", "--chunk", "2m"},                                              // a comma is part of the path
		{"--fs", "/a", "--wal", "/a", "--block", "/b", "--wal", "/b", "--exit-on-corruption"}, // a warmed path's logs verified too
		{"--wal", "/a"},
	} {
		cmd := NewCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if err := cmd.PreRunE(cmd, nil); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	f := NewCmd().Flags()
	for name, want := range map[string]string{"workers": "32", "chunk": "1M", "direct": "true", "checkpoint": "true", "progress-interval": "10s"} {
		if got := f.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, want %s", name, got, want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4K": 4096, "4k": 4096, "1M": 1 << 20, "16m": 16 << 20, " 8K ": 8192, "0": 0, "-1K": -1024} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "1.5M", "1G", "1MB", "0x10", "99999999999999999M"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[byteSize]string{1 << 20: "1M", 3 << 20: "3M", 4096: "4K", 1000: "1000", 0: "0", 1<<20 + 4096: "1028K"} {
		if got := n.String(); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", int64(n), got, want)
		}
	}
}

// TestWarmupCommand warms a directory up: the summary is JSON on stdout, the log lines are
// timestamped on stderr, and a second run skips the files.
func TestWarmupCommand(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int{"db/000001.sst": 3<<20 + 5, "db/CURRENT": 16, "raft/0001.raftlog": 4096, "empty": 0}
	var total int64
	for rel, n := range sizes {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, n), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(n)
	}
	for i, want := range []struct{ files, skipped int }{{4, 0}, {0, 4}} {
		var stdout, stderr bytes.Buffer
		cmd := NewCmd()
		cmd.SetArgs([]string{"--fs", dir, "--workers", "4", "--chunk", "64K"})
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.String())
		}
		var sum engine.Summary
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
			t.Fatalf("run %d: stdout is not the JSON summary: %v\n%s", i, err, stdout.String())
		}
		tg := sum.Targets[0]
		if !sum.Complete || tg.Path != dir || tg.Mode != engine.FS || tg.Files != want.files || tg.SkippedFiles != want.skipped ||
			tg.Bytes+tg.SkippedBytes != total || !tg.Complete {
			t.Errorf("run %d: summary %s", i, stdout.String())
		}
		for _, key := range []string{`"path"`, `"mode"`, `"files"`, `"bytes"`, `"skippedFiles"`, `"seconds"`, `"mbPerSecond"`, `"direct"`} {
			if !strings.Contains(stdout.String(), key) {
				t.Errorf("the summary has no %s:\n%s", key, stdout.String())
			}
		}
		if !regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+Z Warmed up fs `).MatchString(stderr.String()) {
			t.Errorf("run %d: no timestamped end line on stderr:\n%s", i, stderr.String())
		}
	}
}

func TestFailedRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args        []string
		want        string
		wantSummary bool
	}{
		{[]string{"--fs", filepath.Join(dir, "missing")}, "no such file or directory", false},
		{[]string{"--block", dir}, "is not a mount point: block mode reads the whole device mounted there; use --fs " + dir, false},
	} {
		var stdout bytes.Buffer
		cmd := NewCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&stdout)
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
		if got := stdout.Len() > 0; got != tc.wantSummary {
			t.Errorf("%q: summary printed %v, want %v:\n%s", tc.args, got, tc.wantSummary, stdout.String())
		}
	}
}

// TestCancelledRun is SIGTERM before the end: the summary says what was read, and the
// command fails.
func TestCancelledRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout bytes.Buffer
	cmd := NewCmd()
	cmd.SetArgs([]string{"--fs", dir})
	cmd.SetOut(&stdout)
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var sum engine.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.Complete || sum.Targets[0].Complete || sum.Targets[0].Error == "" {
		t.Errorf("summary %s (%v), want an incomplete target with its error", stdout.String(), err)
	}
}

// TestWALCorruption: a corrupted RocksDB log is printed with its file and offset and recorded
// in the summary; with --exit-on-corruption the command fails with it.
func TestWALCorruption(t *testing.T) {
	dir := t.TempDir()
	// One record whose stored checksum (0) is not its masked CRC32C, in the older log; the
	// newest log is not verified.
	record := append([]byte{0, 0, 0, 0, 5, 0, 1}, "hello"...)
	corrupted := filepath.Join(dir, "000001.log")
	for path, b := range map[string][]byte{corrupted: record, filepath.Join(dir, "000002.log"): []byte("torn")} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := corrupted + " at offset 0: checksum mismatch"
	for _, exit := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		cmd := NewCmd()
		args := []string{"--wal", dir}
		if exit {
			args = append(args, "--exit-on-corruption")
		}
		cmd.SetArgs(args)
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		err := cmd.Execute()
		switch {
		case exit && (!errors.Is(err, engine.ErrWALCorrupted) || !strings.Contains(err.Error(), want)):
			t.Errorf("--exit-on-corruption: err = %v, want %q", err, want)
		case !exit && err != nil:
			t.Errorf("without --exit-on-corruption: %v", err)
		}
		if !strings.Contains(stderr.String(), "Corruption in RocksDB log "+want) {
			t.Errorf("exit %v: the log does not name the corruption:\n%s", exit, stderr.String())
		}
		var sum engine.Summary
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.WALCorruptions != 1 || sum.WAL[0].Corruptions[0].File != corrupted {
			t.Errorf("exit %v: summary %s (%v)", exit, stdout.String(), err)
		}
	}
}

// TestBlockCommandResumes: --block over a regular file standing for the device, with
// --checkpoint-dir: the first run reads it whole and records its segments, the second skips
// them all.
func TestBlockCommandResumes(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "xvdf")
	size := int64(3<<20 + 4096 + 7) // with --chunk 4K: four segments of 1 MiB, the last short
	if err := os.WriteFile(dev, bytes.Repeat([]byte{'b'}, int(size)), 0o644); err != nil {
		t.Fatal(err)
	}
	cpDir := t.TempDir()
	for i, want := range []struct{ bytes, skipped int64 }{{size, 0}, {0, size}} {
		var stdout, stderr bytes.Buffer
		cmd := NewCmd()
		cmd.SetArgs([]string{"--block", dev, "--checkpoint-dir", cpDir, "--chunk", "4K", "--workers", "2"})
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.String())
		}
		var sum engine.Summary
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if tg := sum.Targets[0]; !tg.Complete || tg.Mode != engine.Block || tg.Bytes != want.bytes || tg.SkippedBytes != want.skipped {
			t.Errorf("run %d: target %+v, want %d bytes read and %d skipped", i, tg, want.bytes, want.skipped)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(cpDir, engine.BlockCheckpointName+"*")); len(names) != 1 {
		t.Errorf("checkpoints in --checkpoint-dir: %v, want one", names)
	}
}
