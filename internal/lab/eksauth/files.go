package eksauth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fedbr/fedbr/internal/lab/labtls"
)

// Files are an authenticator's serving certificate and the kube-apiserver's webhook
// configuration that calls it.
type Files struct {
	// CA signed Cert; the webhook configuration trusts it.
	CA string `json:"ca"`
	// Cert and Key are the authenticator's, for 127.0.0.1.
	Cert string `json:"cert"`
	Key  string `json:"key"`
	// WebhookConfig is the kubeconfig-format file of
	// --authentication-token-webhook-config-file: the authenticator's URL and CA.
	WebhookConfig string `json:"webhookConfig"`
}

// certValidity is how long the lab's authenticator certificate is valid.
const certValidity = 365 * 24 * time.Hour

// WriteFiles makes a CA and a certificate for 127.0.0.1 under dir, and the webhook
// configuration that sends TokenReviews to server (https://127.0.0.1:PORT) + Path.
func WriteFiles(dir, server string) (Files, error) {
	f := Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"),
		WebhookConfig: filepath.Join(dir, "webhook.kubeconfig")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	ca, err := labtls.NewCA("fedbr-lab eks authenticator CA", certValidity)
	if err != nil {
		return f, err
	}
	now := time.Now()
	der, key, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "eks-authenticator"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	})
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return f, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	for path, b := range map[string][]byte{
		f.CA:   caPEM,
		f.Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		f.Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return f, err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["eks-authenticator"] = &clientcmdapi.Cluster{Server: server + Path, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "eks-authenticator", AuthInfo: "kube-apiserver"}
	cfg.CurrentContext = "webhook"
	if err := clientcmd.WriteToFile(*cfg, f.WebhookConfig); err != nil {
		return f, fmt.Errorf("webhook configuration: %w", err)
	}
	return f, nil
}

// APIServerArgs are the kube-apiserver flags that make it authenticate bearer tokens with the
// authenticator (after its own: client certificates, service-account tokens).
func (f Files) APIServerArgs() []string {
	return []string{"--authentication-token-webhook-config-file=" + f.WebhookConfig, "--authentication-token-webhook-version=v1"}
}

// TLS is the authenticator's serving configuration from Cert and Key.
func (f Files) TLS() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("authenticator certificate %s, key %s: %w", f.Cert, f.Key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
