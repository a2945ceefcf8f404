package tidb

import (
	"errors"
	"strings"
	"testing"

	pdhttp "github.com/tikv/pd/client/http"
)

// TestNewPDHTTPClientUnreachable: where PD's own HTTP client hands back nil (no PD answered its
// member discovery, after about 100 s of retries), fedbr gets ErrPDUnreachable naming the
// addresses, never a nil client (a step's deferred Close panicked on one).
func TestNewPDHTTPClientUnreachable(t *testing.T) {
	defer func(f func(string, []string, ...pdhttp.ClientOption) pdhttp.Client) { newPDHTTPClient = f }(newPDHTTPClient)
	newPDHTTPClient = func(string, []string, ...pdhttp.ClientOption) pdhttp.Client { return nil }
	var plain *TLS
	c, err := plain.NewPDHTTPClient("fedbr-test", []string{"http://pd.example:2379"})
	if !errors.Is(err, ErrPDUnreachable) || !strings.Contains(err.Error(), "pd.example:2379") || c != nil {
		t.Fatalf("client %v, error %v: want ErrPDUnreachable naming the address", c, err)
	}
}
