package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/lab/labdns"
)

// TestHostsFollowTheTable: a running pod's hosts file takes a name published after the pod
// started, as a cluster DNS answers for a Service made later (the PD a scratch restore's
// TidbCluster starts after the step that dials it).
func TestHostsFollowTheTable(t *testing.T) {
	dns, dir := t.TempDir(), t.TempDir()
	p := &provider{o: Options{DNSDir: dns, ClusterDomain: "dp3.local", Address: "127.0.13.1"}, pods: map[string]*podRun{}}
	r := &podRun{p: p, dir: dir, spec: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "step", Namespace: "crash-0"}}}
	p.pods["crash-0/step"] = r
	path := filepath.Join(dir, "containers", "br", "hosts")
	if _, err := r.ownHosts(path, identity{}, []string{"fedbr"}); err != nil {
		t.Fatal(err)
	}
	name := labdns.ServiceName("basic-pd-peer", "crash-0", "dp1.local")
	if b, _ := os.ReadFile(path); strings.Contains(string(b), name) {
		t.Fatalf("the name is there before it is published:\n%s", b)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go p.followHosts(ctx)
	if err := labdns.Write(dns, "dp1.local", "crash-0.basic", []labdns.Entry{{IP: "127.0.111.10", Name: name}}); err != nil {
		t.Fatal(err)
	}
	for {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), "127.0.111.10\t"+name) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the published name never reached the pod's hosts file")
		case <-time.After(50 * time.Millisecond):
		}
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("the hosts file was replaced, not rewritten: the file bound at /etc/hosts would keep the old table")
	}
}
