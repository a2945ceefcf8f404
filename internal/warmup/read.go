package warmup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// file is an open file or device. pread is one read at an offset: it may return fewer bytes
// than asked without an error (and 0 at the end).
type file interface {
	pread(p []byte, off int64) (int, error)
	size() (int64, error)
	close() error
}

// fileState is one file (or device) to read: its chunks are read concurrently through one
// descriptor, opened by the first worker that needs it and closed after its last chunk.
type fileState struct {
	entry
	path string
	base int64        // where the entry starts in the file: a Block target's segment offset
	left atomic.Int64 // chunks not read yet

	mu     sync.Mutex
	f      file
	direct bool
	spare  file // the O_DIRECT descriptor after a fallback, closed with f
	gone   bool
	closed bool
}

func newFileState(e entry, path string, chunk int64) *fileState {
	s := &fileState{entry: e, path: path}
	s.left.Store(chunkCount(e.Size, chunk))
	return s
}

// errGone marks a file removed after it was listed; it is skipped, not an error.
var errGone = errors.New("file removed since it was listed")

// job is one chunk of a file.
type job struct {
	s      *fileState
	off, n int64
}

// reader reads one target's files with a pool of workers.
type reader struct {
	t      *target
	sys    system
	log    *logger
	chunk  int64
	flags  int              // added to every open: O_NOFOLLOW for listed files
	onDone func(*fileState) // called once per fully read file
	ended  atomic.Int64     // files fully read or gone
	errMu  sync.Mutex       // guards err
	err    error            // the first failure
	cancel context.CancelFunc
}

// run reads files, in order, with workers concurrent reads, and returns nil only if every
// file was read (or vanished). The first failure stops the others.
func (r *reader) run(ctx context.Context, workers int, files []*fileState) error {
	ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	r.t.readStart.Store(time.Now().UnixNano())
	r.t.phase.Store(phaseReading)
	jobs := make(chan job, workers)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(jobs)
		r.produce(ctx, files, jobs)
	})
	for range workers {
		wg.Go(func() {
			buf := alignedBuffer(int(r.chunk))
			for j := range jobs {
				if ctx.Err() != nil {
					continue // drain: the producer stops soon
				}
				if err := r.readChunk(j, buf); err != nil {
					r.fail(err)
				}
			}
		})
	}
	wg.Wait()
	closeAll(files)
	switch {
	case r.ended.Load() == int64(len(files)):
		return nil
	case r.err != nil:
		return r.err
	case ctx.Err() != nil:
		return ctx.Err() // not its cause: that is another target's failure, reported there
	}
	// Only a bookkeeping bug gets here: never report a partial read as complete.
	return errors.New("stopped before reading every file")
}

func (r *reader) fail(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err == nil {
		r.err = err
	}
	r.cancel()
}

func (r *reader) produce(ctx context.Context, files []*fileState, jobs chan<- job) {
	for _, s := range files {
		n := chunkCount(s.Size, r.chunk)
		if n == 0 {
			r.finish(s) // empty: nothing to read
			continue
		}
		for i := range n {
			off, l := chunkAt(s.Size, r.chunk, i)
			select {
			case jobs <- job{s: s, off: s.base + off, n: l}:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (r *reader) readChunk(j job, buf []byte) error {
	f, direct, err := r.acquire(j.s)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", j.s.path, err)
	}
	got, err := readFull(f, direct, buf, j.off, j.n)
	if err != nil && direct && errors.Is(err, syscall.EINVAL) {
		// The file system accepted O_DIRECT at open but refuses its reads.
		if f, err = r.fallback(j.s, f, err); err == nil {
			got, err = readFull(f, false, buf, j.off, j.n)
		}
		if errors.Is(err, errGone) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", j.s.path, j.off+got, err)
	}
	r.t.bytes.Add(got)
	if j.s.left.Add(-1) == 0 {
		r.finish(j.s)
	}
	return nil
}

// acquire returns the file's descriptor, opening it on first use.
func (r *reader) acquire(s *fileState) (file, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return nil, false, errGone
	}
	if s.f != nil {
		return s.f, s.direct, nil
	}
	f, direct, err := r.open(s.path)
	if err != nil {
		if err := r.vanishIfGone(s, err); !errors.Is(err, fs.ErrPermission) || r.t.mode != FS {
			return nil, false, err
		}
		return nil, false, r.skipIfNotTiKVs(s, err)
	}
	s.f, s.direct = f, direct
	return f, direct, nil
}

func (r *reader) open(path string) (file, bool, error) {
	if r.t.direct {
		f, err := r.sys.open(path, r.flags|oDirect)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, false, err
		}
		r.fellBack(path, err)
	}
	f, err := r.sys.open(path, r.flags)
	return f, false, err
}

// fallback replaces the file's O_DIRECT descriptor old by a buffered one (once, whichever
// chunk fails first) and returns the buffered one.
func (r *reader) fallback(s *fileState, old file, cause error) (file, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return nil, errGone
	}
	if s.f != old || !s.direct {
		return s.f, nil // another chunk of the file fell back already
	}
	f, err := r.sys.open(s.path, r.flags)
	if err != nil {
		return nil, r.vanishIfGone(s, err)
	}
	s.spare, s.f, s.direct = old, f, false
	r.fellBack(s.path, cause)
	return f, nil
}

