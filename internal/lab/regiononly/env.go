package regiononly

import (
	"testing"

	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/tidb"
)

// Env is a region-only cluster with the real PD clients on it, for tests and benchmarks.
type Env struct {
	Cluster *Cluster
	PD      pd.Client
	HTTP    pdhttp.Client
}

// StartEnv starts an Env that ends with t; the PD double's data goes to a temporary directory.
func StartEnv(t testing.TB, cfg Config) *Env {
	t.Helper()
	cfg.DataDir = t.TempDir()
	c, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pc, err := tidb.NewPDClient(t.Context(), []string{c.PDAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	t.Cleanup(hc.Close)
	return &Env{Cluster: c, PD: pc, HTTP: hc}
}
