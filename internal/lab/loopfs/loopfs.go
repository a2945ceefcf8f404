// Package loopfs gives the lab real block devices and file systems for its EBS volumes: a
// volume is an image file, attached as a loop device and mounted ext4, as the EBS CSI driver
// formats (on first use) and mounts a volume's NVMe device on a node. It needs root, loop
// devices (/dev/loop-control), mkfs.ext4 (e2fsprogs) and mount (util-linux).
package loopfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedbr/fedbr/internal/mountinfo"
)

// The file system freeze ioctls (linux/fs.h: _IOWR('X', 119, int) and _IOWR('X', 120, int)).
const (
	ioctlFIFREEZE = 0xC0045877
	ioctlFITHAW   = 0xC0045878
)

// Available says why this machine cannot attach lab volumes as loop devices, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("lab ext4 volumes need root (loop devices and mounts): run as root, or use directory volumes (lab up --volumes dir)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("lab ext4 volumes need loop devices: %w (modprobe loop, or use directory volumes: lab up --volumes dir)", err)
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("lab ext4 volumes need %s (e2fsprogs, mount, util-linux): %w", tool, err)
		}
	}
	return nil
}

// ext4Magic is where an ext2/3/4 superblock's magic number (0xEF53, little endian) lies.
const ext4MagicOffset = 1024 + 0x38

// Formatted says whether image holds an ext2/3/4 file system.
func Formatted(image string) (bool, error) {
	f, err := os.Open(image)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], ext4MagicOffset); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return magic == [2]byte{0x53, 0xEF}, nil
}

