package awsdouble_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

// mountImage mounts a volume image of the double as a lab node does, unmounted when the test
// ends.
func mountImage(t *testing.T, image string) string {
	t.Helper()
	if err := loopfs.Available(); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "mnt")
	if err := loopfs.Mount(image, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := loopfs.UnmountUnder(target); err != nil {
			t.Error(err)
		}
	})
	return target
}

// TestExt4VolumesCaptureOneInstant: with Volumes ext4 a volume is a sparse image a node
// formats and mounts; CreateSnapshots copies the image while the file system is frozen, so the
// snapshot holds what was written before the call and nothing after, and a volume created from
// it is an ext4 image whose root is the captured one (lost+found root-only, as mke2fs made it).
func TestExt4VolumesCaptureOneInstant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv, url := serve(t, dir, awsdouble.Options{Volumes: awsdouble.VolumesExt4, SnapshotMBps: 1e6})
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	vol := in.Volumes[0]
	if vol.Image == "" || vol.Dir != "" {
		t.Fatalf("volume %+v: want an image and no directory", vol)
	}
	if info, err := os.Stat(vol.Image); err != nil || info.Size() != 1<<30 {
		t.Fatalf("image %s: %v, %v; want 1 GiB", vol.Image, info, err)
	}
	mnt := mountImage(t, vol.Image)
	if info, err := os.Stat(filepath.Join(mnt, "lost+found")); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("lost+found of a fresh volume: %v, %v; want mode 0700", info, err)
	}
	if err := volumelock.NewWriter(mnt).Append("f", []byte("before")); err != nil {
		t.Fatal(err)
	}
	c, _ := clients(url)
	snaps := snapshot(t, ctx, c, in.ID)
	if err := volumelock.NewWriter(mnt).Append("f", []byte("-after")); err != nil {
		t.Fatal(err)
	}
	got := waitCompleted(t, ctx, c, *snaps[0].SnapshotId)
	if n := awssdk.ToInt64(got.FullSnapshotSizeInBytes); n <= 0 || n%awsdouble.BlockSize != 0 {
		t.Fatalf("full snapshot size %d: want whole non-zero blocks", n)
	}
	v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: awssdk.String("us-west-2a"), SnapshotId: snaps[0].SnapshotId, Size: awssdk.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(dir, "volumes", *v.VolumeId+".img")
	if info, err := os.Stat(restored); err != nil || info.Size() != 2<<30 {
		t.Fatalf("restored image: %v, %v; want the requested 2 GiB", info, err)
	}
	rmnt := mountImage(t, restored)
	if b, err := os.ReadFile(filepath.Join(rmnt, "f")); err != nil || string(b) != "before" {
		t.Fatalf("restored f = %q, %v; want what was written before CreateSnapshots, %q", b, err, "before")
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "f")); string(b) != "before-after" {
		t.Fatalf("source f = %q after the snapshot: writes must go on", b)
	}
}

// TestOpenThawsFrozenVolumes: a double killed inside a capture leaves the file systems it
// froze frozen; the next Open thaws them, so their writers go on.
func TestOpenThawsFrozenVolumes(t *testing.T) {
	dir := t.TempDir()
	srv, err := awsdouble.Open(dir, awsdouble.Options{Volumes: awsdouble.VolumesExt4})
	if err != nil {
		t.Fatal(err)
	}
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := mountImage(t, in.Volumes[0].Image)
	if err := loopfs.Freeze(mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Thaw(mnt) })
	srv2, err := awsdouble.Open(dir, awsdouble.Options{Volumes: awsdouble.VolumesExt4})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv2.Close() }()
	// Thawing a file system that is not frozen is refused: this one was thawed by Open.
	if err := loopfs.Thaw(mnt); err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Fatalf("thaw after Open = %v; want EINVAL, the file system already thawed", err)
	}
}

// TestVolumesOption: an unknown volume form is refused at Open.
func TestVolumesOption(t *testing.T) {
	if _, err := awsdouble.Open(t.TempDir(), awsdouble.Options{Volumes: "xfs"}); err == nil || !strings.Contains(err.Error(), `volumes "xfs": want ext4 or dir`) {
		t.Fatalf("Open = %v", err)
	}
}
