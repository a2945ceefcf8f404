package awsdouble

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/fedbr/fedbr/internal/lab/loopfs"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

// Volume formats (Options.Volumes).
const (
	// VolumesDir keeps each volume as a directory and each snapshot as hard links to its
	// files: cheap, for the double's own unit tests.
	VolumesDir = "dir"
	// VolumesExt4 keeps each volume as a block device image, the capacity of the volume and
	// sparse. A lab node attaches it as a loop device and mounts it ext4 (formatting it on
	// first use, as the EBS CSI driver does); a snapshot is a sparse copy of the image taken
	// while every mounted file system of the CreateSnapshots call is frozen.
	VolumesExt4 = "ext4"
)

// ValidVolumes checks an Options.Volumes value.
func ValidVolumes(v string) error {
	switch v {
	case "", VolumesDir, VolumesExt4:
		return nil
	}
	return fmt.Errorf("volumes %q: want %s or %s", v, VolumesExt4, VolumesDir)
}

func (s *Server) volumeImage(id string) string { return filepath.Join(s.dir, "volumes", id+".img") }
func (s *Server) snapshotImage(id string) string {
	return filepath.Join(s.dir, "snapshots", id+".img")
}

// makeVolumeStorage creates v's data: a directory, or an image of v's capacity; from sn's
// content when sn is set. s.mu is held.
func (s *Server) makeVolumeStorage(v *Volume, sn *Snapshot) error {
	if s.opts.Volumes != VolumesExt4 {
		v.Dir = filepath.Join(s.dir, "volumes", v.ID)
		if err := os.MkdirAll(v.Dir, 0o755); err != nil {
			return err
		}
		if sn == nil {
			return nil
		}
		if sn.Image {
			return fmt.Errorf("snapshot %s is an image: a directory volume cannot be made from it", sn.ID)
		}
		return s.restoreFiles(sn, v.Dir)
	}
	v.Image = s.volumeImage(v.ID)
	size := int64(v.SizeGiB) << 30
	if sn == nil {
		return newImage(v.Image, size)
	}
	if !sn.Image {
		return fmt.Errorf("snapshot %s holds files: an image volume cannot be made from it", sn.ID)
	}
	if _, err := copySparse(v.Image, s.snapshotImage(sn.ID)); err != nil {
		return err
	}
	// A volume larger than its snapshot: the rest of the device reads as zeros.
	return os.Truncate(v.Image, size)
}

// removeVolumeStorage deletes v's data.
func (s *Server) removeVolumeStorage(v *Volume) {
	if v.Image != "" {
		_ = os.Remove(v.Image)
	}
	if v.Dir != "" {
		_ = os.RemoveAll(v.Dir)
	}
}

// removeSnapshotStorage deletes a snapshot's captured data, whatever its form.
func (s *Server) removeSnapshotStorage(id string) {
	_ = os.RemoveAll(filepath.Join(s.dir, "snapshots", id))
	_ = os.Remove(s.snapshotImage(id))
}

