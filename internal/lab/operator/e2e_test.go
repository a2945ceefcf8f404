package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
	"github.com/fedbr/fedbr/internal/lab/port"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestEndToEnd runs the operator in a real lab cluster with one process node: PD and three TiKV
// double processes (the fedbr-lab binary) run on statically provisioned volumes, and
// status.tikv.stores fills in from PD's store list. Every process started is gone at the end.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, a node and PD/TiKV processes")
	}
	base := t.TempDir()
	root := testenv.RepoRoot()
	fedbr := testenv.Binary(t, "fedbr-lab")
	bin, err := controlplane.DefaultBinDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cpDir := filepath.Join(base, "cp")
	st, err := controlplane.Up(ctx, controlplane.Options{Dir: cpDir, BinDir: bin, Clusters: []string{"dp1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlplane.Down(context.Background(), cpDir, 10*time.Second); err != nil {
			t.Errorf("control plane down: %v", err)
		}
	})
	raw, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, "dp1", nil, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "test", "fixtures", "crd", "pingcap.com_tidbclusters.yaml")}}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	startNode(t, cfg, base, fedbr)

	// Static volumes, pre-bound to the claims the operator will make.
	const class = "lab-static"
	claims := []string{PVCName("basic", ComponentPD, 0)}
	for i := range 3 {
		claims = append(claims, PVCName("basic", ComponentTiKV, i))
	}
	for _, name := range claims {
		// A hostPath PV's directory must exist, as on a real node, and be writable by the
		// members' user 65532: the kubelet applies no fsGroup to hostPath volumes.
		dir := filepath.Join(base, "volumes", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: class,
				ClaimRef:         &corev1.ObjectReference{Namespace: "tidb", Name: name},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join(base, "volumes", name), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
			},
		}
		if err := c.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
	}

	ports := freeBlock(t, 3)
	startOperator(t, &testenv.Env{Config: cfg}, Config{Addressing: Addressing{BasePort: ports}, Image: "fedbr"})

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{
			PD: &pcv1alpha1.ComponentSpec{Replicas: 1, StorageClassName: ptr.To(class)},
			TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3, StorageClassName: ptr.To(class),
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, c, filepath.Join(base, "node"))
		}
	})
	pids := map[int]bool{}
	t.Cleanup(func() {
		// The processes die with their pods; none may outlive the test.
		for pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d outlived its pod", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	eventually(t, "three stores Up in status", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			return false, err
		}
		up := 0
		for _, s := range tc.Status.TiKV.Stores {
			if s.State == "Up" && strings.HasPrefix(s.PodName, "basic-tikv-") && s.IP == "127.0.0.1" {
				up++
			}
		}
		return up == 3, nil
	})
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("tidb")); err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
		for _, cs := range p.Status.ContainerStatuses {
			if pid, err := strconv.Atoi(strings.TrimPrefix(cs.ContainerID, "lab://")); err == nil {
				pids[pid] = true
			}
		}
	}
	if running != 4 {
		t.Errorf("running pods = %d, want PD and 3 TiKV", running)
	}
	if m := tc.Status.PD.Members["basic-pd-0"]; !m.Health || m.ClientURL != fmt.Sprintf("http://127.0.0.1:%d", ports) {
		t.Errorf("PD member = %+v", m)
	}

	// Deleting the TidbCluster deletes its pods (garbage collector), which stops the processes.
	if err := c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pods gone", func() (bool, error) {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace("tidb"))
		return len(pods.Items) == 0, err
	})
}

func startNode(t *testing.T, cfg *rest.Config, base, fedbr string) {
	t.Helper()
	cs, err := kubernetesClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := kubelet.New(kubelet.Options{
		Name: "dp1-node-a", Zone: "us-west-2a", Dir: filepath.Join(base, "node"), Client: cs, Server: cfg.Host,
		Images: kubelet.Images{{Pattern: "fedbr", Entrypoint: fedbr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	select {
	case <-n.Ready():
	case err := <-done:
		t.Fatalf("node exited: %v", err)
	case <-time.After(waitBound):
		t.Fatal("node not ready")
	}
}

// kubernetesClient gives the node its own client, so the test's polling does not throttle it.
func kubernetesClient(cfg *rest.Config) (kubernetes.Interface, error) {
	nodeCfg := rest.CopyConfig(cfg)
	nodeCfg.QPS, nodeCfg.Burst = 50, 100
	return kubernetes.NewForConfig(nodeCfg)
}

// dumpPods logs pod states and the tail of every container log, to explain a failure.
func dumpPods(t *testing.T, c client.Client, nodeDir string) {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace("tidb")); err != nil {
		t.Logf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		t.Logf("pod %s: node %q phase %s conditions %+v containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.Conditions, p.Status.ContainerStatuses)
	}
	logs, _ := filepath.Glob(filepath.Join(nodeDir, "logs", "*", "*", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		t.Logf("%s:\n%s", l, b)
	}
}

// freeBlock returns a base port whose PD port and first tikvs TiKV ports are free now and lie
// below the kernel's ephemeral range: a port from "listen on port 0" could be taken by an
// outgoing connection before the TiKV process binds it (seen in CI: "bind: address already in use").
func freeBlock(t *testing.T, tikvs int) int {
	t.Helper()
	offsets := []int{0}
	for i := range tikvs {
		offsets = append(offsets, tikvPortOffset+i)
	}
	base, err := port.Block(offsets...)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
