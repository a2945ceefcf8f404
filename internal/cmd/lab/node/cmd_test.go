package node

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
)

func TestDryRun(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--name", "n1", "--dir", t.TempDir(), "--zone", "us-west-2a", "--image", "shell=/bin/sh",
		"--capacity", "cpu=8,memory=16Gi", "--dry-run"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "would run node n1") || !strings.Contains(got, "shell=/bin/sh") {
		t.Fatalf("output = %q", got)
	}
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--dir", dir},
		{"--name", "n1"},
		{"--name", "n1", "--dir", dir, "--image", "noequals"},
		{"--name", "n1", "--dir", dir, "--image", "x=/no/such/file"},
		{"--name", "n1", "--dir", dir, "--capacity", "cpu=lots"},
		{"--name", "n1", "--dir", dir, "--aws-endpoint", "http://127.0.0.1:1"},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append(args, "--dry-run"))
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// TestRunsNode runs `fedbr-lab lab node` against a real control plane and the AWS double: the
// Node registers as an instance in its zone, and a restart keeps the instance.
func TestRunsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	bin, err := controlplane.DefaultBinDir(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cpDir := t.TempDir()
	st, err := controlplane.Up(ctx, controlplane.Options{Dir: cpDir, BinDir: bin, Clusters: []string{"dp1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlplane.Down(context.Background(), cpDir, 10*time.Second) })
	aws, err := awsdouble.Open(t.TempDir(), awsdouble.Options{Unlimited: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(aws)
	t.Cleanup(func() { srv.Close(); _ = aws.Close() })
	raw, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, "dp1", nil, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	nodeDir := t.TempDir()

	run := func() *corev1.Node {
		t.Helper()
		runCtx, stop := context.WithCancel(ctx)
		cmd := NewCmd()
		lines := make(lineWriter, 4)
		cmd.SetOut(lines)
		cmd.SetArgs([]string{"--kubeconfig", st.Kubeconfig, "--context", "dp1", "--name", "n1", "--dir", nodeDir,
			"--zone", "us-west-2b", "--aws-endpoint", srv.URL, "--image", "shell=/bin/sh"})
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(runCtx) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("lab node: %v", err)
			}
		}()
		select {
		case line := <-lines:
			if !strings.Contains(line, "node n1 ready") {
				t.Fatalf("first line %q", line)
			}
		case err := <-done:
			t.Fatalf("lab node exited: %v", err)
		}
		nd, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return nd
	}
	first := run()
	id := first.Annotations[kubelet.InstanceIDAnnotation]
	if !strings.HasPrefix(id, "i-") || first.Spec.ProviderID != "aws:///us-west-2b/"+id || first.Labels[kubelet.ZoneLabel] != "us-west-2b" {
		t.Fatalf("node annotations %v, providerID %q, labels %v; want an instance in us-west-2b", first.Annotations, first.Spec.ProviderID, first.Labels)
	}
	if again := run(); again.Annotations[kubelet.InstanceIDAnnotation] != id {
		t.Errorf("restarted node has instance %q, want %q", again.Annotations[kubelet.InstanceIDAnnotation], id)
	}
}

// lineWriter hands each written line to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}
