package operator

import (
	"context"
	"fmt"
	"time"

	pdhttp "github.com/tikv/pd/client/http"
	sd "github.com/tikv/pd/client/servicediscovery"

	"github.com/fedbr/fedbr/internal/tidb"
)

// pdRequestTimeout bounds one call to PD's HTTP API; an unreachable PD is "not ready", not an
// error, so a reconcile never blocks on it.
const pdRequestTimeout = 2 * time.Second

// PDReader reads PD's view of the cluster, over t (nil: plaintext). NewPDReader returns the
// real one.
type PDReader interface {
	Read(ctx context.Context, addr string, t *tidb.TLS) (PDState, error)
}

// NewPDReader returns a PDReader that uses PD's real HTTP client.
func NewPDReader() PDReader { return httpPD{} }

type httpPD struct{}

func (httpPD) Read(ctx context.Context, addr string, t *tidb.TLS) (PDState, error) {
	ctx, cancel := context.WithTimeout(ctx, pdRequestTimeout)
	defer cancel()
	// The service discovery runs on ctx, so an unreachable PD costs at most pdRequestTimeout
	// (pdhttp.NewClient would retry on a context of its own).
	discovery := sd.NewDefaultPDServiceDiscovery(ctx, cancel, t.PDURLs([]string{addr}), t.Config())
	defer discovery.Close()
	if err := discovery.Init(); err != nil {
		return PDState{}, fmt.Errorf("pd %s: %w", addr, err)
	}
	var opts []pdhttp.ClientOption
	if t != nil {
		opts = append(opts, pdhttp.WithTLSConfig(t.Config()))
	}
	c := pdhttp.NewClientWithServiceDiscovery("fedbr-lab-operator", discovery, opts...)
	defer c.Close()
	health, err := c.GetHealthStatus(ctx)
	if err != nil {
		return PDState{}, fmt.Errorf("pd %s health: %w", addr, err)
	}
	stores, err := c.GetStores(ctx)
	if err != nil {
		return PDState{}, fmt.Errorf("pd %s stores: %w", addr, err)
	}
	st := PDState{Healthy: len(health) > 0}
	for _, h := range health {
		url := ""
		if len(h.ClientUrls) > 0 {
			url = h.ClientUrls[0]
		}
		st.Members = append(st.Members, PDMemberState{Name: h.Name, ID: h.MemberID, ClientURL: url, Healthy: h.Health})
		st.Healthy = st.Healthy && h.Health
	}
	for _, s := range stores.Stores {
		state := s.Store.StateName
		if state == "" && s.Store.State == 0 {
			state = storeUp
		}
		st.Stores = append(st.Stores, StoreState{ID: uint64(s.Store.ID), Address: s.Store.Address, State: state})
	}
	return st, nil
}
