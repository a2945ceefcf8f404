package operator

import (
	"net"
	"sync"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/labdns"
)

// DNS is the operator's part of the lab's cluster DNS (labdns): it publishes the names of the
// PD Services it makes, as CoreDNS would serve them, and resolves names with the table, as the
// real operator resolves with its cluster's DNS. A nil or zero DNS does neither.
type DNS struct {
	// Dir is the table's directory; Domain this cluster's domain (labdns.Domain).
	Dir, Domain string

	mu      sync.Mutex
	written map[string]labdns.Entry
}

func (d *DNS) on() bool { return d != nil && d.Dir != "" && d.Domain != "" }

// publish writes the names of tc's PD Service (<tc>-pd and <tc>-pd-peer in tc's namespace and
// the cluster's domain) when tc runs a PD of its own, once per change.
func (d *DNS) publish(tc *pcv1alpha1.TidbCluster, a Addressing) error {
	if !d.on() || !hasLocalPD(tc) {
		return nil
	}
	b, err := a.For(tc.Annotations)
	if err != nil {
		return nil // ComputePlan refuses the TidbCluster
	}
	host, _, err := net.SplitHostPort(b.PD(0))
	if err != nil || net.ParseIP(host) == nil {
		return nil
	}
	key := tc.Namespace + "." + tc.Name
	first := labdns.Entry{IP: host, Name: labdns.ServiceName(ServiceName(tc.Name), tc.Namespace, d.Domain)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.written[key] == first {
		return nil
	}
	entries := []labdns.Entry{first, {IP: host, Name: labdns.ServiceName(ServiceName(tc.Name)+"-peer", tc.Namespace, d.Domain)}}
	if err := labdns.Write(d.Dir, d.Domain, key, entries); err != nil {
		return err
	}
	if d.written == nil {
		d.written = map[string]labdns.Entry{}
	}
	d.written[key] = first
	return nil
}

// forget removes the names of a TidbCluster that is gone.
func (d *DNS) forget(namespace, name string) error {
	if !d.on() {
		return nil
	}
	key := namespace + "." + name
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.written, key)
	return labdns.Write(d.Dir, d.Domain, key, nil)
}

// resolve turns host:port into ip:port with the table; what it cannot resolve is returned
// as it is (the dial then fails naming it).
func (d *DNS) resolve(hostPort string) string {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || !d.on() || net.ParseIP(host) != nil {
		return hostPort
	}
	table, err := labdns.Read(d.Dir)
	if err != nil {
		return hostPort
	}
	if ip, ok := labdns.Lookup(table, d.Domain, host); ok {
		return net.JoinHostPort(ip, port)
	}
	return hostPort
}
