package warmup

import (
	"errors"
	"io"
	"syscall"
)

// sysFile is a file descriptor read with pread(2): its reads are independent of any file
// offset, so the chunks of one file share it.
type sysFile int

// openFile opens path read-only with the extra flags (oDirect, O_NOFOLLOW).
func openFile(path string, flags int) (file, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return sysFile(fd), nil
	}
}

func (f sysFile) pread(p []byte, off int64) (int, error) {
	for {
		n, err := syscall.Pread(int(f), p, off)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return max(n, 0), err
	}
}

// size is the length of a file or a block device: where its end is.
func (f sysFile) size() (int64, error) {
	return syscall.Seek(int(f), 0, io.SeekEnd)
}

func (f sysFile) close() error {
	return syscall.Close(int(f))
}
