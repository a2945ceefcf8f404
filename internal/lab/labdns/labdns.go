// Package labdns is the lab's cluster DNS. A real EKS cluster resolves Service names with
// CoreDNS, and a TiDB cluster spread over several Kubernetes clusters (tidb-operator's
// spec.cluster with a clusterDomain) needs each cluster's names to resolve in the others. The
// lab has neither: its pods are processes on one machine whose static binaries resolve names
// from /etc/hosts and DNS only. So the lab keeps a table of names:
//
//   - each data plane's stand-in tidb-operator writes the fully qualified names of the Services
//     it makes (Write: DIR/<cluster>/<key>.hosts, one "IP NAME" line each);
//   - each lab node gives every container its own /etc/hosts (Hosts), as the kubelet gives every
//     pod its own, with the table in it: every plane's fully qualified names, and for the
//     node's own cluster domain also the short forms its search path would complete
//     (<svc>.<ns>.svc and <svc>.<ns>), so a name of another cluster resolves only with its
//     domain, as across real clusters.
package labdns

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is one name of the table.
type Entry struct {
	IP string
	// Name is fully qualified: <service>.<namespace>.svc.<cluster domain>.
	Name string
}

// Domain is the cluster domain of the lab cluster named cluster (tidb-operator's clusterDomain,
// the kubelet's --cluster-domain).
func Domain(cluster string) string { return cluster + domainSuffix }

const domainSuffix = ".local"

// NoProxy is NO_PROXY for a pod that has an HTTPS proxy: every lab cluster's Service names
// (<svc>.<ns>.svc and the fully qualified ones of every domain) are reached directly, as a real
// pod behind an egress proxy reaches its cluster's Services.
const NoProxy = ".svc," + domainSuffix

// ServiceName is the fully qualified name of Service svc in namespace ns of domain.
func ServiceName(svc, ns, domain string) string { return svc + "." + ns + ".svc." + domain }

// Write makes DIR/<cluster>/<key>.hosts hold exactly entries, replacing it at once (readers see
// the old table or the new one). No entries removes the file.
func Write(dir, cluster, key string, entries []Entry) error {
	d := filepath.Join(dir, cluster)
	path := filepath.Join(d, key+".hosts")
	if len(entries) == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	var b bytes.Buffer
	for _, e := range entries {
		if net.ParseIP(e.IP) == nil || strings.ContainsAny(e.Name, " \t\n#") || e.Name == "" {
			return fmt.Errorf("lab DNS entry %q %q: want an IP address and a name", e.IP, e.Name)
		}
		fmt.Fprintf(&b, "%s %s\n", e.IP, e.Name)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(d, "."+key+"-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// Read is every entry of the table under dir, sorted by name (none when dir is missing).
func Read(dir string) ([]Entry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.hosts"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, path := range files {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue // replaced or removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && net.ParseIP(f[0]) != nil {
				out = append(out, Entry{IP: f[0], Name: f[1]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Name < out[j].Name || (out[i].Name == out[j].Name && out[i].IP < out[j].IP)
	})
	return out, nil
}

// Pod is what a pod's own /etc/hosts says of the pod itself.
type Pod struct {
	Hostname string
	IP       string
	// Aliases are the pod's spec.hostAliases: IP and its names.
	Aliases []Alias
}

// Alias is one spec.hostAliases entry.
type Alias struct {
	IP        string
	Hostnames []string
}

// Hosts is the /etc/hosts of a container of pod on a node of the cluster whose domain is domain:
// localhost, the pod's own name, its host aliases (as the kubelet writes them), then the
// table (see the package comment for the short forms of the own domain).
func Hosts(pod Pod, domain string, table []Entry) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (lab node).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if pod.IP != "" && pod.Hostname != "" {
		fmt.Fprintf(&b, "%s\t%s\n", pod.IP, pod.Hostname)
	}
	if len(pod.Aliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Aliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	if len(table) > 0 {
		b.WriteString("\n# Lab cluster DNS.\n")
	}
	own := ".svc." + domain
	for _, e := range table {
		names := []string{e.Name}
		if short, ok := strings.CutSuffix(e.Name, own); ok && domain != "" {
			names = append(names, short+".svc", short)
		}
		fmt.Fprintf(&b, "%s\t%s\n", e.IP, strings.Join(names, " "))
	}
	return b.Bytes()
}

// Lookup is the address host has on a node of domain's cluster: a table name, or a short form
// of one in domain. An IP address is itself. It is what a lab process that is not a pod (the
// stand-in tidb-operator) resolves with, as the real operator resolves with its cluster's DNS.
func Lookup(table []Entry, domain, host string) (string, bool) {
	if net.ParseIP(host) != nil {
		return host, true
	}
	host = strings.TrimSuffix(host, ".")
	for _, e := range table {
		if e.Name == host {
			return e.IP, true
		}
		if short, ok := strings.CutSuffix(e.Name, ".svc."+domain); ok && domain != "" && (host == short || host == short+".svc") {
			return e.IP, true
		}
	}
	return "", false
}
