package lab

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
	"github.com/fedbr/fedbr/internal/lab/operator"
	"github.com/fedbr/fedbr/internal/testenv"
	"github.com/fedbr/fedbr/internal/warmup"
)

// bins holds the binaries TestMain finds or builds: fedbr-lab (what every lab process runs;
// testenv.Binary) and the probe program of the kubelet tests (a container that reports signals).
var bins struct {
	dir, fedbr, probe string
	err               error
}

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		bins.err = build()
	}
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

func build() error {
	dir, err := os.MkdirTemp("", "fedbr-lab-test-")
	if err != nil {
		return err
	}
	bins.dir, bins.probe = dir, filepath.Join(dir, "probe")
	if bins.fedbr, err = testenv.BinaryPath("fedbr-lab"); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", bins.probe, "./internal/lab/kubelet/testdata/probe")
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build the probe: %w: %s", err, b)
	}
	return nil
}

// world is the running lab with a client per cluster.
type world struct {
	lab     *env.Lab
	kube    map[string]kubernetes.Interface
	client  map[string]client.Client
	markers string // host folder the probe containers write their SIGTERM markers into
	pids    map[int]string
}

// TestLab is the lab's Done-when, in one lab (bringing one up costs about 45 s): four clusters
// come up in one call; a Job runs to completion on a process node with its exit code and logs
// visible; deleting a pod sends its process SIGTERM; a StatefulSet runs on claims the nodes
// provision in the AWS double and attach to their instances; `fedbr warmup --block` over a
// regular file standing for the device resumes in a second pod from the checkpoint the first,
// deleted mid-read, left; one TiDB cluster with three TiKV in each of three data planes serves
// the bank workload, whose checker passes, and goes when deleted; then the playground
// (testInstall) in the same clusters; and Down leaves no process behind.
func TestLab(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up four Kubernetes clusters, nodes, operators and the AWS double")
	}
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	binDir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if keep := os.Getenv("FEDBR_E2E_LAB_DIR"); keep != "" {
		if err := os.RemoveAll(keep); err != nil {
			t.Fatal(err)
		}
		dir = keep
	}
	start := time.Now()
	testenv.LabDownAfterExit(t, bins.fedbr, dir)
	l, err := env.Up(ctx, env.Options{
		Dir: dir, Fedbr: bins.fedbr, BinDir: binDir, CRDDirs: controlplane.DefaultCRDDirs(testenv.RepoRoot()),
		// A block of its own, so a lab a developer runs with the default --ip-base stays
		// untouched (and room for the playground restore's block at +100 below 255).
		IPBase: 20 + os.Getpid()%100,
		Images: []string{"probe=" + bins.probe, "sh=/bin/sh"},
		Log:    t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab up took %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = env.Down(context.Background(), dir, 5*time.Second) })

	w := newWorld(t, l)
	checkDescription(t, w, dir)
	t.Run("Job", func(t *testing.T) { testJob(t, ctx, w) })
	t.Run("SIGTERM", func(t *testing.T) { testSIGTERM(t, ctx, w) })
	t.Run("BlockWarmup", func(t *testing.T) { testBlockWarmup(t, ctx, w) })
	t.Run("StatefulSet", func(t *testing.T) { testStatefulSet(t, ctx, w) })
	t.Run("TiDB", func(t *testing.T) { testTiDB(t, ctx, w) })
	t.Run("Install", func(t *testing.T) { testInstall(t, ctx, l, binDir) })
	t.Run("RBACUsed", func(t *testing.T) { testRBACUsed(t, l) })

	start = time.Now()
	if err := env.Down(ctx, dir, 10*time.Second); err != nil {
		t.Fatalf("down: %v", err)
	}
	t.Logf("lab down took %s", time.Since(start).Round(time.Millisecond))
	checkNothingLeft(t, w, dir)
}

