package podenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name, root, in, want string
	}{
		{"no lab", "", "/var/run/secrets/x", "/var/run/secrets/x"},
		{"lab absolute", "/lab/c1", "/var/run/secrets/x", "/lab/c1/var/run/secrets/x"},
		{"lab relative", "/lab/c1", "data/x", "data/x"},
		{"lab root itself", "/lab/c1", "/", "/lab/c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(LabRootEnv, tc.root)
			if got := Path(tc.in); got != tc.want {
				t.Errorf("Path(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// labRoot makes a container root folder with the service-account files given (nil: absent).
func labRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ServiceAccountDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRESTConfig(t *testing.T) {
	full := map[string]string{"token": "tok\n", "ca.crt": "-----BEGIN CERTIFICATE-----\n", "namespace": "ns1"}
	tests := []struct {
		name       string
		host, port string
		files      map[string]string
		wantHost   string
		wantErr    string
	}{
		{name: "in a pod", host: "10.0.0.1", port: "443", files: full, wantHost: "https://10.0.0.1:443"},
		{name: "IPv6 service host", host: "fd00::1", port: "6443", files: full, wantHost: "https://[fd00::1]:6443"},
		{name: "not in a pod", files: full, wantErr: "not running in a Kubernetes pod"},
		{name: "port missing", host: "10.0.0.1", files: full, wantErr: "KUBERNETES_SERVICE_PORT"},
		{name: "no token", host: "10.0.0.1", port: "443", files: map[string]string{"ca.crt": "x"}, wantErr: "service-account token"},
		{name: "empty token", host: "10.0.0.1", port: "443", files: map[string]string{"token": " \n", "ca.crt": "x"}, wantErr: "is empty"},
		{name: "no CA", host: "10.0.0.1", port: "443", files: map[string]string{"token": "tok"}, wantErr: "API server's CA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := labRoot(t, tc.files)
			t.Setenv(LabRootEnv, root)
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.host)
			t.Setenv("KUBERNETES_SERVICE_PORT", tc.port)
			cfg, err := RESTConfig()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sa := filepath.Join(root, ServiceAccountDir)
			if cfg.Host != tc.wantHost || cfg.BearerTokenFile != filepath.Join(sa, "token") ||
				cfg.BearerToken != "tok" || cfg.CAFile != filepath.Join(sa, "ca.crt") {
				t.Errorf("config = host %q, token file %q, token %q, CA %q", cfg.Host, cfg.BearerTokenFile, cfg.BearerToken, cfg.CAFile)
			}
		})
	}
}

func TestRESTConfigNotInPodIsTyped(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := RESTConfig(); !errors.Is(err, ErrNotInPod) {
		t.Fatalf("error = %v, want ErrNotInPod", err)
	}
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		name, env string
		files     map[string]string
		want      string
		wantErr   string
	}{
		{name: "env wins", env: "from-env", files: map[string]string{"namespace": "from-file"}, want: "from-env"},
		{name: "service-account file", files: map[string]string{"namespace": "from-file\n"}, want: "from-file"},
		{name: "no file", wantErr: "POD_NAMESPACE unset"},
		{name: "empty file", files: map[string]string{"namespace": "\n"}, wantErr: "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(LabRootEnv, labRoot(t, tc.files))
			t.Setenv(NamespaceEnv, tc.env)
			got, err := Namespace()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Namespace() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
