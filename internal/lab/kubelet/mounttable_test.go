package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/fedbr/fedbr/internal/podenv"
	"github.com/fedbr/fedbr/internal/warmup"
)

// TestMountTableServesBlockWarmup: `fedbr warmup --block <mount point>` run in a lab container
// finds the EBS volume's device through the mount table the node wrote, and reads every block
// of it when the container is privileged; unprivileged, the device is not visible (as in a
// real pod), and a volume of no device is refused as not a block device.
func TestMountTableServesBlockWarmup(t *testing.T) {
	dir := t.TempDir()
	ebsDir, secretDir := filepath.Join(dir, "vol-1"), filepath.Join(dir, "secret")
	for _, d := range []string{ebsDir, secretDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	volumes := map[string]string{"data": ebsDir, "creds": secretDir}
	devices := map[string]Volume{"data": {ID: "vol-1", Dir: ebsDir, Device: "/dev/xvdba", SizeGiB: 1}}
	c := corev1.Container{Name: "warmup", VolumeMounts: []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/warm/data"}, {Name: "creds", MountPath: "/etc/creds"}}}

	run := func(t *testing.T, privileged bool, target string) (warmup.Summary, error) {
		t.Helper()
		root := filepath.Join(t.TempDir(), "root")
		c := *c.DeepCopy()
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(privileged)}
		if err := linkMounts(root, c.VolumeMounts, volumes, nil); err != nil {
			t.Fatal(err)
		}
		if err := writeMountTable(root, c, devices); err != nil {
			t.Fatal(err)
		}
		t.Setenv(podenv.LabRootEnv, root)
		return warmup.Run(context.Background(), warmup.Options{Block: []string{filepath.Join(root, target)}, Direct: true})
	}

	t.Run("privileged", func(t *testing.T) {
		s, err := run(t, true, "var/lib/warm/data")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Targets) != 1 || !strings.HasSuffix(s.Targets[0].Device, "/dev/xvdba") || s.Bytes != 1<<30 || !s.Complete {
			t.Errorf("summary %+v: want the device /dev/xvdba read whole, 1 GiB", s)
		}
	})
	t.Run("unprivileged", func(t *testing.T) {
		_, err := run(t, false, "var/lib/warm/data")
		if err == nil || !strings.Contains(err.Error(), "which is not visible here") {
			t.Errorf("err = %v, want the device not visible", err)
		}
	})
	t.Run("a volume whose directory does not exist", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "root")
		missing := filepath.Join(dir, "missing")
		c := corev1.Container{Name: "x", VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}
		if err := linkMounts(root, c.VolumeMounts, map[string]string{"host": missing}, nil); err != nil {
			t.Fatal(err)
		}
		if err := writeMountTable(root, c, nil); err != nil {
			t.Fatalf("the container would not start: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(root, MountTable))
		if err != nil || !strings.Contains(string(b), " "+missing+" ") {
			t.Errorf("mount table %q, %v: want the mount listed at %s", b, err, missing)
		}
	})
	t.Run("no device", func(t *testing.T) {
		_, err := run(t, true, "etc/creds")
		if err == nil || !strings.Contains(err.Error(), "not from a block device") {
			t.Errorf("err = %v, want not mounted from a block device", err)
		}
	})
}
