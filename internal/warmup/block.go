package warmup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedbr/fedbr/internal/mountinfo"
	"github.com/fedbr/fedbr/internal/podenv"
)

// blockDevice returns what to read for a Block target: path itself when it is a block
// device (or a regular file standing for one), or the block device mounted at path when it
// is a directory.
func blockDevice(path, mountinfoPath string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("block target %s: %w", path, err)
	}
	switch m := fi.Mode(); {
	case m.IsRegular(), isBlockDevice(m):
		return path, nil
	case !m.IsDir():
		return "", fmt.Errorf("block target %s is not a block device, a regular file or a mount point (mode %s)", path, m)
	}
	dir, err := filepath.EvalSymlinks(path)
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		return "", fmt.Errorf("block target %s: %w", path, err)
	}
	data, err := os.ReadFile(mountinfoPath) //nolint:gosec // G304: /proc/self/mountinfo, or a test's file
	if err != nil {
		return "", fmt.Errorf("block target %s: find the device mounted there: %w", path, err)
	}
	mnt, err := mountDevice(string(data), dir)
	if err != nil {
		return "", fmt.Errorf("block target %s: %w", path, err)
	}
	return mountedDevice(mnt, path)
}

func isBlockDevice(m fs.FileMode) bool {
	return m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0
}

// mountedDevice finds the node of a mount's device: its source or, as a container has its
// own /dev where the host's name may be missing, /dev/block/MAJOR:MINOR. Both are in-container
// paths (podenv.Path: under the container's root on a lab node, where a regular file stands
// for the device, as it may for a --block target given itself).
func mountedDevice(m mount, path string) (string, error) {
	var errs []error
	for _, name := range []string{m.Source, "/dev/block/" + m.Dev} {
		dev := podenv.Path(name)
		fi, err := os.Stat(dev)
		if err == nil && (isBlockDevice(fi.Mode()) || fi.Mode().IsRegular()) {
			return dev, nil
		}
		if err == nil {
			err = fmt.Errorf("%s is not a block device", dev)
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("block target %s is mounted from %s (device %s), which is not visible here "+
		"(a container needs it: run privileged, or get the volume as a raw block device; or use --fs %s): %w",
		path, m.Source, m.Dev, path, errors.Join(errs...))
}

// mount is one line of /proc/self/mountinfo.
type mount = mountinfo.Mount

// mountDevice returns the mount at dir, which must be mounted from a device under /dev. When
// several are mounted at dir, the last one hides the others.
func mountDevice(table, dir string) (mount, error) {
	ms, err := mountinfo.Parse(table)
	if err != nil {
		return mount{}, err
	}
	var found *mount
	for i := range ms {
		if ms[i].Point == dir {
			found = &ms[i]
		}
	}
	switch {
	case found == nil:
		return mount{}, fmt.Errorf("%s is not a mount point: block mode reads the whole device mounted there; use --fs %s to read the files under it", dir, dir)
	case !strings.HasPrefix(found.Source, "/dev/"):
		return mount{}, fmt.Errorf("%s is mounted from %q (%s), not from a block device under /dev: use --fs %s to read its files", dir, found.Source, found.FSType, dir)
	}
	return *found, nil
}
