package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
)

// LogPath is where a container's log of one run is kept: a raw stdout+stderr file per
// restart, under <dir>/logs/<namespace>_<pod>_<uid>/<container>/<restartCount>.log, kept
// after the pod is deleted.
func LogPath(dir string, pod *corev1.Pod, container string, restart int) string {
	return filepath.Join(dir, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container, strconv.Itoa(restart)+".log")
}

// GetContainerLogs serves `kubectl logs`: the current (or, with Previous, the last) run of
// a container. Tail, LimitBytes, Follow and Previous are honoured; Timestamps, SinceSeconds
// and SinceTime are not, because the files hold raw output.
func (p *provider) GetContainerLogs(ctx context.Context, ns, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r := p.get(ns, name)
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	r.mu.Lock()
	restarts, running, found := -1, false, false
	for _, list := range [][]corev1.ContainerStatus{r.status.InitContainerStatuses, r.status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == container {
				found = true
				restarts = int(cs.RestartCount)
				running = cs.State.Running != nil
			}
		}
	}
	r.mu.Unlock()
	if !found {
		return nil, errdefs.NotFoundf("container %s is not in pod %s/%s", container, ns, name)
	}
	if opts.Previous {
		restarts--
		running = false
		if restarts < 0 {
			return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", container, name)
		}
	}
	path := LogPath(p.o.Dir, r.spec, container, restarts)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", path, err)
	}
	var rc io.ReadCloser = f
	if opts.Tail > 0 {
		b, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		rc = io.NopCloser(bytes.NewReader(tail(b, opts.Tail)))
	}
	if opts.Follow && running && opts.Tail <= 0 {
		rc = &follower{ctx: ctx, f: f, running: func() bool { return r.runs(container, restarts) }}
	}
	if opts.LimitBytes > 0 {
		rc = limited{io.LimitReader(rc, int64(opts.LimitBytes)), rc}
	}
	return rc, nil
}

// runs reports whether run number restart of the container is still going.
func (r *podRun) runs(container string, restart int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, list := range [][]corev1.ContainerStatus{r.status.InitContainerStatuses, r.status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == container {
				return int(cs.RestartCount) == restart && cs.State.Running != nil
			}
		}
	}
	return false
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return append(b[i+1:], '\n')
			}
		}
	}
	if len(b) == 0 {
		return b
	}
	return append(b, '\n')
}

type limited struct {
	io.Reader
	io.Closer
}

// follower reads a log file like `tail -f` until the container run ends.
type follower struct {
	ctx     context.Context
	f       *os.File
	running func() bool
}

func (fl *follower) Read(b []byte) (int, error) {
	for {
		n, err := fl.f.Read(b)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		if !fl.running() {
			// One last read: the process may have written before it ended.
			return fl.f.Read(b)
		}
		select {
		case <-fl.ctx.Done():
			return 0, io.EOF
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (fl *follower) Close() error { return fl.f.Close() }