func newWorld(t *testing.T, l *env.Lab) *world {
	t.Helper()
	w := &world{lab: l, kube: map[string]kubernetes.Interface{}, client: map[string]client.Client{}, markers: t.TempDir(), pids: map[int]string{}}
	s, err := operator.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Contexts {
		cfg, err := l.Config(c)
		if err != nil {
			t.Fatal(err)
		}
		if w.kube[c], err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if w.client[c], err = client.New(cfg, client.Options{Scheme: s}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// checkDescription checks lab.json against the clusters: zones, instances, CRDs, StorageClass.
func checkDescription(t *testing.T, w *world, dir string) {
	t.Helper()
	l, err := env.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Contexts, env.DefaultClusters) || l.Control != "control" || len(l.DataPlanes) != 3 || l.AWS.Endpoint == "" {
		t.Fatalf("lab.json = %+v", l)
	}
	ctx := context.Background()
	for i, d := range l.DataPlanes {
		if want := "us-west-2" + string(rune('a'+i)); d.Zone != want || d.StoreIDBase != uint64(1000*(i+1)) {
			t.Errorf("%s: zone %s store base %d, want %s and %d", d.Cluster, d.Zone, d.StoreIDBase, want, 1000*(i+1))
		}
		nodes, err := w.kube[d.Cluster].CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 3 {
			t.Errorf("%s has %d nodes, want 3", d.Cluster, len(nodes.Items))
		}
		for _, n := range nodes.Items {
			i := slices.IndexFunc(d.Nodes, func(x env.Node) bool { return x.Name == n.Name })
			if i < 0 || n.Labels[kubelet.ZoneLabel] != d.Zone || n.Spec.ProviderID != "aws:///"+d.Zone+"/"+d.Nodes[i].InstanceID {
				t.Errorf("node %s: zone %q providerID %q, lab.json %+v", n.Name, n.Labels[kubelet.ZoneLabel], n.Spec.ProviderID, d.Nodes)
			}
		}
	}
	for _, c := range l.Contexts {
		var tcs pcv1alpha1.TidbClusterList
		if err := w.client[c].List(ctx, &tcs); err != nil {
			t.Errorf("%s: the TidbCluster CRD is not served: %v", c, err)
		}
		if _, err := w.kube[c].StorageV1().StorageClasses().Get(ctx, l.StorageClass, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: StorageClass %s: %v", c, l.StorageClass, err)
		}
	}
}

func namespace(t *testing.T, ctx context.Context, w *world, cluster, name string) {
	t.Helper()
	cs := w.kube[cluster]
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "default service account in "+name, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// eventually polls f until it holds, fails, or ctx ends.
func eventually(t *testing.T, ctx context.Context, what string, f func() (bool, error)) {
	t.Helper()
	for {
		ok, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func probe(args ...string) corev1.Container {
	return corev1.Container{Name: "probe", Image: "probe", Args: args}
}

// record remembers the pids of a pod's containers, which must all be gone after Down.
func (w *world) record(p *corev1.Pod) {
	for _, cs := range p.Status.ContainerStatuses {
		if pid, err := strconv.Atoi(strings.TrimPrefix(cs.ContainerID, "lab://")); err == nil {
			w.pids[pid] = p.Namespace + "/" + p.Name
		}
	}
}

func testJob(t *testing.T, ctx context.Context, w *world) {
	const cluster, ns = "dp1", "jobs"
	cs := w.kube[cluster]
	namespace(t, ctx, w, cluster, ns)
	for name, code := range map[string]string{"ok": "0", "fails": "7"} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{probe("exit", code)}}},
		}}
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]batchv1.JobConditionType{"ok": batchv1.JobComplete, "fails": batchv1.JobFailed} {
		eventually(t, ctx, "job "+name+" "+string(want), func() (bool, error) {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range j.Status.Conditions {
				if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
					if c.Type != want {
						return false, fmt.Errorf("ended %s (%s)", c.Type, c.Message)
					}
					return true, nil
				}
			}
			return false, nil
		})
	}
	for name, wantCode := range map[string]int32{"ok": 0, "fails": 7} {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods of job %s: %v, %d", name, err, len(pods.Items))
		}
		p := pods.Items[0]
		w.record(&p)
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != wantCode {
			t.Errorf("job %s: container state %+v, want exit code %d", name, p.Status.ContainerStatuses[0].State, wantCode)
		}
		// Logs through the API server (kubectl logs) and from the node's files (fedbr-lab lab logs).
		b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(b), "hello from probe") || !strings.Contains(string(b), "exiting with "+strconv.Itoa(int(wantCode))) {
			t.Errorf("kubectl logs of %s = %q, %v", p.Name, b, err)
		}
		path, err := w.lab.LogFile([]string{cluster + "/" + ns + "/" + p.Name}, false)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := os.ReadFile(path); err != nil || string(f) != string(b) {
			t.Errorf("lab log %s = %q, %v; want what kubectl logs shows", path, f, err)
		}
	}
}

