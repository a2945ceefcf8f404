package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedbr/fedbr/internal/lab/loopfs"
	"github.com/fedbr/fedbr/internal/mountinfo"
)

// MountTable is where, under a container's root ($FEDBR_LAB_ROOT), the lab writes the
// container's /proc/self/mountinfo: a program that looks up the device mounted at a directory
// (fedbr warmup --block) reads it through podenv.Path as it reads the real one in a pod.
const MountTable = "proc/self/mountinfo"

// ebsMajor is the major number of NVMe block devices, as EBS volumes appear on Nitro instances.
const ebsMajor = 259

// writeMountTable writes the container's mount table and, for a privileged container, its
// devices. A lab container shares the host's mount namespace, so a mount point is listed where
// the process finds it: the directory its volumeMount's link resolves to. A mount of an EBS
// volume is listed as mounted from /dev/<attachment device> (ext4); every other volume as
// mounted from no device, as a kubelet binds a directory or mounts a tmpfs. Only a privileged
// container sees the host's devices, so only there is /dev/<device> created under the root: a
// link to the loop device of an image volume, so a block warm-up reads the bytes TiKV wrote;
// for a directory volume, a sparse file of the volume's capacity standing for the device (its
// blocks read as zeros). devices are the pod's EBS volumes by the pod's volume name.
func writeMountTable(root string, c corev1.Container, devices map[string]Volume) error {
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	var b strings.Builder
	fmt.Fprintf(&b, "1 0 0:1 / / rw - overlay overlay rw\n")
	for i, m := range c.VolumeMounts {
		link := filepath.Join(root, filepath.Clean("/"+m.MountPath))
		point, err := filepath.EvalSymlinks(link)
		if err != nil {
			// A volume whose directory does not exist (yet): a hostPath of no type. The
			// container still starts, as before; its mount is listed where the link points.
			if point, err = os.Readlink(link); err != nil {
				return fmt.Errorf("mount table: mount %s: %w", m.MountPath, err)
			}
		}
		id, sub := i+2, "/"+strings.TrimPrefix(filepath.Clean("/"+m.SubPath), "/")
		v, ebs := devices[m.Name]
		if !ebs || v.Device == "" {
			fmt.Fprintf(&b, "%d 1 0:%d %s %s rw - none lab rw\n", id, id+100, mountinfo.Escape(sub), mountinfo.Escape(point))
			continue
		}
		dev := "/dev/" + filepath.Base(v.Device)
		fmt.Fprintf(&b, "%d 1 %d:%d %s %s rw,relatime - ext4 %s rw\n", id, ebsMajor, i+1, mountinfo.Escape(sub), mountinfo.Escape(point), dev)
		if privileged && v.Image != "" {
			// The volume's real device: the loop device its image is attached as.
			if err := linkDevice(filepath.Join(root, dev), v.Image); err != nil {
				return fmt.Errorf("mount table: device of volume %s: %w", v.ID, err)
			}
		} else if privileged {
			if err := sparseDevice(filepath.Join(root, dev), int64(max(v.SizeGiB, 1))<<30); err != nil {
				return fmt.Errorf("mount table: device of volume %s: %w", v.ID, err)
			}
		}
	}
	p := filepath.Join(root, MountTable)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(b.String()), 0o444)
}

// linkDevice makes p a link to the loop device image is attached as.
func linkDevice(p, image string) error {
	loop, err := loopfs.LoopDevice(image)
	if err != nil {
		return err
	}
	if loop == "" {
		return fmt.Errorf("image %s is not attached", image)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.Symlink("/dev/"+loop, p)
}

// sparseDevice creates the file standing for a device of size bytes; reading it costs no disk.
func sparseDevice(p string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