// vanishIfGone marks a listed file that no longer exists as gone (TiKV deleted it after a
// compaction) and returns errGone, or returns err. Called with s.mu held.
func (r *reader) vanishIfGone(s *fileState, err error) error {
	if r.t.mode != FS || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.gone = true
	r.t.vanished.Add(1)
	r.ended.Add(1)
	return errGone
}

// skipIfNotTiKVs skips a listed file the warm-up may not open when it is not TiKV's
// (permissionDenied), returning errGone, or returns the run's error. Called with s.mu held.
func (r *reader) skipIfNotTiKVs(s *fileState, err error) error {
	if err := permissionDenied(s.Rel, err); err != nil {
		return err
	}
	r.log.logf("Skipping %s: not TiKV's, and user %d may not read it (%v)", s.path, os.Geteuid(), err)
	s.gone = true
	r.t.unreadable.Add(1)
	r.ended.Add(1)
	return errGone
}

func (r *reader) fellBack(path string, err error) {
	r.t.buffered.Store(true)
	r.t.fellBack.Do(func() {
		r.log.logf("Reading %s with buffered I/O: the file system refuses O_DIRECT (%s: %v), so the page cache keeps what is read",
			r.t.path, path, err)
	})
}

func (r *reader) finish(s *fileState) {
	s.close()
	r.ended.Add(1)
	r.t.doneFiles.Add(1)
	if r.onDone != nil {
		r.onDone(s)
	}
}

func (s *fileState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, f := range []file{s.f, s.spare} {
		if f != nil {
			_ = f.close() // read only: nothing to lose
		}
	}
}

func closeAll(files []*fileState) {
	for _, s := range files {
		s.close()
	}
}

// readFull reads n bytes at off into buf, or fewer at the end of the file (it may have
// shrunk since it was listed). With O_DIRECT every read starts aligned and its length is
// rounded up to Align, as the end of the file may be anywhere in its last block: a read that
// ends unaligned has reached the end. It returns the bytes read (at most n).
func readFull(f file, direct bool, buf []byte, off, n int64) (int64, error) {
	var got int64
	for got < n {
		end := n
		if direct {
			end = alignUp(n)
		}
		m, err := f.pread(buf[got:end], off+got)
		if err != nil {
			return got, err
		}
		if m == 0 {
			break // end of file
		}
		got += int64(m)
		if direct && got%Align != 0 {
			break
		}
	}
	return min(got, n), nil
}

// chunkCount is the number of chunks of a file of size bytes.
func chunkCount(size, chunk int64) int64 {
	return (size + chunk - 1) / chunk
}

// chunkAt is the offset and length of chunk i; the last one may be shorter.
func chunkAt(size, chunk, i int64) (off, n int64) {
	off = i * chunk
	return off, min(chunk, size-off)
}

func alignUp(n int64) int64 {
	return (n + Align - 1) &^ (Align - 1)
}

// alignedBuffer returns n bytes starting on an Align boundary, as O_DIRECT needs. Go's heap
// does not move objects, so the alignment lasts.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+Align)
	skip := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1)) //nolint:gosec // G103: reads the address only, to align the buffer for O_DIRECT
	if skip != 0 {
		skip = Align - skip
	}
	return b[skip : skip+n : skip+n]
}
