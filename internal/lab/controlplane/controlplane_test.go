package controlplane

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestValidate(t *testing.T) {
	bin := t.TempDir()
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"no dir", Options{Clusters: []string{"a"}, BinDir: bin}, "--dir is required"},
		{"no clusters", Options{Dir: "x", BinDir: bin}, "--clusters must name at least one cluster"},
		{"bad name", Options{Dir: "x", Clusters: []string{"DP_1"}, BinDir: bin}, `cluster name "DP_1" must be a DNS label`},
		{"duplicate", Options{Dir: "x", Clusters: []string{"a", "a"}, BinDir: bin}, `cluster name "a" appears twice`},
		{"no binaries", Options{Dir: "x", Clusters: []string{"a"}, BinDir: bin}, "etcd not found in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestUpDown brings up two real control planes, proves each one works on its own (the
// controller-manager turns a Job into a Pod), and takes them down without leaving a process.
func TestUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control planes")
	}
	bin, err := DefaultBinDir(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := Up(ctx, Options{Dir: dir, BinDir: bin, Clusters: []string{"control", "dp1"}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Down(context.Background(), dir, 5*time.Second) })

	if _, err := Up(ctx, Options{Dir: dir, BinDir: bin, Clusters: []string{"control"}}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Up on a running lab: %v, want an 'already running' error", err)
	}

	raw, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Contexts) != 2 || raw.Contexts["control"] == nil || raw.Contexts["dp1"] == nil {
		t.Fatalf("kubeconfig contexts = %v, want control and dp1", raw.Contexts)
	}
	clients := map[string]*kubernetes.Clientset{}
	for name := range raw.Contexts {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, nil, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = kubernetes.NewForConfigOrDie(cfg)
	}

	// The clusters are separate: a namespace made in one is not in the other.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-dp1"}}
	if _, err := clients["dp1"].CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients["control"].CoreV1().Namespaces().Get(ctx, "only-in-dp1", metav1.GetOptions{}); err == nil {
		t.Error("namespace created in dp1 is visible in control")
	}

	// The controller-manager runs: a Job gets its Pod.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "only-in-dp1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "fedbr"}},
		}}},
	}
	if _, err := clients["dp1"].BatchV1().Jobs("only-in-dp1").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		pods, err := clients["dp1"].CoreV1().Pods("only-in-dp1").List(ctx, metav1.ListOptions{LabelSelector: "job-name=probe"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the controller-manager never created the Job's pod")
		case <-time.After(200 * time.Millisecond):
		}
	}

	statuses, err := Status(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 8 {
		t.Fatalf("status lists %d components, want 8", len(statuses))
	}
	for _, s := range statuses {
		if !s.Running {
			t.Errorf("%s/%s not running", s.Cluster, s.Component)
		}
	}

	if err := Down(ctx, dir, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	statuses, err = Status(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statuses {
		if s.Running {
			t.Errorf("%s/%s pid %d still runs after Down", s.Cluster, s.Component, s.PID)
		}
	}
}
