// Package port hands out free loopback ports to the lab's processes. The kernel's answer to
// "listen on port 0" is only free until the listener closes, and the lab brings its clusters
// up concurrently: two clusters asking at once could be given the same port (seen: control's
// and dp1's etcd both on one port). So every port handed out in this process is remembered
// and never handed out again.
package port

import (
	"fmt"
	"net"
	"sync"
)

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Free returns n distinct free loopback ports, none of them returned before by this process.
func Free(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("finding %d free ports: the kernel keeps returning ports already handed out", n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l) // held open until all n are found, so the kernel gives distinct ones
		p := l.Addr().(*net.TCPAddr).Port
		if handed[p] {
			continue
		}
		handed[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}
