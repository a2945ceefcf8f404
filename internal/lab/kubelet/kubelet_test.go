package kubelet

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
	"github.com/fedbr/fedbr/internal/lab/port"
)

// lab is the shared test environment: one real control plane, the AWS double and one lab
// node, started by the first test that needs it and stopped by TestMain.
type lab struct {
	client   kubernetes.Interface
	node     string
	zone     string
	instance string
	volume   awsdouble.VolumeInfo
	admin    AWSAdmin
	aws      string // the AWS double's URL, also the pods' HTTPS proxy to STS
	pids     string // where probe processes record their pids
	nodeDir  string
	dnsDir   string // the lab cluster DNS table the node reads
}

var (
	labOnce sync.Once
	theLab  *lab
	labErr  error
	// teardown stops what the lab started, in reverse order; TestMain runs it.
	teardown []func()
	// leftover is set when a probe process outlives the stopped node.
	leftover error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	for i := len(teardown) - 1; i >= 0; i-- {
		teardown[i]()
	}
	if code == 0 && leftover != nil {
		fmt.Fprintln(os.Stderr, leftover)
		code = 1
	}
	os.Exit(code)
}

// checkNoProcessLeft fails if any probe process that ever ran still exists.
func checkNoProcessLeft(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var alive []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			alive = append(alive, e.Name())
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("probe processes %v outlived the node", alive)
	}
	return nil
}

func getLab(t *testing.T) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	labOnce.Do(func() { theLab, labErr = startLab() })
	if labErr != nil {
		t.Fatal(labErr)
	}
	return theLab
}

