package kubelet

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fedbr/fedbr/internal/lab/labdns"
	"github.com/fedbr/fedbr/internal/mountinfo"
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

// TestVolumeUnmountReachesOtherContainers: a container's own mount namespace (for its
// /etc/hosts) is a copy of the node's made when it starts, so it holds every volume mounted
// then. When the node unmounts such a volume, the unmount must reach that namespace too, or the
// file system stays mounted there, its loop device attached, while the volume is detached and
// may be attached elsewhere: two writers of one ext4. The node removes the mount point after
// the unmount, and the kernel then detaches the copies (unstage).
func TestVolumeUnmountReachesOtherContainers(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	volID := l.freshVolume(ctx, t, ns)
	sleeper := func(name string, claim bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "sleep", Image: "shell:latest", Command: []string{"sh", "-c", "exec sleep 600"}}}}}
		if claim {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}
		if _, err := l.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return l.waitPod(ctx, t, ns, name, "running", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		})
	}
	sleeper("holder", true)
	// The volume's mount point on the node.
	var point string
	for _, m := range mustMounts(t, "/proc/self/mountinfo") {
		if strings.HasPrefix(m, filepath.Join(l.nodeDir, "volumes")+"/") && strings.Contains(m, volID) {
			point = m
		}
	}
	if point == "" {
		t.Fatalf("volume %s is not mounted under %s/volumes", volID, l.nodeDir)
	}
	bystander := sleeper("bystander", false)
	pid := strings.TrimPrefix(bystander.Status.ContainerStatuses[0].ContainerID, "lab://")
	if !slices.Contains(mustMounts(t, "/proc/"+pid+"/mountinfo"), point) {
		t.Fatalf("the bystander's namespace (pid %s) never had %s: the test proves nothing", pid, point)
	}
	if err := l.client.CoreV1().Pods(ns).Delete(ctx, "holder", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() (bool, error) {
		return !slices.Contains(mustMounts(t, "/proc/self/mountinfo"), point), nil
	}); err != nil {
		t.Fatalf("the node never unmounted %s: %v", point, err)
	}
	if slices.Contains(mustMounts(t, "/proc/"+pid+"/mountinfo"), point) {
		t.Errorf("%s is unmounted on the node but still mounted in the bystander's namespace", point)
	}
	_ = l.client.CoreV1().Pods(ns).Delete(ctx, "bystander", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

// mustMounts are the mount points of a mount table (/proc/PID/mountinfo).
func mustMounts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mountinfo.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Point)
	}
	return out
}
