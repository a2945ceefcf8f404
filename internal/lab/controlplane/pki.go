package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fedbr/fedbr/internal/lab/labtls"
)

// pki is one cluster's certificates: its own CA, the API server's serving certificate, a
// cluster-admin client certificate and the service-account signing key. Files are reused when
// present, so a lab that is brought down and up again keeps its identity.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// CAFile, ServingCert, ServingKey, AdminCert, AdminKey, SAKey and SAPub name the files.
const (
	caCert      = "ca.crt"
	caKey       = "ca.key"
	servingCert = "apiserver.crt"
	servingKey  = "apiserver.key"
	adminCert   = "admin.crt"
	adminKey    = "admin.key"
	saKey       = "sa.key"
	saPub       = "sa.pub"
)

// ensure creates whatever certificate or key is missing.
func (p pki) ensure() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(p.path(saPub)); err == nil {
		return nil // complete: sa.pub is written last
	}
	now := time.Now()
	ca, err := labtls.NewCA("fedbr-lab-ca", 10*365*24*time.Hour)
	if err != nil {
		return err
	}
	if err := writeCert(p.path(caCert), ca.DER); err != nil {
		return err
	}
	if err := writeKey(p.path(caKey), ca.Key); err != nil {
		return err
	}
	issue := func(certFile, keyFile string, tmpl *x509.Certificate) error {
		der, k, err := ca.Issue(tmpl)
		if err != nil {
			return err
		}
		if err := writeCert(certFile, der); err != nil {
			return err
		}
		return writeKey(keyFile, k)
	}
	if err := issue(p.path(servingCert), p.path(servingKey), &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}); err != nil {
		return err
	}
	if err := issue(p.path(adminCert), p.path(adminKey), &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "fedbr-lab-admin", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	sk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(p.path(saKey), sk); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sk.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(p.path(saPub), "PUBLIC KEY", pub, 0o644)
}

func writeCert(path string, der []byte) error { return writePEM(path, "CERTIFICATE", der, 0o644) }

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if data == nil {
		return errors.New("pem encoding failed")
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
