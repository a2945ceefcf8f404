// Package labtls makes a throwaway certificate authority and certificates for a lab cluster's
// TLS (tidb-operator's spec.tlsCluster): PD and TiKV doubles serve and dial each other with the
// node certificate, fedbr's steps present the client certificate. Keys are ECDSA P-256, made in
// process; nothing here is fit for anything but tests and the lab.
package labtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Files names of the client side in Dir: the cluster client secret's keys.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Set is a CA with a node certificate (PD and TiKV) and a client certificate (fedbr).
type Set struct {
	// Dir holds CAFile, CertFile and KeyFile (the client's), as the cluster client secret
	// mounted into a step pod.
	Dir string
	// CA, Cert and Key are the client's PEM: the secret's data.
	CA, Cert, Key []byte
	// NodeCert and NodeKey are the node's PEM (PD's and TiKV's certificate and key).
	NodeCert, NodeKey []byte
	node              tls.Certificate
	pool              *x509.CertPool
	ca                *CA
	nodeHosts         []string
	now               time.Time
	mu                sync.Mutex
	serial            int64
}

// New makes a CA, a node certificate valid for hosts (IP addresses or DNS names; 127.0.0.1
// and localhost are always included) and a client certificate, and writes the client side to
// dir.
func New(dir string, hosts ...string) (*Set, error) {
	ca, err := NewCA("fedbr lab CA", 10*24*time.Hour)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER}), pool: x509.NewCertPool(),
		ca: ca, nodeHosts: append([]string{"127.0.0.1", "localhost"}, hosts...), now: time.Now()}
	s.pool.AddCert(ca.Cert)
	if s.NodeCert, s.NodeKey, err = s.issue(2, "fedbr lab node", s.nodeHosts); err != nil {
		return nil, err
	}
	if s.node, err = tls.X509KeyPair(s.NodeCert, s.NodeKey); err != nil {
		return nil, err
	}
	if s.Cert, s.Key, err = s.issue(3, "fedbr lab client", nil); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := write(dir, s.CA, s.Cert, s.Key); err != nil {
		return nil, err
	}
	return s, nil
}

// NodeWith issues another node certificate (PEM certificate and key) valid for the node
// certificate's hosts and names too: the DNS names one TidbCluster's members are reached by
// (its PD Service's names in the lab's cluster DNS).
func (s *Set) NodeWith(names ...string) (cert, key []byte, err error) {
	s.mu.Lock()
	s.serial++
	serial := 100 + s.serial
	s.mu.Unlock()
	return s.issue(serial, "fedbr lab node", append(slices.Clone(s.nodeHosts), names...))
}

// issue makes a certificate of the set's CA for cn, valid for hosts (IP addresses or DNS
// names), for servers and clients.
func (s *Set) issue(serial int64, cn string, hosts []string) ([]byte, []byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: s.now.Add(-time.Hour), NotAfter: s.now.Add(9 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, key, err := s.ca.Issue(tmpl)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// CA is a throwaway certificate authority (an ECDSA P-256 key and its self-signed certificate):
// the lab's clusters' API servers and TiDB clusters' TLS are issued from one each.
type CA struct {
	Cert *x509.Certificate
	DER  []byte
	Key  *ecdsa.PrivateKey
}

// NewCA makes a CA named cn, valid from an hour ago for validity.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, DER: der, Key: key}, nil
}

// Issue makes a key and a certificate of it from tmpl, signed by the CA.
func (c *CA) Issue(tmpl *x509.Certificate) (der []byte, key *ecdsa.PrivateKey, err error) {
	if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, nil, err
	}
	if der, err = x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key); err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// write puts ca, cert and key into dir as CAFile, CertFile and KeyFile.
func write(dir string, ca, cert, key []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{CAFile: ca, CertFile: cert, KeyFile: key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// WriteNode writes the node side (the CA, the node certificate and key) to dir as CAFile,
// CertFile and KeyFile: what `fedbr-lab lab pd|tikv` read with --ca, --cert and --key.
func (s *Set) WriteNode(dir string) error { return write(dir, s.CA, s.NodeCert, s.NodeKey) }

// LoadNode reads a node's PEM files (`fedbr-lab lab pd|tikv` --ca, --cert, --key) into a node's
// TLS as Set.Node makes it: serve with the certificate, require a client certificate signed by
// the CA, dial others presenting the certificate and trusting the CA. All empty is plaintext
// (nil, nil); any other mix, an unreadable file, a CA file without a certificate, or a
// certificate that does not match its key is an error naming the flag.
func LoadNode(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if caFile == "" || certFile == "" || keyFile == "" {
		return nil, errors.New("--ca, --cert and --key go together: give all three (serve and dial over TLS) or none (plaintext)")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--cert %s and --key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}, nil
}

// Paths are the client's CA, certificate and key files (fedbr's --ca, --cert, --key).
func (s *Set) Paths() (ca, cert, key string) {
	return filepath.Join(s.Dir, CAFile), filepath.Join(s.Dir, CertFile), filepath.Join(s.Dir, KeyFile)
}

// Node is a PD or TiKV node's TLS: it serves with the node certificate and requires a client
// certificate signed by the CA (mutual TLS, as a TiDB cluster with tlsCluster), and, as a
// client of other nodes, presents the node certificate and trusts the CA.
func (s *Set) Node() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{s.node}, RootCAs: s.pool, ClientCAs: s.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
}