func testSIGTERM(t *testing.T, ctx context.Context, w *world) {
	const cluster, ns = "dp2", "signals"
	cs := w.kube[cluster]
	namespace(t, ctx, w, cluster, ns)
	c := probe("term")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "marker", MountPath: "/marker"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "term", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		Containers:                    []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "marker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: w.markers, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}},
	}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running *corev1.Pod
	eventually(t, ctx, "pod term running", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "term", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		running = p
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, nil
	})
	w.record(running)
	// The probe prints its line once its SIGTERM handler is installed.
	eventually(t, ctx, "probe waiting for SIGTERM", func() (bool, error) {
		b, err := cs.CoreV1().Pods(ns).GetLogs("term", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "waiting for SIGTERM"), nil
	})
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "term", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The process exits on SIGTERM, so the pod goes long before its 30 s grace period ends.
	eventually(t, ctx, "pod term gone", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "term", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if b, err := os.ReadFile(filepath.Join(w.markers, "term")); err != nil || string(b) != "SIGTERM" {
		t.Errorf("marker = %q, %v; want the probe to have seen SIGTERM", b, err)
	}
	for pid, pod := range w.pids {
		if pod == ns+"/term" && slices.Contains(env.Leftovers(w.lab.Dir), pid) {
			t.Errorf("process %d of the deleted pod still exists", pid)
		}
	}
}

// testBlockWarmup: a regular file on a hostPath stands for the block
// device. A first warm-up pod is deleted (SIGTERM) once its checkpoint recorded some segments;
// a second pod given the same arguments skips exactly those and reads the rest, and the
// checkpoint then records every segment.
func testBlockWarmup(t *testing.T, ctx context.Context, w *world) {
	const cluster, ns = "dp1", "warmup"
	const chunk, segment = 4096, 4096 * 256 // --chunk 4K: segments of 1 MiB
	cs := w.kube[cluster]
	namespace(t, ctx, w, cluster, ns)
	host := t.TempDir()
	dev := filepath.Join(host, "xvdf.img")
	// Sparse: 4 GiB of zeros read 4 KiB at a time by one worker, long enough to be stopped.
	const size = 4<<30 + 3*chunk + 100
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(dev, size); err != nil {
		t.Fatal(err)
	}
	segments := (size + segment - 1) / segment
	cpFile := filepath.Join(host, warmup.BlockCheckpointName+"vol_xvdf.img")
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{Name: "warmup", Image: "fedbr",
				// In-pod paths are relative to the container's root in the lab (job.InPod).
				Args: []string{"warmup", "--block", "vol/xvdf.img", "--checkpoint-dir", "vol", "--chunk", "4K", "--workers", "1",
					"--direct=false", "--progress-interval", "50ms"},
				VolumeMounts: []corev1.VolumeMount{{Name: "vol", MountPath: "/vol"}}}},
			Volumes: []corev1.Volume{{Name: "vol", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}}},
		}}
	}
	recorded := func() map[string]any {
		b, err := os.ReadFile(cpFile)
		if err != nil {
			return nil
		}
		var cp struct {
			Files map[string]any `json:"files"`
		}
		if err := json.Unmarshal(b, &cp); err != nil {
			t.Fatalf("checkpoint %s: %v", cpFile, err)
		}
		return cp.Files
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the first warm-up recorded a segment", func() (bool, error) { return len(recorded()) > 0, nil })
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "pod first gone", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "first", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// SIGTERM saved the checkpoint on the way out: what it holds now is what the second skips.
	first := len(recorded())
	if first == 0 || first >= segments {
		t.Fatalf("after the first pod: %d of %d segments recorded; want some but not all (a larger device stops it in time)", first, segments)
	}

	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done *corev1.Pod
	eventually(t, ctx, "pod second ended", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "second", metav1.GetOptions{})
		done = p
		return err == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed), nil
	})
	w.record(done)
	logs, err := cs.CoreV1().Pods(ns).GetLogs("second", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the second warm-up failed:\n%s", logs)
	}
	want := fmt.Sprintf("in %d segments; %d segments (", segments-first, first)
	if !strings.Contains(string(logs), want) {
		t.Errorf("the second warm-up's log lacks %q (the first's %d segments skipped):\n%s", want, first, logs)
	}
	skipped := fmt.Sprintf(`"skippedBytes": %d,`, first*segment)
	if !strings.Contains(string(logs), skipped) || !strings.Contains(string(logs), fmt.Sprintf(`"bytes": %d,`, size-first*segment)) {
		t.Errorf("the second warm-up's summary does not skip %d bytes and read the rest:\n%s", first*segment, logs)
	}
	if n := len(recorded()); n != segments {
		t.Errorf("the checkpoint records %d segments after the second warm-up, want all %d", n, segments)
	}
}

