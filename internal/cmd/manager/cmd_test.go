package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/podenv"
)

// A manager in a pod on a lab node finds the chart's mounted kubeconfig and its service account
// under $FEDBR_LAB_ROOT, as in a real pod at their absolute paths.
func TestInLabPod(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/fedbr/dataplanes/kubeconfig", "apiVersion: v1\nkind: Config\n")
	write(podenv.ServiceAccountDir+"/token", "tok")
	write(podenv.ServiceAccountDir+"/ca.crt", "ca")
	t.Setenv(podenv.LabRootEnv, root)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "6443")

	o := &options{}
	o.run.Kubeconfig = "/etc/fedbr/dataplanes/kubeconfig"
	o.run.ProbeInterval, o.run.ReloadCheck = time.Second, time.Second
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "etc/fedbr/dataplanes/kubeconfig"); o.run.Kubeconfig != want {
		t.Errorf("kubeconfig %s, want %s", o.run.Kubeconfig, want)
	}
	cfg, err := o.control()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "tok" || cfg.CAFile != filepath.Join(root, podenv.ServiceAccountDir, "ca.crt") {
		t.Errorf("control config: host %s, token %q, CA %s", cfg.Host, cfg.BearerToken, cfg.CAFile)
	}

	// Outside a lab pod the path is taken as given: a missing file is an error.
	t.Setenv(podenv.LabRootEnv, "")
	o.run.Kubeconfig = "/etc/fedbr/dataplanes/kubeconfig"
	if err := o.validate(); err == nil {
		t.Error("a kubeconfig missing at its absolute path passed validation")
	}
}

// TestDataPlaneNamespacesFlag: --dataplane-namespaces takes namespace names only, and says which
// is not one.
func TestDataPlaneNamespacesFlag(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg     string
		wantErr string
	}{
		{"tidb,tidb-restored", ""},
		{"tidb,Tidb_2", `"Tidb_2" is not a namespace name`},
		{"tidb,", `"" is not a namespace name`},
	} {
		o := &options{}
		o.run.Kubeconfig, o.run.ProbeInterval, o.run.ReloadCheck = kc, time.Second, time.Second
		o.run.DataPlaneNamespaces = strings.Split(tc.arg, ",")
		err := o.validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("--dataplane-namespaces %s: %v, want %q", tc.arg, err, tc.wantErr)
		}
	}
}
