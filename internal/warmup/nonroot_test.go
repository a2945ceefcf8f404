package warmup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nonRootID is the user the warm-up's unprivileged pod runs as (job.NonRootID).
const nonRootID = 65532

// asNonRoot reports whether the calling test runs as a non-root user, whose reads permission
// bits stop; as root, it runs the test again in a copy of the test binary as nonRootID (user
// and group), fails the caller if that run does not pass, and reports false.
func asNonRoot(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go build folder is root's only: a copy where nonRootID may run it.
	dir, err := os.MkdirTemp("", "warmup-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "warmup.test")
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+os.TempDir())
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonRootID, Gid: nonRootID}}
	out, err := cmd.CombinedOutput()
	t.Logf("as user %d:\n%s", nonRootID, out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) || bytes.Contains(out, []byte("--- SKIP")) {
		t.Errorf("%s as user %d did not pass: %v", t.Name(), nonRootID, err)
	}
	return false
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// TestLostAndFoundIsSkipped: a new ext4 volume's lost+found, root's only, which a warm-up running
// as non-root may not list, is skipped with a log line, and the rest is read; the checkpoint goes
// to CheckpointDir, since the volume's root is not the warm-up's to write.
func TestLostAndFoundIsSkipped(t *testing.T) {
	if !asNonRoot(t) {
		return
	}
	files := []sizedFile{{"db/000001.sst", 3 * Align}, {"raft-engine/0000000000000001.raftlog", Align}, {"lost+found/#12", Align}}
	dir := tree(t, files)
	lf := filepath.Join(dir, "lost+found")
	// lost+found unreadable, the volume's root read-only to us, as root's are.
	for p, mode := range map[string]os.FileMode{lf: 0, dir: 0o555} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(p, 0o755) })
	}
	cpDir := t.TempDir()
	var log bytes.Buffer
	sum, err := Run(context.Background(), Options{FS: []string{dir}, Checkpoint: true, CheckpointDir: cpDir, Progress: &log})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if sum.Files != 2 || sum.Bytes != 4*Align {
		t.Errorf("read %d files, %d bytes; want the 2 outside lost+found, %d bytes", sum.Files, sum.Bytes, 4*Align)
	}
	if want := fmt.Sprintf("Skipping %s: not TiKV's, and user %d may not read it", lf, nonRootID); !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	cp, err := loadCheckpointFile(cpDir, CheckpointName+strings.ReplaceAll(filepath.Clean(dir), "/", "_"))
	if err != nil || len(cp) != 2 {
		t.Errorf("checkpoint in --checkpoint-dir: %v, %v; want the 2 files read", cp, err)
	}
}

func TestPermissionDenied(t *testing.T) {
	denied := &fs.PathError{Op: "open", Path: "/v/x", Err: syscall.EACCES}
	for _, tc := range []struct {
		rel  string
		skip bool
	}{
		{"lost+found", true},
		{"lost+found/#12", true},
		{"db/000001.sst", false},
		{"raft-engine", false},
		{"space_placeholder_file", false},
		{"sub/lost+found", false}, // only the volume's own
	} {
		err := permissionDenied(tc.rel, denied)
		if tc.skip != (err == nil) || (err != nil && (!errors.Is(err, ErrNotReadable) || !errors.Is(err, fs.ErrPermission))) {
			t.Errorf("permissionDenied(%q) = %v; want skip %v", tc.rel, err, tc.skip)
		}
	}
}
