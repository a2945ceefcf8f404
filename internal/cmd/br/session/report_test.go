package session

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/podenv"
)

func TestReportFlagsValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       ReportFlags
		wantErr string
	}{
		{name: "no reporting", f: ReportFlags{}},
		{name: "member only", f: ReportFlags{Member: "vb-1-east"}},
		{name: "everything", f: ReportFlags{Member: "vb-1.east", Namespace: "tidb", Kubeconfig: "/k"}},
		{name: "namespace without member", f: ReportFlags{Namespace: "tidb"}, wantErr: "need --member"},
		{name: "kubeconfig without member", f: ReportFlags{Kubeconfig: "/k"}, wantErr: "need --member"},
		{name: "bad name", f: ReportFlags{Member: "VB_1"}, wantErr: `--member "VB_1" is not a valid object name`},
		{name: "bad namespace", f: ReportFlags{Member: "vb", Namespace: "a.b"}, wantErr: `--member-namespace "a.b" is not a valid namespace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestReporterNeedsAPod: without --kubeconfig the member is reached as the pod's service
// account; outside a pod, or without a namespace, the command fails before doing anything.
func TestReporterNeedsAPod(t *testing.T) {
	root := t.TempDir()
	sa := filepath.Join(root, podenv.ServiceAccountDir)
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"token": "t", "ca.crt": selfSignedPEM(t), "namespace": "tidb"} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		f         ReportFlags
		labRoot   string
		host      string
		wantErr   string
		wantNoRep bool
	}{
		{name: "no member reports nothing", wantNoRep: true},
		{name: "outside a pod", f: ReportFlags{Member: "vb", Namespace: "tidb"}, labRoot: root, wantErr: "outside a pod, give --kubeconfig"},
		{name: "no namespace", f: ReportFlags{Member: "vb"}, labRoot: t.TempDir(), host: "10.0.0.1", wantErr: "--member-namespace not given"},
		{name: "missing kubeconfig", f: ReportFlags{Member: "vb", Namespace: "tidb", Kubeconfig: filepath.Join(root, "nope")}, wantErr: "--kubeconfig"},
		{name: "in a (lab) pod", f: ReportFlags{Member: "vb"}, labRoot: root, host: "10.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(podenv.LabRootEnv, tc.labRoot)
			t.Setenv(podenv.NamespaceEnv, "")
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.host)
			t.Setenv("KUBERNETES_SERVICE_PORT", "443")
			rep, err := tc.f.Reporter("pause", t.Logf)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Reporter() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (rep == nil) != tc.wantNoRep {
				t.Fatalf("reporter = %v, want nil: %v", rep, tc.wantNoRep)
			}
			// Stop the loop without writing: nothing was queued.
			rep.Close(t.Context())
		})
	}
}

// selfSignedPEM is a CA certificate for a service-account ca.crt.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestLockedWriterStampsEveryLine: each line a step logs starts with its time, so step logs
// line up with each other's and with the controllers'.
func TestLockedWriterStampsEveryLine(t *testing.T) {
	var buf bytes.Buffer
	logf := Logf(NewLockedWriter(&buf))
	before := time.Now().UTC()
	logf("first %d", 1)
	logf("second")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	for i, want := range []string{"first 1", "second"} {
		stamp, text, ok := strings.Cut(lines[i], " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if !ok || err != nil || text != want || at.Before(before.Truncate(time.Microsecond)) {
			t.Errorf("line %d = %q: want an RFC 3339 time (not before %s), a space and %q", i, lines[i], before, want)
		}
	}
}