func startLab() (*lab, error) {
	base, err := os.MkdirTemp("", "kubelet-test-")
	if err != nil {
		return nil, err
	}
	teardown = append(teardown, func() { _ = os.RemoveAll(base) })
	probe := filepath.Join(base, "probe")
	if out, err := exec.Command("go", "build", "-o", probe, "./testdata/probe").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build probe: %w: %s", err, out)
	}
	bin, err := controlplane.DefaultBinDir(filepath.Join("..", "..", ".."))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cpDir := filepath.Join(base, "cp")
	st, err := controlplane.Up(ctx, controlplane.Options{Dir: cpDir, BinDir: bin, Clusters: []string{"dp1"}})
	if err != nil {
		return nil, err
	}
	teardown = append(teardown, func() { _ = controlplane.Down(context.Background(), cpDir, 10*time.Second) })
	raw, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, "dp1", nil, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The node gets its own client: client-go's default 5 QPS, shared with the test's
	// polling, would throttle it.
	nodeCfg := rest.CopyConfig(cfg)
	nodeCfg.QPS, nodeCfg.Burst = 50, 100
	nodeClient, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		return nil, err
	}

	if err := loopfs.Available(); err != nil {
		return nil, err
	}
	// Every EBS volume is an ext4 image the node attaches as a loop device and mounts.
	aws, err := awsdouble.Open(filepath.Join(base, "aws"), awsdouble.Options{Unlimited: true, Volumes: awsdouble.VolumesExt4,
		WebIdentityRoles: map[string][]string{"irsa": {"system:serviceaccount:testirsa:irsa"}}})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(aws)
	teardown = append(teardown, func() { srv.Close(); _ = aws.Close(); _ = loopfs.UnmountUnder(base) })
	zone := aws.Options().Region + "a"
	inst, err := aws.CreateInstance(awsdouble.InstanceSpec{AZ: zone, Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		return nil, err
	}

	l := &lab{client: client, node: "lab-node-1", aws: srv.URL, zone: zone, instance: inst.ID, volume: inst.Volumes[0],
		pids: filepath.Join(base, "pids"), nodeDir: filepath.Join(base, "node"), dnsDir: filepath.Join(base, "dns")}
	if err := os.MkdirAll(l.pids, 0o755); err != nil {
		return nil, err
	}
	ebs, err := NewEC2(context.Background(), srv.URL, aws.Options().Region)
	if err != nil {
		return nil, err
	}
	l.admin = AWSAdmin{Endpoint: srv.URL}
	n, err := New(Options{
		Name: l.node, Zone: zone, InstanceID: inst.ID, Dir: l.nodeDir, Client: nodeClient, Server: cfg.Host,
		Images:         Images{{Pattern: "probe", Entrypoint: probe}, {Pattern: "shell:*", Entrypoint: "/bin/sh"}},
		Volumes:        l.admin,
		EBS:            ebs,
		RestartBackoff: 200 * time.Millisecond,
		// The node's instance credentials, which a pod with an IRSA role does not get.
		Env:         []corev1.EnvVar{{Name: "AWS_ACCESS_KEY_ID", Value: "node"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "node"}},
		WebIdentity: &WebIdentity{Proxy: srv.URL, CAFile: awsdouble.EgressCAFile(filepath.Join(base, "aws"))},
		// Every container gets its own /etc/hosts with the lab's cluster DNS (TestOwnHosts).
		DNSDir: l.dnsDir, ClusterDomain: "dp1.local",
	})
	if err != nil {
		return nil, err
	}
	teardown = append(teardown, func() { leftover = checkNoProcessLeft(l.pids) })
	nodeCtx, stopNode := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(nodeCtx) }()
	teardown = append(teardown, func() {
		stopNode()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
		}
	})
	select {
	case <-n.Ready():
	case err := <-done:
		return nil, fmt.Errorf("node exited: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The node lifecycle controller lifts the not-ready taint the API server put on the new node.
	if err := poll(ctx, func() (bool, error) {
		nd, err := client.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(nd.Spec.Taints) == 0, nil
	}); err != nil {
		return nil, fmt.Errorf("node keeps its taints: %w", err)
	}
	return l, nil
}

// poll calls f until it reports done, fails, or ctx ends.
func poll(ctx context.Context, f func() (bool, error)) error {
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// namespace creates a fresh namespace and waits for its default service account.
func (l *lab) namespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	name = strings.ReplaceAll(name, "_", "-")
	if _, err := l.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() (bool, error) {
		_, err := l.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no default service account in %s: %v", name, err)
	}
	return name
}

func (l *lab) probe(args ...string) corev1.Container {
	return corev1.Container{Name: "probe", Image: "probe", Args: args, Env: []corev1.EnvVar{{Name: "PROBE_PIDS", Value: l.pids}}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitPod polls the pod until cond holds.
func (l *lab) waitPod(ctx context.Context, t *testing.T, ns, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := poll(ctx, func() (bool, error) {
		p, err := l.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never %s: %v; last status %+v", ns, name, what, err, last)
	}
	return last
}

func (l *lab) waitGone(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	if err := poll(ctx, func() (bool, error) {
		_, err := l.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("pod %s/%s never went away: %v", ns, name, err)
	}
}

func (l *lab) waitJob(ctx context.Context, t *testing.T, ns, name string, want batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	if err := poll(ctx, func() (bool, error) {
		j, err := l.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
				if c.Type != want {
					return false, fmt.Errorf("job %s ended %s (%s), want %s", name, c.Type, c.Message, want)
				}
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("job %s: %v; status %+v", name, err, job.Status)
	}
	return job
}

func (l *lab) jobPod(ctx context.Context, t *testing.T, ns, job string) corev1.Pod {
	t.Helper()
	pods, err := l.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of job %s: %v, %d pods", job, err, len(pods.Items))
	}
	return pods.Items[0]
}

func (l *lab) logs(ctx context.Context, t *testing.T, ns, pod string) string {
	t.Helper()
	b, err := l.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "probe"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s through the API server: %v", ns, pod, err)
	}
	return string(b)
}

func job(ns, name string, c corev1.Container) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{BackoffLimit: new(int32(0)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{c},
		}}},
	}
}

func TestJobSucceeds(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	if _, err := l.client.BatchV1().Jobs(ns).Create(ctx, job(ns, "ok", l.probe("exit", "0")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitJob(ctx, t, ns, "ok", batchv1.JobComplete)
	pod := l.jobPod(ctx, t, ns, "ok")
	if pod.Spec.NodeName != l.node || pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod on %q in phase %s, want on %s and Succeeded", pod.Spec.NodeName, pod.Status.Phase, l.node)
	}
	cs := pod.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 || cs[0].State.Terminated.Reason != ReasonCompleted {
		t.Fatalf("container statuses %+v, want terminated with exit code 0", cs)
	}
	got := l.logs(ctx, t, ns, pod.Name)
	if !strings.Contains(got, "hello from probe") || !strings.Contains(got, "exiting with 0") {
		t.Errorf("kubectl logs = %q, want stdout and stderr of the probe", got)
	}
	if _, err := os.Stat(LogPath(l.nodeDir, &pod, "probe", 0)); err != nil {
		t.Errorf("log file: %v", err)
	}
}

func TestJobFails(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	if _, err := l.client.BatchV1().Jobs(ns).Create(ctx, job(ns, "bad", l.probe("exit", "3")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitJob(ctx, t, ns, "bad", batchv1.JobFailed)
	pod := l.jobPod(ctx, t, ns, "bad")
	cs := pod.Status.ContainerStatuses
	if pod.Status.Phase != corev1.PodFailed || len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("pod phase %s, containers %+v; want Failed with exit code 3", pod.Status.Phase, cs)
	}
}

func TestUnknownImageFailsPod(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unknown", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "c", Image: "registry.example/nope:1"}},
	}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "unknown", "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != ReasonErrImagePull || !strings.Contains(got.Status.Message, "registry.example/nope:1") {
		t.Errorf("pod reason %q message %q, want ErrImagePull naming the image", got.Status.Reason, got.Status.Message)
	}
}

func TestEnvAndVolumes(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	core := l.client.CoreV1()
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data: map[string][]byte{"password": []byte("hunter2"), "FROM_SECRET": []byte("envfrom")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Data: map[string]string{"mode": "lab", "app.conf": "key = value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A statically provisioned PV for the AWS-double volume attached to the node's instance.
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: EBSDriver, VolumeHandle: l.volume.ID}},
		ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data"},
	}}
	if _, err := core.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		VolumeName:       pv.Name,
		StorageClassName: new(""),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if _, err := core.PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c := l.probe("report", "POD_NAME", "POD_NAMESPACE", "POD_IP", "NODE_NAME", "PASSWORD", "MODE", "FROM_SECRET", "GREETING", "KUBERNETES_SERVICE_HOST",
		"--", "/etc/secret/password", "/etc/config/app.conf", "/scratch/missing", "/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
		corev1.EnvVar{Name: "POD_IP", ValueFrom: field("status.podIP")},
		corev1.EnvVar{Name: "NODE_NAME", ValueFrom: field("spec.nodeName")},
		corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "password"}}},
		corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "mode"}}},
		corev1.EnvVar{Name: "GREETING", Value: "hi $(POD_NAME)"},
	)
	c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
	c.WorkingDir = "/work"
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "secret", MountPath: "/etc/secret", ReadOnly: true},
		{Name: "config", MountPath: "/etc/config"},
		{Name: "data", MountPath: "/data"},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{c},
		Volumes: []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		},
	}}
	created, err := core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "report", "succeeded", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	out := l.logs(ctx, t, ns, "report")
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod phase %s, want Succeeded; log:\n%s", got.Status.Phase, out)
	}
	root := filepath.Join(l.nodeDir, "pods", ns+"_report_"+string(created.UID), "containers", "probe", "root")
	for _, want := range []string{
		"POD_NAME=report", "POD_NAMESPACE=" + ns, "POD_IP=127.0.0.1", "NODE_NAME=" + l.node,
		"PASSWORD=hunter2", "MODE=lab", "FROM_SECRET=envfrom", "GREETING=hi report", "KUBERNETES_SERVICE_HOST=127.0.0.1",
		"file:/etc/secret/password=hunter2", "file:/etc/config/app.conf=key = value",
		"file:/var/run/secrets/kubernetes.io/serviceaccount/namespace=" + ns,
		"wd=" + filepath.Join(root, "work"),
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
	// A pod that ran to its end holds its volume no longer: it is detached, so the claim's next
	// pod may attach it on another node (as the attach-detach controller does).
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := l.admin.Volume(ctx, l.volume.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v.InstanceID == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("volume %s still attached to %s after its pod succeeded", l.volume.ID, v.InstanceID)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Unmounted before it was detached, so its loop device is gone too; its file system holds
	// what the pod wrote, beside mke2fs's lost+found.
	if dev, err := loopfs.LoopDevice(l.volume.Image); err != nil || dev != "" {
		t.Errorf("volume %s's image is still attached as %q (%v) after the volume was detached", l.volume.ID, dev, err)
	} else {
		mnt := filepath.Join(t.TempDir(), "mnt")
		if err := loopfs.Mount(l.volume.Image, mnt); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(mnt, "out"))
		if err != nil || string(b) != "written by report" {
			t.Errorf("volume %s holds %q, %v; want what the pod wrote", l.volume.ID, b, err)
		}
		if info, err := os.Stat(filepath.Join(mnt, "lost+found")); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("lost+found: %v, %v; want mke2fs's, mode 0700", info, err)
		}
		if err := loopfs.Unmount(mnt); err != nil {
			t.Error(err)
		}
	}
	// The service-account token is a real token the API server accepts.
	token, err := os.ReadFile(filepath.Join(root, "var/run/secrets/kubernetes.io/serviceaccount/token"))
	if err != nil || len(token) < 100 {
		t.Errorf("service-account token: %v (%d bytes)", err, len(token))
	}
	if _, err := os.Stat(filepath.Join(root, "var/run/secrets/kubernetes.io/serviceaccount/ca.crt")); err != nil {
		t.Errorf("ca.crt: %v", err)
	}
}

