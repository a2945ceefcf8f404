// Package port hands out free loopback ports to the lab's processes, which are told their port
// on the command line and bind it later. Two races can take such a port in between:
//
//   - the lab brings its clusters up concurrently, so two clusters asking at once could be given
//     the same port (seen: control's and dp1's etcd both on one port): every port handed out in
//     this process is remembered and never handed out again;
//   - a port the kernel gave for "listen on port 0" lies in its ephemeral range, the range it also
//     takes source ports of outgoing connections from; once that listener closes, any connection
//     (an API server dialling its etcd) may take it before the component binds it (seen in CI:
//     kube-scheduler "bind: address already in use"). So ports come from below the ephemeral
//     range, where the kernel never picks on its own, each checked free by binding it.
package port

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the bottom of the range ports are handed out from; the top is the start of the
// kernel's ephemeral range.
const lowest = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Free returns n distinct free loopback ports, none of them returned before by this process.
func Free(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	top := ephemeralStart()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("finding %d free ports in [%d, %d): too many in use or handed out", n, lowest, top)
		}
		p := lowest + rand.IntN(top-lowest)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // in use: try another
		}
		ls = append(ls, l) // held open until all n are found
		handed[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// Block returns a base port such that base+o is free for every offset o (each offset >= 0),
// chosen, checked and remembered as Free's ports are: for a component told one base and
// deriving its other ports from it (the lab's TidbCluster operator's port block).
func Block(offsets ...int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	top := ephemeralStart()
	span := 0
	for _, o := range offsets {
		if o < 0 {
			return 0, fmt.Errorf("port block offset %d: want >= 0", o)
		}
		span = max(span, o)
	}
	if lowest+span >= top {
		return 0, fmt.Errorf("port block spanning %d ports does not fit in [%d, %d)", span+1, lowest, top)
	}
	for range 100 {
		base := lowest + rand.IntN(top-lowest-span)
		var ls []net.Listener
		free := true
		for _, o := range offsets {
			if handed[base+o] {
				free = false
				break
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+o))
			if err != nil {
				free = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if free {
			for _, o := range offsets {
				handed[base+o] = true
			}
			return base, nil
		}
	}
	return 0, fmt.Errorf("finding a free port block of offsets %v in [%d, %d): too many in use or handed out", offsets, lowest, top)
}

// ephemeralStart reads the start of the kernel's ephemeral port range (Linux's default is
// 32768); where it cannot be read or leaves too little room below it, it assumes that default.
func ephemeralStart() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) < 1 {
		return linuxDefault
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start < lowest+1000 {
		return linuxDefault
	}
	return start
}
