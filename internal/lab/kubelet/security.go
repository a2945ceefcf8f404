package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// imageUser is the user and group of every lab image: the lab's images are host executables
// with no USER of their own, so a container without runAsUser runs as root, as one of an image
// built without USER does.
const imageUser = 0

// identity is who a container's process runs as.
type identity struct {
	uid, gid uint32
	groups   []uint32
}

// forNode is the process attribute that makes the child run as id. A node that is not root
// cannot switch users: it runs only containers that are its own user and group, with no
// supplementary groups.
func (id identity) forNode() (*syscall.Credential, error) {
	if os.Geteuid() == 0 {
		return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}, nil
	}
	if int(id.uid) == os.Geteuid() && int(id.gid) == os.Getegid() && len(id.groups) == 0 {
		return nil, nil
	}
	return nil, fmt.Errorf("run as user %d, group %d, groups %v: %w", id.uid, id.gid, id.groups, errNotRoot)
}

// containerIdentity is the user, group and supplementary groups a container runs as, as the
// kubelet and the runtime choose them: the container's runAsUser and runAsGroup over the pod's,
// the image's user (root in the lab) when neither sets one, and the pod's fsGroup and
// supplementalGroups as supplementary groups. A container whose effective runAsNonRoot is true
// and whose user is root is refused with the kubelet's message
// (kuberuntime's verifyRunAsNonRoot).
func containerIdentity(pod *corev1.Pod, c *corev1.Container) (identity, error) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	uid, gid := int64(imageUser), int64(imageUser)
	setUser := psc.RunAsUser
	if csc.RunAsUser != nil {
		setUser = csc.RunAsUser
	}
	if setUser != nil {
		uid = *setUser
	}
	if g := firstSet(csc.RunAsGroup, psc.RunAsGroup); g != nil {
		gid = *g
	}
	nonRoot := psc.RunAsNonRoot
	if csc.RunAsNonRoot != nil {
		nonRoot = csc.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot && uid == 0 {
		if setUser != nil {
			return identity{}, fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podRef(pod), c.Name)
		}
		return identity{}, fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podRef(pod), c.Name)
	}
	id := identity{uid: uint32(uid), gid: uint32(gid)}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	for _, g := range groups {
		if g32 := uint32(g); !slices.Contains(id.groups, g32) {
			id.groups = append(id.groups, g32)
		}
	}
	return id, nil
}

func firstSet(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// podRef is a pod as the kubelet names it in messages (format.Pod): name_namespace(uid).
func podRef(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// Masks of the kubelet's volume ownership change (pkg/volume/volume_linux.go).
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// setVolumeOwnership gives the files of a volume to fsGroup as the kubelet's
// volume.SetVolumeOwnership does: every file (symlinks not followed) gets group fsGroup (lchown)
// and group read and write (read only for a read-only volume), every directory also the setgid
// bit and group search. Under fsGroupChangePolicy OnRootMismatch, a volume whose root already
// has the group and the modes is left as it is. Without an fsGroup nothing changes.
func setVolumeOwnership(dir string, fsGroup *int64, policy *corev1.PodFSGroupChangePolicy, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch && !needsOwnershipChange(dir, *fsGroup, readOnly) {
		return nil
	}
	gid := int(*fsGroup)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return fmt.Errorf("fsGroup %d: %w", gid, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mask := rwMask
		if readOnly {
			mask = roMask
		}
		if info.IsDir() {
			mask |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()|mask)
	})
}

// needsOwnershipChange is the kubelet's requiresPermissionChange: the root's group is not
// fsGroup, or the root lacks the group modes or the setgid bit.
func needsOwnershipChange(dir string, fsGroup int64, readOnly bool) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup || !fi.IsDir() {
		return true
	}
	want := rwMask
	if readOnly {
		want = roMask
	}
	want |= execMask
	return fi.Mode().Perm()&want != want || fi.Mode()&os.ModeSetgid == 0
}

// ownershipApplies tells the volumes the kubelet applies fsGroup to: emptyDir, the volumes it
// writes (secret, configMap, downwardAPI, projected) and CSI volumes whose driver's
// fsGroupPolicy is ReadWriteOnceWithFSType or File (the EBS driver's: ReadWriteOnceWithFSType,
// and a claim the lab serves is a single-node ext4 volume), not hostPath nor local volumes.
// The second result says the volume is read-only for the ownership change.
func ownershipApplies(src corev1.VolumeSource, ebs bool) (apply, readOnly bool) {
	switch {
	case src.EmptyDir != nil:
		return true, false
	case src.Secret != nil, src.ConfigMap != nil, src.DownwardAPI != nil, src.Projected != nil:
		return true, true
	case src.PersistentVolumeClaim != nil:
		return ebs, src.PersistentVolumeClaim.ReadOnly
	}
	return false, false
}

// freshFilesystem makes an EBS volume's directory that is still empty look like the root of
// a new ext4 file system: owned by root, mode 0755, with a lost+found directory owned by root,
// mode 0700 (what mke2fs creates). A volume that holds anything (restored from a snapshot, or
// used before) is left as it is.
func freshFilesystem(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return nil
	}
	if err := os.Chown(dir, 0, 0); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	lf := filepath.Join(dir, "lost+found")
	if err := os.Mkdir(lf, 0o700); err != nil {
		return err
	}
	if err := os.Chown(lf, 0, 0); err != nil {
		return err
	}
	return os.Chmod(lf, 0o700)
}

// makeTraversable adds search permission for the group and others (g+x, o+x, not read) to dir
// and each of its ancestors that lacks it: a container running as another user than the
// node's reaches its root folder, its volumes and its executable through them, as a real
// container reaches its own root. Test folders (os.MkdirTemp) are 0700, and a container
// without runAsGroup runs with group 0, root's, which the folder's group bits then decide.
func makeTraversable(log klog.Logger, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() && fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(p, fi.Mode()|0o011); err != nil {
				return fmt.Errorf("let other users traverse %s: %w", p, err)
			}
			log.Info("Let other users traverse a folder, so non-root containers reach their files", "path", p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// errNotRoot is returned when a container must run as another user and the node cannot
// switch users.
var errNotRoot = errors.New("the lab node runs containers as their securityContext's user: it must run as root")

// fsUserOf is the kubelet's util.FsUserFrom: the runAsUser every init and regular container
// runs as (its own or the pod's) when they all set the same one, else nil.
func fsUserOf(pod *corev1.Pod) *int64 {
	var user *int64
	var podUser *int64
	if pod.Spec.SecurityContext != nil {
		podUser = pod.Spec.SecurityContext.RunAsUser
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		u := podUser
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		}
		if u == nil || (user != nil && *user != *u) {
			return nil
		}
		user = u
	}
	return user
}
