package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

// stagingDir holds the mount points of the node's image volumes, one per volume id (the
// kubelet's globalmount of a CSI volume).
func (p *provider) stagingDir() string { return filepath.Join(p.o.Dir, "volumes") }

// stage is NodeStageVolume for an image volume: the image attached as a loop device and
// mounted ext4 (formatted on first use) at the node's staging path, which it returns. A
// volume already staged there (another pod of the node, or a node restarted) is used as it is.
func (p *provider) stage(ctx context.Context, v Volume) (string, error) {
	target := filepath.Join(p.stagingDir(), v.ID)
	p.stageMu.Lock()
	defer p.stageMu.Unlock()
	if err := os.MkdirAll(p.stagingDir(), 0o755); err != nil {
		return "", err
	}
	if err := loopfs.Mount(v.Image, target); err != nil {
		return "", fmt.Errorf("volume %s: %w", v.ID, err)
	}
	return target, makeTraversable(klog.FromContext(ctx), p.stagingDir())
}

// stageBlock is the EBS CSI driver's NodePublishVolume of a volumeMode Block volume: the image
// attached as a loop device, not formatted or mounted; it returns the device.
func (p *provider) stageBlock(v Volume) (string, error) {
	p.stageMu.Lock()
	defer p.stageMu.Unlock()
	dev, err := loopfs.Attach(v.Image)
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", v.ID, err)
	}
	if p.blocks == nil {
		p.blocks = map[string]string{}
	}
	p.blocks[v.ID] = v.Image
	return dev, nil
}

// unstage is NodeUnstageVolume: volume id's file system unmounted from the node (its loop
// device then detaches); nothing when it is not staged here.
func (p *provider) unstage(id string) error {
	p.stageMu.Lock()
	defer p.stageMu.Unlock()
	if image, ok := p.blocks[id]; ok {
		if err := loopfs.Detach(image); err != nil {
			return err
		}
		delete(p.blocks, id)
	}
	target := filepath.Join(p.stagingDir(), id)
	if err := loopfs.Unmount(target); err != nil {
		return err
	}
	// Removing the mount point also detaches the copies of this mount that the containers'
	// own mount namespaces (for /etc/hosts) took when they started: the kernel detaches mounts
	// on a removed directory in every namespace. Without it such a copy would keep the file
	// system mounted, its loop device attached, after the volume is detached
	// (TestVolumeUnmountReachesOtherContainers).
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