// runningPod creates a pod with the probe in the given mode and a hostPath marker folder,
// and waits until it runs.
func (l *lab) runningPod(ctx context.Context, t *testing.T, ns, name string, mode string, grace int64, mutate func(*corev1.Pod)) (*corev1.Pod, string) {
	t.Helper()
	marker := t.TempDir()
	c := l.probe(mode)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "marker", MountPath: "/marker"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{c},
		Volumes:                       []corev1.Volume{{Name: "marker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marker}}}},
	}}
	if mutate != nil {
		mutate(pod)
	}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, name, "running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && strings.Contains(l.logsQuiet(ctx, ns, name), "waiting for SIGTERM")
	})
	return got, marker
}

func (l *lab) logsQuiet(ctx context.Context, ns, pod string) string {
	b, _ := l.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "probe"}).DoRaw(ctx)
	return string(b)
}

func pidOf(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "lab://")
	pid, err := strconv.Atoi(id)
	if err != nil {
		t.Fatalf("container id %q: %v", p.Status.ContainerStatuses[0].ContainerID, err)
	}
	return pid
}

func TestDeleteSendsSIGTERM(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	pod, marker := l.runningPod(ctx, t, ns, "term", "term", 30, nil)
	// kubectl logs -f follows the running container and ends when it does.
	follow, err := l.client.CoreV1().Pods(ns).GetLogs("term", &corev1.PodLogOptions{Container: "probe", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Close() }()
	if err := l.client.CoreV1().Pods(ns).Delete(ctx, "term", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(follow); err != nil || string(b) != "waiting for SIGTERM\n" {
		t.Errorf("followed logs = %q, %v; want the whole log, ending when the container ends", b, err)
	}
	// The process exits on SIGTERM, so the pod goes away long before its 30 s grace period.
	l.waitGone(ctx, t, ns, "term")
	if b, err := os.ReadFile(filepath.Join(marker, "term")); err != nil || string(b) != "SIGTERM" {
		t.Errorf("marker = %q, %v; want the probe to have seen SIGTERM", b, err)
	}
	if err := syscall.Kill(pidOf(t, pod), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after the pod is gone", pidOf(t, pod))
	}
	// A new pod with the same name and spec (a StatefulSet replacing its pod) runs afresh.
	again, _ := l.runningPod(ctx, t, ns, "term", "term", 30, nil)
	if again.UID == pod.UID || pidOf(t, again) == pidOf(t, pod) {
		t.Errorf("replacement pod uid %s pid %d, want a new pod and process", again.UID, pidOf(t, again))
	}
}

func TestDeleteKillsAfterGracePeriod(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	pod, marker := l.runningPod(ctx, t, ns, "ignore", "ignore", 2, nil)
	if err := l.client.CoreV1().Pods(ns).Delete(ctx, "ignore", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitGone(ctx, t, ns, "ignore")
	if b, err := os.ReadFile(filepath.Join(marker, "ignored")); err != nil || string(b) != "SIGTERM" {
		t.Errorf("marker = %q, %v; want the probe to have seen (and ignored) SIGTERM", b, err)
	}
	pid := pidOf(t, pod)
	if err := poll(ctx, func() (bool, error) { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), nil }); err != nil {
		t.Errorf("process %d ignoring SIGTERM was never killed: %v", pid, err)
	}
}

func TestActiveDeadlineKills(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	pod, marker := l.runningPod(ctx, t, ns, "deadline", "term", 5, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64(3)) })
	got := l.waitPod(ctx, t, ns, "deadline", "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != ReasonDeadlineExceeded {
		t.Errorf("pod reason %q, want %s", got.Status.Reason, ReasonDeadlineExceeded)
	}
	if _, err := os.Stat(filepath.Join(marker, "term")); err != nil {
		t.Errorf("the deadline did not deliver SIGTERM: %v", err)
	}
	if err := syscall.Kill(pidOf(t, pod), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after the deadline", pidOf(t, pod))
	}
}