func testStatefulSet(t *testing.T, ctx context.Context, w *world) {
	const cluster, ns, replicas = "dp3", "web", 2
	cs := w.kube[cluster]
	namespace(t, ctx, w, cluster, ns)
	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		PodManagementPolicy: appsv1.ParallelPodManagement,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{Name: "web", Image: "sh",
				Command:      []string{"sh", "-c", `echo "$POD_NAME" > "$FEDBR_LAB_ROOT/data/owner" && exec sleep 3600`},
				Env:          []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}},
	}}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "StatefulSet web ready", func() (bool, error) {
		s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && s.Status.ReadyReplicas == replicas, err
	})
	admin := kubelet.AWSAdmin{Endpoint: w.lab.AWS.Endpoint}
	for i := range replicas {
		name := "web-" + strconv.Itoa(i)
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.record(p)
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != kubelet.EBSDriver || !strings.HasPrefix(pv.Spec.CSI.VolumeHandle, "vol-") {
			t.Fatalf("PV %s of %s is not an EBS CSI volume: %+v", pv.Name, name, pv.Spec.PersistentVolumeSource)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := admin.Volume(ctx, pv.Spec.CSI.VolumeHandle)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := w.lab.DataPlane(cluster)
		if v.AZ != d.Zone || v.InstanceID != node.Annotations[kubelet.InstanceIDAnnotation] {
			t.Errorf("volume %s of %s: zone %s instance %s, want %s and the instance of node %s (%s)",
				v.ID, name, v.AZ, v.InstanceID, d.Zone, node.Name, node.Annotations[kubelet.InstanceIDAnnotation])
		}
		// The volume is an ext4 image on a loop device, mounted on the pod's node.
		mnt, err := loopfs.MountOf(v.Image)
		if err != nil || mnt == "" {
			t.Fatalf("volume %s of %s (image %q) is not mounted: %v", v.ID, name, v.Image, err)
		}
		if !strings.HasPrefix(mnt, w.lab.Dir+"/") {
			t.Errorf("volume %s of %s is mounted at %s, outside the lab", v.ID, name, mnt)
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "owner")); err != nil || strings.TrimSpace(string(b)) != name {
			t.Errorf("volume %s holds %q, %v; want what %s wrote", v.ID, b, err, name)
		}
	}
}