// Mount attaches image as a loop device and mounts it ext4 at target, formatting it first if
// it holds no file system (as the EBS CSI driver's NodeStageVolume does; mke2fs then leaves a
// root-owned, 0700 lost+found). The loop device is released when the file system is
// unmounted (autoclear). A target that already has image mounted is left as it is (a node
// restarted), which makes Mount idempotent.
func Mount(image, target string) error {
	dev, err := attachedDevice(image)
	if err != nil {
		return err
	}
	if dev != "" {
		points, err := MountPoints(dev)
		switch {
		case err != nil:
			return err
		case slices.Contains(points, target):
			return nil
		case len(points) > 0:
			// Two mounts of one ext4 from two devices would corrupt it, as two nodes writing
			// one EBS volume would.
			return fmt.Errorf("image %s is mounted at %s already (/dev/%s): it would be mounted twice", image, points[0], dev)
		case autoclear(dev):
			// A mount's device whose mount this namespace no longer sees: another mount
			// namespace holds a copy of it.
			return fmt.Errorf("image %s is still mounted in another mount namespace (/dev/%s): it would be mounted twice", image, dev)
		default:
			return fmt.Errorf("image %s is attached as a raw block device (/dev/%s): detach it before mounting it", image, dev)
		}
	}
	ok, err := Formatted(image)
	if err != nil {
		return err
	}
	if !ok {
		// Lazy inode tables and journal: the image stays sparse (noinit_itable below keeps the
		// kernel from zeroing the tables later).
		if err := run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", image); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return run("mount", "-t", "ext4", "-o", "loop,noinit_itable", image, target)
}

// Attach attaches image as a loop device without mounting it (a raw block claim, as the EBS
// CSI driver publishes a volumeMode Block volume) and returns the device (/dev/loopN). An image
// attached already is returned as it is. Unlike Mount's, the device stays until Detach.
func Attach(image string) (string, error) {
	if dev, err := attachedDevice(image); err != nil {
		return "", err
	} else if dev != "" {
		if points, err := MountPoints(dev); err != nil || len(points) > 0 {
			if err == nil {
				err = fmt.Errorf("image %s is mounted at %s (/dev/%s): a raw block claim cannot share it", image, points[0], dev)
			}
			return "", err
		}
		return "/dev/" + dev, nil
	}
	var out bytes.Buffer
	cmd := exec.Command("losetup", "--find", "--show", image)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("losetup --find --show %s: %w: %s", image, err, strings.TrimSpace(out.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// Detach detaches the loop device of image when it has one that no file system is mounted
// from (a raw block claim's, Attach).
func Detach(image string) error {
	dev, err := LoopDevice(image)
	if err != nil || dev == "" {
		return err
	}
	if points, err := MountPoints(dev); err != nil || len(points) > 0 {
		return err
	}
	return run("losetup", "-d", "/dev/"+dev)
}

// Unmount unmounts the file system at target (its loop device then detaches), waiting a
// little for processes that still hold it open to go.
func Unmount(target string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(target, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // unmounted, or not a mount point
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("unmount %s: %w", target, err)
}

// UnmountUnder unmounts every file system mounted under dir (deepest first): what a lab
// killed before it could unmount its volumes leaves behind. It returns the mount points it
// could not unmount with the errors.
func UnmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ms, err := mountinfo.Self()
	if err != nil {
		return err
	}
	var points []string
	for _, m := range ms {
		if m.Point == abs || strings.HasPrefix(m.Point, abs+"/") {
			points = append(points, m.Point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		_ = Thaw(p) // a frozen file system cannot be unmounted cleanly
		if err := unix.Unmount(p, 0); err != nil {
			// Still busy: detach it now, the kernel finishes once its last user goes.
			if err2 := unix.Unmount(p, unix.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// attachedDevice is LoopDevice, but a mount's own device (autoclear) with no mount left is
// waited for: the kernel releases it a moment after the last unmount, and it is no second
// writer. A device still there after autoclearWait is returned as it is.
func attachedDevice(image string) (string, error) {
	deadline := time.Now().Add(autoclearWait)
	for {
		dev, err := LoopDevice(image)
		if err != nil || dev == "" {
			return dev, err
		}
		points, err := MountPoints(dev)
		if err != nil || len(points) > 0 || !autoclear(dev) || time.Now().After(deadline) {
			return dev, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// autoclearWait bounds attachedDevice's wait for a released mount's loop device to go.
const autoclearWait = 5 * time.Second

// autoclear says whether loop device dev (loopN) goes with its last user: a mount's (mount -o
// loop sets it), never a raw attach's (losetup without --autoclear).
func autoclear(dev string) bool {
	b, err := os.ReadFile(filepath.Join("/sys/block", dev, "loop", "autoclear"))
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// LoopDevice is the loop device (loopN) whose backing file is image, or "" if none.
func LoopDevice(image string) (string, error) {
	abs, err := filepath.Abs(image)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
		if err != nil {
			continue // not configured
		}
		if strings.TrimSpace(string(b)) == abs {
			return e.Name(), nil
		}
	}
	return "", nil
}

// MountPoints are where the root of block device dev (loopN) is mounted, in this process's
// mount table.
func MountPoints(dev string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", dev, "dev"))
	if err != nil {
		return nil, err
	}
	majmin := strings.TrimSpace(string(b))
	ms, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Dev == majmin && m.Root == "/" {
			out = append(out, m.Point)
		}
	}
	return out, nil
}

// MountOf is where the file system on image's loop device is mounted, or "" when no loop
// device backs image or it is not mounted.
func MountOf(image string) (string, error) {
	dev, err := LoopDevice(image)
	if err != nil || dev == "" {
		return "", err
	}
	points, err := MountPoints(dev)
	if err != nil || len(points) == 0 {
		return "", err
	}
	return points[0], nil
}

// Freeze freezes the file system mounted at dir (FIFREEZE): it reaches its device whole and
// every writer blocks until Thaw.
func Freeze(dir string) error { return fsIoctl(dir, ioctlFIFREEZE) }

// Thaw thaws the file system mounted at dir; one not frozen is an error (EINVAL).
func Thaw(dir string) error { return fsIoctl(dir, ioctlFITHAW) }

func fsIoctl(dir string, req uint) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return unix.IoctlSetInt(int(f.Fd()), req, 0)
}

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