func TestRestartOnFailure(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	marker := t.TempDir()
	c := l.probe("flaky")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "marker", MountPath: "/marker"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyOnFailure,
		Containers:    []corev1.Container{c},
		Volumes:       []corev1.Volume{{Name: "marker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marker}}}},
	}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "flaky", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	cs := got.Status.ContainerStatuses[0]
	if got.Status.Phase != corev1.PodSucceeded || cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("phase %s, container %+v; want Succeeded after one restart from exit code 1", got.Status.Phase, cs)
	}
	prev, err := l.client.CoreV1().Pods(ns).GetLogs("flaky", &corev1.PodLogOptions{Container: "probe", Previous: true}).DoRaw(ctx)
	if err != nil || string(prev) != "run 0\n" {
		t.Errorf("previous logs = %q, %v; want the first run's", prev, err)
	}
}

func TestShellImage(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	c := corev1.Container{Name: "probe", Image: "shell:latest", Command: []string{"sh", "-c", `echo "$MSG" > "$FEDBR_LAB_ROOT/tmp/msg"; cat "$FEDBR_LAB_ROOT/tmp/msg"`},
		Env: []corev1.EnvVar{{Name: "MSG", Value: "from sh"}}, VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sh", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	start := time.Now()
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "sh", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	t.Logf("pod round trip (create → Succeeded observed, 100 ms polling): %s", time.Since(start).Round(10*time.Millisecond))
	if out := l.logs(ctx, t, ns, "sh"); got.Status.Phase != corev1.PodSucceeded || out != "from sh\n" {
		t.Errorf("phase %s, logs %q; want Succeeded and the message", got.Status.Phase, out)
	}
}

func TestInitContainers(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	mount := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	sh := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: "shell:1", Command: []string{"/bin/sh", "-c", script}, VolumeMounts: mount}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "init", Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{sh("first", `echo one > "$FEDBR_LAB_ROOT/shared/f"`), sh("second", `echo two >> "$FEDBR_LAB_ROOT/shared/f"`)},
		Containers:     []corev1.Container{sh("probe", `cat "$FEDBR_LAB_ROOT/shared/f"`)},
		Volumes:        []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "init", "finished", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	if out := l.logs(ctx, t, ns, "init"); got.Status.Phase != corev1.PodSucceeded || out != "one\ntwo\n" {
		t.Errorf("phase %s, logs %q; want Succeeded after both init containers ran in order", got.Status.Phase, out)
	}
	for _, cs := range got.Status.InitContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v, want terminated with 0", cs.Name, cs.State)
		}
	}
}

