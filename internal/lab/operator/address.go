package operator

import (
	"fmt"
	"net"
	"strconv"
)

// Fixed ports of the real components, used when each member has its own loopback IP.
const (
	PDPort   = 2379
	TiKVPort = 20160
)

// tikvPortOffset separates TiKV ports from PD ports in a port block.
const tikvPortOffset = 100

// Addressing fixes every member's address. Lab pods share the host network, so each member
// needs an address of its own: with IPPrefix set ("127.0.N"), PD member i listens on
// 127.0.N.(10+i):2379 and TiKV i on 127.0.N.(100+i):20160; otherwise on Host (default
// 127.0.0.1) with PD i on BasePort+i and TiKV i on BasePort+100+i. StoreIDBase+i+1 is TiKV i's
// store id, so several lab clusters of one federated TiDB cluster get distinct store ids.
type Addressing struct {
	IPPrefix    string
	Host        string
	BasePort    int
	StoreIDBase uint64
}

// Validate reports a configuration that cannot give distinct addresses.
func (a Addressing) Validate() error {
	if a.IPPrefix != "" {
		ip := net.ParseIP(a.IPPrefix + ".1")
		if ip == nil || !ip.IsLoopback() || ip.To4() == nil {
			return fmt.Errorf("ip prefix %q: want three octets of a loopback address such as 127.0.1", a.IPPrefix)
		}
		return nil
	}
	if a.BasePort <= 0 || a.BasePort+2*tikvPortOffset > 65535 {
		return fmt.Errorf("base port %d: want 1..%d, or an ip prefix", a.BasePort, 65535-2*tikvPortOffset)
	}
	return nil
}

func (a Addressing) host() string {
	if a.Host == "" {
		return "127.0.0.1"
	}
	return a.Host
}

// PD is PD member ordinal's host:port.
func (a Addressing) PD(ordinal int) string {
	if a.IPPrefix != "" {
		return net.JoinHostPort(a.IPPrefix+"."+strconv.Itoa(10+ordinal), strconv.Itoa(PDPort))
	}
	return net.JoinHostPort(a.host(), strconv.Itoa(a.BasePort+ordinal))
}

// TiKV is TiKV member ordinal's host:port.
func (a Addressing) TiKV(ordinal int) string {
	if a.IPPrefix != "" {
		return net.JoinHostPort(a.IPPrefix+"."+strconv.Itoa(100+ordinal), strconv.Itoa(TiKVPort))
	}
	return net.JoinHostPort(a.host(), strconv.Itoa(a.BasePort+tikvPortOffset+ordinal))
}

// StoreID is TiKV member ordinal's store id.
func (a Addressing) StoreID(ordinal int) uint64 { return a.StoreIDBase + uint64(ordinal) + 1 }

// Annotations on a TidbCluster that override the operator's Addressing for it, so several
// TidbClusters in one lab cluster get distinct addresses.
const (
	AnnotationIPPrefix    = "lab.fedbr.io/ip-prefix"
	AnnotationBasePort    = "lab.fedbr.io/base-port"
	AnnotationStoreIDBase = "lab.fedbr.io/store-id-base"
)

// For returns a with the TidbCluster's address annotations applied: an ip prefix or a base
// port replaces both of a's (one scheme per cluster), a store id base replaces a's.
func (a Addressing) For(annotations map[string]string) (Addressing, error) {
	out := a
	if v, ok := annotations[AnnotationIPPrefix]; ok {
		out.IPPrefix, out.BasePort = v, 0
	}
	if v, ok := annotations[AnnotationBasePort]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return a, fmt.Errorf("annotation %s=%q: %w", AnnotationBasePort, v, err)
		}
		out.IPPrefix, out.BasePort = "", n
	}
	if v, ok := annotations[AnnotationStoreIDBase]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return a, fmt.Errorf("annotation %s=%q: %w", AnnotationStoreIDBase, v, err)
		}
		out.StoreIDBase = n
	}
	return out, out.Validate()
}
