package session

import (
	"github.com/spf13/pflag"

	"github.com/fedbr/fedbr/internal/tidb"
)

// TLSFlags are --ca, --cert and --key: the TLS of every step that dials PD or TiKV.
type TLSFlags struct {
	CA, Cert, Key string
}

// Register adds the flags to fs.
func (f *TLSFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.CA, "ca", "", "PEM CA certificate that signed PD's and TiKV's certificates (with --cert and --key: TLS to PD's gRPC and HTTP APIs and every TiKV; all three or none)")
	fs.StringVar(&f.Cert, "cert", "", "PEM client certificate presented to PD and TiKV (with --ca and --key)")
	fs.StringVar(&f.Key, "key", "", "PEM private key of --cert (with --ca and --cert)")
}

// Load reads and parses the files (nil, nil when none is given: plaintext).
func (f *TLSFlags) Load() (*tidb.TLS, error) {
	return tidb.LoadTLS(f.CA, f.Cert, f.Key)
}
