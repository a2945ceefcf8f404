package kubelet

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fedbr/fedbr/internal/lab/labdns"
)

// TestOwnHosts: a container resolves the lab's cluster DNS through an /etc/hosts of its own:
// a name of its cluster's domain also in its short forms, another cluster's name only fully
// qualified, its pod's hostAliases; it runs as its user; the node's /etc/hosts is untouched.
func TestOwnHosts(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	if err := labdns.Write(l.dnsDir, "dp1.local", ns, []labdns.Entry{{IP: "127.0.91.10", Name: "basic-pd-peer.tidb.svc.dp1.local"}}); err != nil {
		t.Fatal(err)
	}
	if err := labdns.Write(l.dnsDir, "dp2.local", ns, []labdns.Entry{{IP: "127.0.92.10", Name: "other-pd-peer.tidb.svc.dp2.local"}}); err != nil {
		t.Fatal(err)
	}
	script := `id -u; id -G
for n in basic-pd-peer.tidb.svc.dp1.local basic-pd-peer.tidb.svc basic-pd-peer.tidb other-pd-peer.tidb.svc.dp2.local other-pd-peer.tidb bucket.example; do
  getent hosts $n | awk '{print $1}' | grep . || echo "$n unknown"
done`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hosts", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		HostAliases:   []corev1.HostAlias{{IP: "127.0.93.1", Hostnames: []string{"bucket.example"}}},
		Containers: []corev1.Container{{Name: "probe", Image: "shell:latest", Command: []string{"sh", "-c", script},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](1001)}}},
		SecurityContext: &corev1.PodSecurityContext{SupplementalGroups: []int64{4000}},
	}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "hosts", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	out := l.logs(ctx, t, ns, "hosts")
	want := `1001
1001 4000
127.0.91.10
127.0.91.10
127.0.91.10
127.0.92.10
other-pd-peer.tidb unknown
127.0.93.1
`
	if got.Status.Phase != corev1.PodSucceeded || out != want {
		t.Errorf("phase %s, output (-want +got):\n%s", got.Status.Phase, cmp.Diff(want, out))
	}
	// Only the pod saw those names.
	if hosts, err := os.ReadFile("/etc/hosts"); err != nil || strings.Contains(string(hosts), "dp1.local") {
		t.Errorf("the node's /etc/hosts changed: %v\n%s", err, hosts)
	}
	if addrs, err := net.LookupHost("basic-pd-peer.tidb.svc.dp1.local"); err == nil {
		t.Errorf("the node resolves a pod's name: %v", addrs)
	}
}
