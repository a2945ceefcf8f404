package plane

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
)

// TestCredentialPlugins loads one kubeconfig whose contexts authenticate in every way an EKS,
// GKE or OIDC kubeconfig does. The "aws eks get-token" user's plane gets no exec provider and
// sends an EKS token minted with the manager's environment credentials (its exec entry's
// environment, naming another profile and key, is ignored) to its API server. Every other
// plugin, and EKS arguments fedbr does not take, leave their plane known and unreachable with
// their own error naming the context and the command; the other planes load. As for client-go's
// own plugins, a plain-HTTP server gets no token.
func TestCredentialPlugins(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDMANAGER", "AWS_SECRET_ACCESS_KEY": "manager-secret", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
	} {
		t.Setenv(k, v)
	}
	var (
		mu   sync.Mutex
		auth []string
	)
	// TLS: clientcmd reads a user's credentials only for a TLS server.
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer api.Close()
	var plainAuth []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plainAuth = append(plainAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer plain.Close()

	exec := func(command string, args ...string) *clientcmdapi.AuthInfo {
		return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1beta1", Command: command, Args: args,
			Env:             []clientcmdapi.ExecEnvVar{{Name: "AWS_PROFILE", Value: "admin"}, {Name: "AWS_ACCESS_KEY_ID", Value: "AKIDKUBECONFIG"}},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	}
	users := map[string]*clientcmdapi.AuthInfo{
		"eks":        exec("aws", "--region", "us-west-2", "eks", "get-token", "--cluster-name", "prod-west", "--output", "json"),
		"eks-authn":  exec("aws-iam-authenticator", "token", "-i", "prod-east", "--region", "us-east-1"),
		"gke":        exec("gke-gcloud-auth-plugin"),
		"eks-bad":    exec("aws", "eks", "get-token", "--cluster-name", "prod", "--profile", "admin"),
		"eks-region": exec("aws", "eks", "get-token", "--cluster-name", "prod"),
		"oidc":       {AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"idp-issuer-url": "https://issuer.example"}}},
		"static":     {Token: "static-token"},
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: api.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})}
	for name, u := range users {
		kc.AuthInfos[name+"-user"] = u
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: "api", AuthInfo: name + "-user"}
	}
	kc.Clusters["plain"] = &clientcmdapi.Cluster{Server: plain.URL}
	kc.Contexts["eks-plain"] = &clientcmdapi.Context{Cluster: "plain", AuthInfo: "eks-user"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	s, err := Load(Options{Kubeconfig: path, Scheme: runtime.NewScheme(), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); len(got) != len(users)+1 {
		t.Fatalf("planes %v; want one per context", got)
	}

	t.Run("aws eks get-token is served in-process", func(t *testing.T) {
		p, ok := s.Get("eks")
		if !ok {
			t.Fatalf("plane eks did not load: %v", s.planes["eks"].LastError())
		}
		if cfg := p.Cluster.GetConfig(); cfg.ExecProvider != nil {
			t.Fatalf("plane eks keeps the exec provider %+v; it would run %s", cfg.ExecProvider, cfg.ExecProvider.Command)
		}
		mu.Lock()
		auth = nil
		mu.Unlock()
		if _, err := p.probe.ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		sent := slices.Clone(auth)
		mu.Unlock()
		if len(sent) != 1 {
			t.Fatalf("API server saw %d requests; want 1", len(sent))
		}
		tok, ok := strings.CutPrefix(sent[0], "Bearer "+ekstoken.Prefix)
		if !ok {
			t.Fatalf("Authorization %q; want Bearer %s…", sent[0], ekstoken.Prefix)
		}
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if u.Host != "sts.us-west-2.amazonaws.com" || q.Get("Action") != "GetCallerIdentity" {
			t.Errorf("token URL %s; want GetCallerIdentity on sts.us-west-2.amazonaws.com", u)
		}
		if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDMANAGER/") {
			t.Errorf("token signed by %q; want the manager's key, not the kubeconfig's env", cred)
		}
		if !slices.Contains(strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), "x-k8s-aws-id") {
			t.Errorf("X-Amz-SignedHeaders %q lacks x-k8s-aws-id", q.Get("X-Amz-SignedHeaders"))
		}
	})

	t.Run("no token in the clear", func(t *testing.T) {
		p, ok := s.Get("eks-plain")
		if !ok {
			t.Fatalf("plane eks-plain did not load: %v", s.planes["eks-plain"].LastError())
		}
		if _, err := p.probe.ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(plainAuth) != 1 || plainAuth[0] != "" {
			t.Fatalf("a plain-HTTP API server got Authorization %q; want one request without", plainAuth)
		}
	})

	t.Run("aws-iam-authenticator token is served in-process", func(t *testing.T) {
		p, ok := s.Get("eks-authn")
		if !ok {
			t.Fatalf("plane eks-authn did not load: %v", s.planes["eks-authn"].LastError())
		}
		if p.Cluster.GetConfig().ExecProvider != nil {
			t.Fatal("plane eks-authn keeps its exec provider")
		}
	})

	t.Run("a static token is left as it is", func(t *testing.T) {
		if _, ok := s.Get("static"); !ok {
			t.Fatalf("plane static did not load: %v", s.planes["static"].LastError())
		}
	})

	for _, tc := range []struct {
		context string
		is      error // the one sentinel it is
		mention []string
	}{
		{"gke", ErrExecPlugin, []string{`context "gke"`, `"gke-gcloud-auth-plugin"`}},
		{"oidc", ErrAuthProvider, []string{`context "oidc"`, `auth-provider "oidc"`}},
		{"eks-bad", ekstoken.ErrArgs, []string{`context "eks-bad"`, `"aws"`, "--profile"}},
		{"eks-region", ekstoken.ErrNoRegion, []string{`context "eks-region"`, "no region"}},
	} {
		t.Run("refused: "+tc.context, func(t *testing.T) {
			if _, ok := s.Get(tc.context); ok {
				t.Fatalf("plane %s loaded", tc.context)
			}
			p := s.planes[tc.context]
			err := p.LastError()
			if err == nil || p.Reachable() {
				t.Fatalf("plane %s: error %v, reachable %v; want unreachable with its load error", tc.context, err, p.Reachable())
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("plane %s: %v; want %v", tc.context, err, tc.is)
			}
			for _, other := range []error{ErrExecPlugin, ErrAuthProvider, ekstoken.ErrArgs, ekstoken.ErrNoRegion} {
				if !errors.Is(other, tc.is) && errors.Is(err, other) {
					t.Errorf("plane %s: %v is also %v", tc.context, err, other)
				}
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("plane %s: %q does not mention %s", tc.context, err, m)
				}
			}
		})
	}
}

