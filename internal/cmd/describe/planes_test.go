package describe

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
	"github.com/fedbr/fedbr/internal/plane"
)

// TestPlanesRunNoCredentialPlugin: Planes builds the data planes' clients from a kubeconfig
// (the manager's Secret's) without running a command it names. A kubelogin exec user is refused
// when the kubeconfig loads; an "aws eks get-token" user gets an EKS token minted in-process,
// which the (TLS) API server receives. Both commands are scripts that would leave a marker file;
// neither exists after the request has returned. No API server binary is needed.
func TestPlanesRunNoCredentialPlugin(t *testing.T) {
	dir := t.TempDir()
	script := func(name string) (path, marker string) {
		path, marker = filepath.Join(dir, "bin", name), filepath.Join(dir, name+".ran")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		body := "#!/bin/sh\ntouch " + marker + "\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-the-script\"}}'\n"
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return path, marker
	}
	kubelogin, kubeloginRan := script("kubelogin")
	aws, awsRan := script("aws")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")

	var mu sync.Mutex
	var auth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	cfg := clientcmdapi.NewConfig()
	for name, exec := range map[string]*clientcmdapi.ExecConfig{
		"dp-exec": {APIVersion: "client.authentication.k8s.io/v1beta1", Command: kubelogin, Args: []string{"get-token"}},
		"dp-eks": {APIVersion: "client.authentication.k8s.io/v1beta1", Command: aws,
			Args: []string{"eks", "get-token", "--cluster-name", "dp-eks", "--region", "us-east-1"}},
	} {
		exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: exec}
		cfg.Contexts[name] = ctxOf(name)
	}
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	planes, err := Planes(raw, 5*time.Second, func(rc *rest.Config) (client.Client, error) { return client.New(rc, client.Options{}) })
	if err != nil {
		t.Fatal(err)
	}

	refused := planes["dp-exec"].Err
	if !errors.Is(refused, plane.ErrExecPlugin) || !strings.Contains(refused.Error(), "context dp-exec") || !strings.Contains(refused.Error(), kubelogin) {
		t.Errorf("dp-exec: %v; want the exec plugin refused, naming the context and the command", refused)
	}
	eks := planes["dp-eks"]
	if eks.Err != nil {
		t.Fatalf("dp-eks: %v; want its token minted in-process", eks.Err)
	}
	if _, err := eks.Kube.Discovery().ServerVersion(); err != nil {
		t.Fatalf("dp-eks: %v", err)
	}
	mu.Lock()
	got := append([]string(nil), auth...)
	mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Bearer "+ekstoken.Prefix) {
		t.Errorf("the API server got Authorization %q; want one EKS token (%s…)", got, ekstoken.Prefix)
	}
	// The request has returned: had a plugin run, its marker would be there.
	for _, marker := range []string{kubeloginRan, awsRan} {
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a credential plugin named in the data planes' kubeconfig ran on this machine (%s: %v)", marker, err)
		}
	}
}