func newImage(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// captureAll captures vols into snapshots snapIDs, each as its storage is kept: the files of
// directory volumes, the images of image volumes. s.mu is held.
func (s *Server) captureAll(vols []*Volume, snapIDs []string) (map[string][]FileRecord, map[string]int64, error) {
	var dirVols, imgVols []*Volume
	var dirIDs, imgIDs []string
	for i, v := range vols {
		if v.Image != "" {
			imgVols, imgIDs = append(imgVols, v), append(imgIDs, snapIDs[i])
		} else {
			dirVols, dirIDs = append(dirVols, v), append(dirIDs, snapIDs[i])
		}
	}
	if len(dirVols) > 0 && len(imgVols) > 0 {
		return nil, nil, fmt.Errorf("volumes %s and %s are kept in different forms: one call cannot capture both at one instant", dirVols[0].ID, imgVols[0].ID)
	}
	if len(imgVols) > 0 {
		images, err := s.captureImages(imgVols, imgIDs)
		return nil, images, err
	}
	files, err := s.capture(dirVols, dirIDs)
	return files, nil, err
}

// captureImages takes one point-in-time image of every volume: the volumes' lab locks
// (volumelock, so no logical write of a lab writer is cut in two), then every mounted file
// system frozen (FIFREEZE: writers block, and everything written so far reaches the device),
// each image copied sparse, then thawed and unlocked. It returns each snapshot's data bytes
// by volume id. s.mu is held by the caller.
func (s *Server) captureImages(vols []*Volume, snapIDs []string) (map[string]int64, error) {
	var points []string
	for _, v := range vols {
		mp, err := loopfs.MountOf(v.Image)
		if err != nil {
			return nil, fmt.Errorf("find the mount of volume %s: %w", v.ID, err)
		}
		if mp != "" {
			points = append(points, mp)
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	lock, err := volumelock.Exclusive(points...)
	if err != nil {
		return nil, fmt.Errorf("lock volumes: %w", err)
	}
	defer func() { _ = lock.Unlock() }()
	var frozen []string
	defer func() {
		for _, mp := range frozen {
			_ = loopfs.Thaw(mp)
		}
	}()
	for _, mp := range points {
		if err := loopfs.Freeze(mp); err != nil {
			return nil, fmt.Errorf("freeze %s: %w", mp, err)
		}
		frozen = append(frozen, mp)
	}
	out := map[string]int64{}
	for i, v := range vols {
		n, err := copySparse(s.snapshotImage(snapIDs[i]), v.Image)
		if err != nil {
			return nil, fmt.Errorf("capture volume %s: %w", v.ID, err)
		}
		out[v.ID] = n
	}
	return out, nil
}

// thawAll thaws the mounted file system of every image volume: a double killed inside a
// capture leaves them frozen, and every writer on them blocked.
func (s *Server) thawAll() {
	for _, v := range s.st.Volumes {
		if v.Image == "" {
			continue
		}
		if mp, err := loopfs.MountOf(v.Image); err == nil && mp != "" {
			_ = loopfs.Thaw(mp) // EINVAL: it was not frozen
		}
	}
}

// copySparse copies src to a new dst of the same length, only src's data ranges (holes stay
// holes), and returns the bytes of data copied.
func copySparse(dst, src string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = in.Close() }()
	info, err := in.Stat()
	if err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	var total int64
	err = dataRanges(in, info.Size(), func(off, n int64) error {
		if _, err := in.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(off, io.SeekStart); err != nil {
			return err
		}
		c, err := io.CopyN(out, in, n)
		total += c
		return err
	})
	if err == nil {
		err = out.Truncate(info.Size())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
		return 0, err
	}
	return total, nil
}

// dataRanges calls fn with each range of f (of length size) that holds data, in order
// (SEEK_DATA/SEEK_HOLE; a file system without them reports the whole file as data).
func dataRanges(f *os.File, size int64, fn func(off, n int64) error) error {
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("seek data at %d: %w", off, err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole at %d: %w", start, err)
		}
		end = min(end, size)
		if end <= start {
			return nil
		}
		if err := fn(start, end-start); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// imageBlocks returns the non-zero blocks of an image file, reading only its data ranges.
func imageBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var out []block
	buf := make([]byte, BlockSize)
	zero := make([]byte, BlockSize)
	next := int64(0) // the first block index not yet read
	err = dataRanges(f, info.Size(), func(off, n int64) error {
		for idx := max(off/BlockSize, next); idx*BlockSize < off+n; idx++ {
			m, err := f.ReadAt(buf, idx*BlockSize)
			if err != nil && err != io.EOF {
				return err
			}
			clear(buf[m:])
			if !bytes.Equal(buf, zero) {
				out = append(out, block{Index: int32(idx), Hash: sha256.Sum256(buf)})
			}
			next = idx + 1
		}
		return nil
	})
	return out, err
}