// testTiDB runs one TiDB cluster over the three data planes: PD and three TiKV in dp1, three
// TiKV joining it from each of dp2 and dp3, every region with a peer in each plane; deleted,
// its pods go, which frees the planes' addresses for the playground's cluster (testInstall).
func testTiDB(t *testing.T, ctx context.Context, w *world) {
	const ns, name, tikvPerPlane = "bank", "basic", 3
	cfg := bank.Config{Accounts: 60, Initial: 100}
	splitKeys := bank.SplitKeys(cfg.Accounts, 4)
	var keys []string
	for _, k := range splitKeys {
		keys = append(keys, string(k))
	}
	tcs := env.FederatedTidbClusters(w.lab, name, ns, tikvPerPlane, false, keys)
	for _, d := range w.lab.DataPlanes {
		namespace(t, ctx, w, d.Cluster, ns)
		if err := w.client[d.Cluster].Create(ctx, tcs[d.Cluster]); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range w.lab.DataPlanes {
		c := w.client[d.Cluster]
		eventually(t, ctx, fmt.Sprintf("%d TiKV stores Up in %s", tikvPerPlane, d.Cluster), func() (bool, error) {
			tc := &pcv1alpha1.TidbCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tc); err != nil {
				return false, err
			}
			up := 0
			for id, s := range tc.Status.TiKV.Stores {
				n, _ := strconv.ParseUint(id, 10, 64)
				if s.State == "Up" && n > d.StoreIDBase && n <= d.StoreIDBase+tikvPerPlane && strings.HasPrefix(s.IP, d.IPPrefix+".") {
					up++
				}
			}
			return up == tikvPerPlane, nil
		})
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			w.record(&pods.Items[i])
		}
	}

	pdAddr := strings.TrimPrefix(w.lab.DataPlanes[0].PDAddress(), "http://")
	cl, err := bank.NewClient(ctx, []string{pdAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Every region has a leader, and its peers sit in three planes.
	planeOf := func(store uint64) uint64 { return store / 1000 }
	for _, k := range append([][]byte{bank.Key(0)}, splitKeys...) {
		r, err := cl.Locate(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		planes := map[uint64]bool{}
		for _, p := range r.Region.Meta.GetPeers() {
			planes[planeOf(p.GetStoreId())] = true
		}
		if len(planes) != 3 {
			t.Errorf("region %d has peers %v, want one in each data plane", r.Region.Meta.GetId(), r.Region.Meta.GetPeers())
		}
	}
	var log bank.Log
	if err := bank.Load(ctx, cl, cfg, &log); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan bank.Stats, 1)
	go func() { done <- bank.Run(runCtx, cl, cfg, &log, 4, 0, 7) }()
	// Transfers on both sides of a ts, counted rather than timed: the checker judges nothing less.
	if _, err := log.WaitAfter(ctx, 0, bank.MinTransfers); err != nil {
		t.Fatal(err)
	}
	ts, err := cl.TS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.WaitAfter(ctx, ts, bank.MinTransfers); err != nil {
		t.Fatal(err)
	}
	stop()
	st := <-done
	t.Logf("bank: %+v; at ts %d: %+v", st, ts, bank.Count(log.Txns(), ts))
	if err := bank.Check(ctx, cl, cfg, log.Txns(), ts, ts); err != nil {
		t.Fatalf("bank check at ts %d: %v", ts, err)
	}

	for _, d := range w.lab.DataPlanes {
		if err := w.client[d.Cluster].Delete(ctx, tcs[d.Cluster]); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range w.lab.DataPlanes {
		c := w.client[d.Cluster]
		eventually(t, ctx, "no pod of the deleted TidbCluster in "+d.Cluster, func() (bool, error) {
			var pods corev1.PodList
			err := c.List(ctx, &pods, client.InNamespace(ns))
			return err == nil && len(pods.Items) == 0, err
		})
	}
}

// checkNothingLeft checks that every recorded lab process and every pod process is gone, and
// that nothing runs from inside the lab directory.
func checkNothingLeft(t *testing.T, w *world, dir string) {
	t.Helper()
	sts, err := env.Status(dir)
	if err != nil {
		t.Fatal(err)
	}
	components := map[string]int{}
	for _, s := range sts {
		components[s.Component]++
		if s.Running {
			t.Errorf("%s %s %s pid %d still runs", s.Cluster, s.Component, s.Name, s.Process.PID)
		}
	}
	// Three nodes per data plane, and the control cluster's one once the playground installed
	// fedbr (env.Install adds it for the manager).
	nodes := 9
	if l, err := env.Load(dir); err == nil {
		nodes += len(l.ControlNodes)
	}
	want := map[string]int{controlplane.Etcd: 4, controlplane.APIServer: 4, controlplane.ControllerManager: 4, controlplane.Scheduler: 4,
		env.ComponentAWS: 1, env.ComponentOperator: 3, env.ComponentNode: nodes}
	for c, n := range want {
		if components[c] != n {
			t.Errorf("status lists %d %s processes, want %d", components[c], c, n)
		}
	}
	// A pid may be reused by now; it counts only if it still runs from the lab.
	left := env.Leftovers(dir)
	for pid, pod := range w.pids {
		if slices.Contains(left, pid) {
			t.Errorf("process %d of pod %s outlived the lab", pid, pod)
		}
	}
	if len(left) > 0 {
		t.Errorf("processes %v still run from %s", left, dir)
	}
	// Jobs 2, the SIGTERM pod, 2 StatefulSet pods, PD and 9 TiKV.
	if len(w.pids) < 15 {
		t.Errorf("only %d pod processes recorded; the checks above prove little", len(w.pids))
	}
}
