// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) from the
// binaries that hack/k8s-bin.sh caches, with fedbr's CRDs installed. Tests assert world state
// against a real API server, never against a fake client.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/checkout"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// Env is one running API server with fedbr's CRDs.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with fedbr's kinds registered.
	Client client.Client
	// Kubeconfig is a kubeconfig file for this API server, for kubectl and fedbr commands.
	Kubeconfig string
	// RepoRoot is the repository's root folder.
	RepoRoot string

	env *envtest.Environment
	tmp string
	// unwatch stops the watcher that kills the server and etcd should this process die first.
	unwatch func()
}

func init() {
	for _, add := range []func(*k8sruntime.Scheme) error{fedv1alpha1.AddToScheme, dpv1alpha1.AddToScheme, pcv1alpha1.AddToScheme} {
		if err := add(scheme.Scheme); err != nil {
			panic(err)
		}
	}
}

// RepoRoot is the fedbr checkout the tests run in (checkout.Root).
func RepoRoot() string { return checkout.Root() }

// AssetsDir returns the folder with kube-apiserver, etcd and kubectl (see
// controlplane.DefaultBinDir).
func AssetsDir() (string, error) {
	return controlplane.DefaultBinDir(RepoRoot())
}

// New starts an API server with every CRD of controlplane.DefaultCRDDirs installed (fedbr's and
// the TidbCluster stand-in). Call Stop when done.
func New() (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root := RepoRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     controlplane.DefaultCRDDirs(root),
		ErrorIfCRDPathMissing: true,
	}
	before, err := childrenFrom(assets)
	if err != nil {
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		// Start leaves etcd and the API server running when a later step (CRD install) fails.
		_ = env.Stop()
		return nil, fmt.Errorf("starting the API server from %s: %w", assets, err)
	}
	unwatch, err := killAfterExit(assets, before)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Config: cfg, RepoRoot: root, env: env, unwatch: unwatch}
	if err := e.connect(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) connect() error {
	c, err := client.New(e.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("client for the test API server: %w", err)
	}
	e.Client = c
	dir, err := os.MkdirTemp("", "fedbr-testenv-")
	if err != nil {
		return err
	}
	e.tmp = dir
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, e.env.KubeConfig, 0o600)
}

// Stop stops the API server and removes its files.
func (e *Env) Stop() error {
	defer func() { _ = os.RemoveAll(e.tmp) }()
	err := e.env.Stop()
	e.unwatch()
	return err
}

// Start is New for one test: the server stops when the test ends. In -short mode the test is
// skipped, since it needs the cached binaries.
func Start(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real API server; skipped in -short mode")
	}
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return e
}

// RunMain is TestMain for packages that share one API server among their tests: it starts the
// server, hands it to use, runs the tests and stops it. In -short mode it runs no test of the
// package, since all of them need the server.
func RunMain(m *testing.M, use func(*Env)) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping: needs a real API server (-short)")
		return 0
	}
	return runWithEnv(m, use)
}

// RunMainPureWhenShort is RunMain for a package that also has tests without an API server:
// under -short it runs them (use is not called, so the package's Env stays nil and its API
// server tests must skip on testing.Short).
func RunMainPureWhenShort(m *testing.M, use func(*Env)) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	return runWithEnv(m, use)
}

// runWithEnv starts the API server, hands it to use, runs the tests and stops it.
func runWithEnv(m *testing.M, use func(*Env)) int {
	e, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	use(e)
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Eventually retries cond until it holds, for at most timeout; the failure names what cond
// last saw. Tests against an API server assert world state this way: the controllers reach it
// in their own time.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: gave up after %s; last seen: %s", what, timeout, last)
}

// Kubectl runs the cached kubectl against this API server and returns its combined output.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.env.BinaryAssetsDirectory, "kubectl"),
		append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return string(out), nil
}

// CRDKinds lists the kinds whose CRDs fedbr ships, for tests that check all are served.
func CRDKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{
		fedv1alpha1.GroupVersion.WithKind("VolumeBackup"),
		fedv1alpha1.GroupVersion.WithKind("VolumeRestore"),
		fedv1alpha1.GroupVersion.WithKind("VolumeBackupSchedule"),
		dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember"),
		dpv1alpha1.GroupVersion.WithKind("VolumeRestoreMember"),
		pcv1alpha1.GroupVersion.WithKind("TidbCluster"),
	}
}

// WriteKubeconfig writes one kubeconfig file with a context (and cluster and user) per named
// API server, as the manager reads its data planes.
func WriteKubeconfig(path string, envs map[string]*Env) error {
	out := clientcmdapi.NewConfig()
	for name, e := range envs {
		cfg, err := clientcmd.Load(e.env.KubeConfig)
		if err != nil {
			return err
		}
		cur := cfg.Contexts[cfg.CurrentContext]
		if cur == nil {
			return fmt.Errorf("kubeconfig of %s has no current context", name)
		}
		out.Clusters[name] = cfg.Clusters[cur.Cluster]
		out.AuthInfos[name] = cfg.AuthInfos[cur.AuthInfo]
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		out.CurrentContext = name
	}
	return clientcmd.WriteToFile(*out, path)
}
