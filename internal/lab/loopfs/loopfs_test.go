package loopfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func image(t *testing.T) string {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "vol.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMountOnceAndOnlyOnce: the first mount formats the image (mke2fs's root-only lost+found),
// mounting it again where it is mounted is a no-op that keeps its files, mounting it a second
// place or attaching it raw is refused (two writers would corrupt it), and once unmounted its
// loop device is gone.
func TestMountOnceAndOnlyOnce(t *testing.T) {
	img := image(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	t.Cleanup(func() { _ = UnmountUnder(filepath.Dir(a)); _ = UnmountUnder(filepath.Dir(b)) })
	if err := Mount(img, a); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(a, "lost+found")); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("lost+found: %v, %v", info, err)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Mount(img, a); err != nil {
		t.Fatalf("mount again where it is: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(a, "f")); err != nil || string(b) != "kept" {
		t.Fatalf("f after the second Mount: %q, %v (formatted again?)", b, err)
	}
	if err := Mount(img, b); err == nil || !strings.Contains(err.Error(), "is mounted at "+a+" already") {
		t.Fatalf("mount at a second place = %v", err)
	}
	if _, err := Attach(img); err == nil || !strings.Contains(err.Error(), "a raw block claim cannot share it") {
		t.Fatalf("attach a mounted image = %v", err)
	}
	if err := Unmount(a); err != nil {
		t.Fatal(err)
	}
	if dev, err := LoopDevice(img); err != nil || dev != "" {
		t.Fatalf("loop device after unmount: %q, %v; want none (autoclear)", dev, err)
	}
}

// TestAttachDetach: a raw attach is not formatted, is refused a mount while attached, and
// Detach releases it.
func TestAttachDetach(t *testing.T) {
	img := image(t)
	dev, err := Attach(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(img) })
	if again, err := Attach(img); err != nil || again != dev {
		t.Fatalf("attach again = %q, %v; want %s", again, err, dev)
	}
	if err := Mount(img, filepath.Join(t.TempDir(), "m")); err == nil || !strings.Contains(err.Error(), "attached as a raw block device") {
		t.Fatalf("mount an attached image = %v", err)
	}
	if ok, err := Formatted(img); err != nil || ok {
		t.Fatalf("formatted %v, %v: a raw attach formats nothing", ok, err)
	}
	if err := Detach(img); err != nil {
		t.Fatal(err)
	}
	if d, err := LoopDevice(img); err != nil || d != "" {
		t.Fatalf("loop device after Detach: %q, %v", d, err)
	}
}

// TestMountHeldInAnotherNamespace: a file system unmounted here but still mounted in another
// mount namespace (a container's copy) keeps its loop device; mounting the image again is
// refused naming it, after a wait for the device to go; once that namespace ends, it mounts.
func TestMountHeldInAnotherNamespace(t *testing.T) {
	img := image(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	t.Cleanup(func() { _ = UnmountUnder(filepath.Dir(a)); _ = UnmountUnder(filepath.Dir(b)) })
	if err := Mount(img, a); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("unshare", "--mount", "--propagation", "slave", "--", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	// Wait until the holder's namespace exists: its mount table differs from ours in id.
	for {
		mine, _ := os.Readlink("/proc/self/ns/mnt")
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.Process.Pid))
		if err == nil && theirs != mine {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := Unmount(a); err != nil {
		t.Fatal(err)
	}
	if err := Mount(img, b); err == nil || !strings.Contains(err.Error(), "is still mounted in another mount namespace") {
		t.Fatalf("mount while another namespace holds it = %v", err)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	if err := Mount(img, b); err != nil {
		t.Fatalf("mount once the other namespace ended: %v", err)
	}
}
