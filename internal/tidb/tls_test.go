package tidb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/tidb"
)

// TestLoadTLS: none of the three files is plaintext; all three load one client configuration
// that PD's gRPC client gets as bytes and PD's HTTP client and TiKV's dials as a tls.Config;
// anything else is refused naming the flag.
func TestLoadTLS(t *testing.T) {
	set, err := labtls.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key := set.Paths()
	if c, err := tidb.LoadTLS("", "", ""); c != nil || err != nil {
		t.Fatalf("no files = %v, %v; want plaintext", c, err)
	}
	c, err := tidb.LoadTLS(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("config %+v, want the CA as roots and one client certificate", cfg)
	}
	if so := c.SecurityOption(); string(so.SSLCABytes) != string(set.CA) || string(so.SSLCertBytes) != string(set.Cert) || string(so.SSLKEYBytes) != string(set.Key) {
		t.Error("PD's SecurityOption does not carry the three files")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ca, cert, key, want string
	}{
		{ca, "", "", "--ca, --cert and --key go together"},
		{"", cert, key, "--ca, --cert and --key go together"},
		{ca, cert, "", "--ca, --cert and --key go together"},
		{ca, cert, filepath.Join(t.TempDir(), "nope"), "--key: open "},
		{empty, cert, key, "no PEM certificate in it"},
		{ca, cert, empty, "--cert " + cert + " and --key " + empty},
	} {
		if _, err := tidb.LoadTLS(tc.ca, tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%q, %q, %q) = %v, want %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
	addrs := []string{"pd:2379", "http://pd:2379", "https://pd:2379"}
	if got := c.PDURLs(addrs); !slices.Equal(got, []string{"https://pd:2379", "https://pd:2379", "https://pd:2379"}) {
		t.Errorf("PDURLs over TLS = %v", got)
	}
	if got := tidb.Plaintext.PDURLs(addrs); !slices.Equal(got, []string{"http://pd:2379", "http://pd:2379", "https://pd:2379"}) {
		t.Errorf("PDURLs in plaintext = %v", got)
	}
}

// TestAnyPD: the first PD that answers decides; a down one is skipped; with none answering the
// error names every PD's failure.
func TestAnyPD(t *testing.T) {
	ctx := context.Background()
	read := func(_ context.Context, u string) (string, error) {
		if strings.Contains(u, "down") {
			return "", fmt.Errorf("%s: connection refused", u)
		}
		return "answer of " + u, nil
	}
	v, err := tidb.AnyPD(ctx, []string{"http://down-1", "http://pd-2", "http://pd-3"}, read)
	if err != nil || v != "answer of http://pd-2" {
		t.Fatalf("one down: %q, %v", v, err)
	}
	_, err = tidb.AnyPD(ctx, []string{"http://down-1", "http://down-2"}, read)
	if err == nil || !strings.Contains(err.Error(), "down-1: connection refused") || !strings.Contains(err.Error(), "down-2: connection refused") {
		t.Fatalf("all down: %v", err)
	}
	if _, err := tidb.AnyPD(ctx, nil, read); err == nil || err.Error() != "no PD address to ask" {
		t.Fatalf("no address: %v", err)
	}
}
