package tidb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	brpb "github.com/pingcap/kvproto/pkg/brpb"
	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLS is the client side of a TiDB cluster's TLS (tidb-operator's spec.tlsCluster): the CA that
// signed PD's and TiKV's certificates, and the client certificate and key presented to them (the
// cluster client secret's ca.crt, tls.crt and tls.key). A nil *TLS is plaintext. Every PD and
// TiKV connection of the BR steps is opened through its methods, so one set of files reaches the
// PD gRPC client, PD's HTTP API and every TiKV dial.
type TLS struct {
	ca, cert, key []byte
	config        *tls.Config
}

// LoadTLS reads and parses the three PEM files. All empty is plaintext (nil, nil); any other
// mix, an unreadable file, a CA file without a certificate, or a certificate that does not
// match its key is an error naming the flag.
func LoadTLS(caFile, certFile, keyFile string) (*TLS, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if caFile == "" || certFile == "" || keyFile == "" {
		return nil, errors.New("--ca, --cert and --key go together: give all three (TLS to PD and TiKV) or none (plaintext)")
	}
	read := func(flag, file string) ([]byte, error) {
		b, err := os.ReadFile(file) //nolint:gosec // G304: the operator's --ca/--cert/--key flags name the files
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		return b, nil
	}
	ca, err := read("ca", caFile)
	if err != nil {
		return nil, err
	}
	cert, err := read("cert", certFile)
	if err != nil {
		return nil, err
	}
	key, err := read("key", keyFile)
	if err != nil {
		return nil, err
	}
	t, err := ParseTLS(ca, cert, key)
	if errors.Is(err, errNoCA) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--cert %s and --key %s: %w", certFile, keyFile, err)
	}
	return t, nil
}

var errNoCA = errors.New("no PEM certificate in the CA")

// ParseTLS is LoadTLS of the files' contents (a cluster client secret's ca.crt, tls.crt and
// tls.key as read from the API).
func ParseTLS(ca, cert, key []byte) (*TLS, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errNoCA
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &TLS{ca: ca, cert: cert, key: key,
		config: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}, nil
}

// Config is a copy of the client tls.Config (nil for plaintext).
func (t *TLS) Config() *tls.Config {
	if t == nil {
		return nil
	}
	return t.config.Clone()
}

// SecurityOption is the same CA, certificate and key for PD's gRPC client.
func (t *TLS) SecurityOption() pd.SecurityOption {
	if t == nil {
		return pd.SecurityOption{}
	}
	return pd.SecurityOption{SSLCABytes: t.ca, SSLCertBytes: t.cert, SSLKEYBytes: t.key}
}

// Transport is the gRPC transport credentials: TLS, or plaintext for nil.
func (t *TLS) Transport() grpc.DialOption {
	if t == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(t.Config()))
}

// DialOptions are the options of a TiKV connection: t's transport and keepalive k.
func (t *TLS) DialOptions(k Keepalive) []grpc.DialOption {
	return []grpc.DialOption{t.Transport(), k.DialOption()}
}

// DialTiKV opens a connection to a TiKV store over t with DefaultKeepalive. It connects
// lazily: ctx bounds nothing here, the first RPC's context bounds connecting (and the TLS
// handshake).
func (t *TLS) DialTiKV(_ context.Context, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, t.DialOptions(DefaultKeepalive)...)
	if err != nil {
		return nil, fmt.Errorf("dial TiKV %s: %w", addr, err)
	}
	return conn, nil
}

// DialBackup opens a Backup client to a TiKV store (DialTiKV), connecting in the background
// at once rather than at the first RPC; close releases the connection.
func (t *TLS) DialBackup(ctx context.Context, addr string) (client brpb.BackupClient, close func() error, err error) {
	conn, err := t.DialTiKV(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	conn.Connect()
	return brpb.NewBackupClient(conn), conn.Close, nil
}

// NewPDClient connects PD's gRPC client over t with DefaultKeepalive on its connections.
// The client keeps ctx as its background context: pass one that outlives the step's
// cancellation when lifting must still reach PD, and Close it.
func (t *TLS) NewPDClient(ctx context.Context, addrs []string) (pd.Client, error) {
	return pd.NewClientWithContext(ctx, addrs, t.SecurityOption(), opt.WithGRPCDialOptions(DefaultKeepalive.DialOption()))
}

// NewPDHTTPClient is PD's HTTP API client over t, named source in PD's logs. addrs are
// host:port or URLs; with TLS, PD's client turns them into https:// URLs. It fails with
// ErrPDUnreachable when no PD answers.
func (t *TLS) NewPDHTTPClient(source string, addrs []string) (pdhttp.Client, error) {
	var c pdhttp.Client
	if t == nil {
		c = newPDHTTPClient(source, addrs)
	} else {
		c = newPDHTTPClient(source, addrs, pdhttp.WithTLSConfig(t.Config()))
	}
	// PD's client gives no error: it logs one and returns nil when no PD answered its member
	// discovery (its retries included).
	if c == nil {
		return nil, fmt.Errorf("%w: no PD at %v answered for its members (PD's HTTP client)", ErrPDUnreachable, addrs)
	}
	return c, nil
}

// newPDHTTPClient is PD's constructor (a test's seam: PD's own gives up only after about 100 s).
var newPDHTTPClient = pdhttp.NewClient

// ErrPDUnreachable means no PD of the given addresses answered.
var ErrPDUnreachable = errors.New("PD unreachable")

// HTTPClient is an HTTP client for PD's API over t (http.DefaultClient for plaintext).
func (t *TLS) HTTPClient() *http.Client {
	if t == nil {
		return http.DefaultClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = t.Config()
	return &http.Client{Transport: tr}
}

// PDURLs are PD addresses (host:port or http(s):// URLs) as URLs of PD's HTTP API: over TLS
// every one https://; in plaintext a host:port gets http:// and a URL stays as given.
func (t *TLS) PDURLs(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		scheme, rest, ok := strings.Cut(a, "://")
		if !ok {
			scheme, rest = "http", a
		}
		if t != nil {
			scheme = "https"
		}
		out[i] = scheme + "://" + rest
	}
	return out
}

// AnyPD asks each of urls in turn with read and returns the first answer: every PD of a
// cluster answers for the whole cluster, so one that is down is no reason to fail. It fails
// only when none answers, with every PD's error.
func AnyPD[T any](ctx context.Context, urls []string, read func(ctx context.Context, pdURL string) (T, error)) (T, error) {
	var errs []error
	for _, u := range urls {
		v, err := read(ctx, u)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	var zero T
	if len(errs) == 0 {
		return zero, errors.New("no PD address to ask")
	}
	return zero, errors.Join(errs...)
}

// Plaintext is no TLS: its methods dial PD and TiKV in plaintext.
var Plaintext *TLS
