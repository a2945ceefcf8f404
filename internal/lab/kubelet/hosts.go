package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/lab/labdns"
)

// The tools that give a container its own /etc/hosts (util-linux's unshare, setpriv and mount,
// and a shell), found once.
var hostsTools struct {
	once                        sync.Once
	unshare, setpriv, mount, sh string
	err                         error
}

func findOwnHostsTools() error {
	hostsTools.once.Do(func() {
		for _, t := range []struct {
			name string
			to   *string
		}{{"unshare", &hostsTools.unshare}, {"setpriv", &hostsTools.setpriv}, {"mount", &hostsTools.mount}, {"sh", &hostsTools.sh}} {
			p, err := exec.LookPath(t.name)
			if err != nil {
				hostsTools.err = fmt.Errorf("a hosts file per pod (--dns-dir) needs %s (util-linux): %w", t.name, err)
				return
			}
			*t.to = p
		}
	})
	return hostsTools.err
}

// hosts is the pod's /etc/hosts over table, the lab DNS table (labdns.Hosts).
func (r *podRun) hosts(table []labdns.Entry) []byte {
	pod := labdns.Pod{Hostname: r.spec.Name, IP: r.p.o.Address}
	if r.spec.Spec.Hostname != "" {
		pod.Hostname = r.spec.Spec.Hostname
	}
	for _, a := range r.spec.Spec.HostAliases {
		pod.Aliases = append(pod.Aliases, labdns.Alias{IP: a.IP, Hostnames: a.Hostnames})
	}
	return labdns.Hosts(pod, r.p.o.ClusterDomain, table)
}

// hostsRefresh is how often the node's pods' hosts files follow the lab DNS table.
const hostsRefresh = time.Second

// followHosts keeps the hosts files of every container of the node's pods in step with the lab
// DNS table until ctx ends, as a cluster DNS answers for a Service made after a pod started: a
// name published later (a TidbCluster's PD made after the step that dials it, say) resolves once
// it is there. The table is read once a pass; a file is rewritten in place (its inode is the one
// bound at /etc/hosts), and only when it changed; Go's resolver reads /etc/hosts again when its
// modification time moves.
func (p *provider) followHosts(ctx context.Context) {
	t := time.NewTicker(hostsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		table, err := labdns.Read(p.o.DNSDir)
		if err != nil {
			continue
		}
		p.mu.Lock()
		pods := make([]*podRun, 0, len(p.pods))
		for _, r := range p.pods {
			pods = append(pods, r)
		}
		p.mu.Unlock()
		for _, r := range pods {
			want := r.hosts(table)
			files, _ := filepath.Glob(filepath.Join(r.dir, "containers", "*", "hosts"))
			for _, f := range files {
				if have, err := os.ReadFile(f); err == nil && !bytes.Equal(have, want) {
					_ = os.WriteFile(f, want, 0o644)
				}
			}
		}
	}
}

// ownHosts writes the container's hosts file (labdns.Hosts over the table as it is now) at
// path and returns the argv that runs args with it at /etc/hosts, as id: a mount namespace of
// its own whose mounts follow the node's (slave: a volume the node unmounts goes there too),
// the hosts file bound over /etc/hosts, then setpriv to id with the parent-death signal set
// again (a change of user clears it). Each tool execs the next, so the container keeps its pid.
func (r *podRun) ownHosts(path string, id identity, args []string) ([]string, error) {
	table, err := labdns.Read(r.p.o.DNSDir)
	if err != nil {
		return nil, fmt.Errorf("lab DNS table: %w", err)
	}
	hosts := r.hosts(table)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, hosts, 0o644); err != nil {
		return nil, err
	}
	t := &hostsTools
	groups := "--clear-groups"
	if len(id.groups) > 0 {
		gs := make([]string, len(id.groups))
		for i, g := range id.groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		groups = "--groups=" + strings.Join(gs, ",")
	}
	out := []string{t.unshare, "--mount", "--propagation", "slave", "--",
		t.sh, "-c", `m=$1; h=$2; shift 2; "$m" --bind "$h" /etc/hosts && exec "$@"`, "sh", t.mount, path,
		t.setpriv, "--reuid=" + strconv.FormatUint(uint64(id.uid), 10), "--regid=" + strconv.FormatUint(uint64(id.gid), 10), groups,
		"--pdeathsig=KILL", "--"}
	return append(out, args...), nil
}