// TestFileReferencesAreRefused: a planes kubeconfig is read from a Secret, by the manager in its
// pod and by `fedbr describe`, `get` and `logs` on an SRE's machine. client-go reads every file
// a context names (tokenFile, client-certificate, client-key, certificate-authority) and sends
// what it read to the server the same context names: whoever may write that Secret could make
// either reader send a local file (the pod's service-account token, an SRE's credentials) to a
// server of their choosing. Each file-naming context is refused with ErrFileReference, naming the
// context, the field and the path, before anything is read; a context with inline data loads.
func TestFileReferencesAreRefused(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("local-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["inline"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: []byte("-")}
	kc.Clusters["ca-file"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthority: secret}
	kc.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.AuthInfos["token-file"] = &clientcmdapi.AuthInfo{TokenFile: secret}
	kc.AuthInfos["cert-file"] = &clientcmdapi.AuthInfo{ClientCertificate: secret, ClientKeyData: []byte("-")}
	kc.AuthInfos["key-file"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("-"), ClientKey: secret}
	for _, tc := range []struct{ context, cluster, user, field string }{
		{"ca", "ca-file", "token", "certificate-authority"},
		{"token-file", "inline", "token-file", "tokenFile"},
		{"cert", "inline", "cert-file", "client-certificate"},
		{"key", "inline", "key-file", "client-key"},
	} {
		kc.Contexts[tc.context] = &clientcmdapi.Context{Cluster: tc.cluster, AuthInfo: tc.user}
		t.Run(tc.context, func(t *testing.T) {
			_, err := Config(kc, tc.context, "test")
			if !errors.Is(err, ErrFileReference) {
				t.Fatalf("Config(%s) = %v; want %v", tc.context, err, ErrFileReference)
			}
			for _, m := range []string{`context "` + tc.context + `"`, tc.field, secret} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not mention %s", err, m)
				}
			}
		})
	}
	kc.Contexts["inline"] = &clientcmdapi.Context{Cluster: "inline", AuthInfo: "token"}
	if _, err := Config(kc, "inline", "test"); err != nil {
		t.Errorf("a context with inline credentials: %v", err)
	}
}