// TestReadinessProbe: a container with an httpGet readiness probe is Ready only once the probe
// succeeds, and not Ready again after failureThreshold failures in a row, as with the kubelet;
// the probe dials the container's named port on the node's network.
func TestReadinessProbe(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	isReady := func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	_, marker := l.servingPod(ctx, t, ns, "ready", func(p *corev1.Pod, probe *corev1.Probe) {
		p.Spec.Containers[0].ReadinessProbe = probe
	})
	// The probe was answered 503: the pod runs and is not Ready (it has never been).
	got := l.waitPod(ctx, t, ns, "ready", "probed and refused", func(*corev1.Pod) bool {
		return strings.Contains(l.logsQuiet(ctx, ns, "ready"), "readyz 503")
	})
	if isReady(got) {
		t.Fatalf("pod Ready although its readiness probe only ever failed: %+v", got.Status.Conditions)
	}
	if err := os.WriteFile(filepath.Join(marker, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l.waitPod(ctx, t, ns, "ready", "Ready once the probe succeeds", isReady)
	if err := os.Remove(filepath.Join(marker, "ready")); err != nil {
		t.Fatal(err)
	}
	l.waitPod(ctx, t, ns, "ready", "not Ready after the probe failed twice", func(p *corev1.Pod) bool { return !isReady(p) })
}

// TestLivenessProbe: a container whose httpGet liveness probe fails failureThreshold times in a
// row gets SIGTERM, as from the kubelet, and its pod's restart policy restarts it.
func TestLivenessProbe(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	// /readyz answers 503 until the marker exists, which it never does here.
	l.servingPod(ctx, t, ns, "live", func(p *corev1.Pod, probe *corev1.Probe) {
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		p.Spec.Containers[0].LivenessProbe = probe
	})
	got := l.waitPod(ctx, t, ns, "live", "restarted after its liveness probe failed", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	last := got.Status.ContainerStatuses[0].LastTerminationState.Terminated
	// serve exits 0 on SIGTERM: a SIGKILL would read 137, a crash 1.
	if last == nil || last.ExitCode != 0 {
		t.Fatalf("last termination %+v, want the run ended by SIGTERM (exit 0)", last)
	}
}

// servingPod runs the probe program's serve mode on a free port named "health" (its /readyz
// answers 200 while the marker file "ready" exists, else 503); set puts the httpGet probe of
// /readyz on that port (every second, failureThreshold 2) where the test wants it.
func (l *lab) servingPod(ctx context.Context, t *testing.T, ns, name string, set func(*corev1.Pod, *corev1.Probe)) (*corev1.Pod, string) {
	t.Helper()
	ports, err := port.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return l.runningPod(ctx, t, ns, name, "serve", 30, func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "PROBE_PORT", Value: strconv.Itoa(ports[0])})
		c.Ports = []corev1.ContainerPort{{Name: "health", ContainerPort: int32(ports[0])}}
		set(p, &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}}})
	})
}
