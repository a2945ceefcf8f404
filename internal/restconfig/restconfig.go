// Package restconfig finishes the Kubernetes client configurations fedbr builds from
// kubeconfigs and service accounts.
//
// client-go throttles a client built straight from clientcmd at 5 requests/s (burst 10). On
// the backup's critical path every hop is a watch event followed by a few writes (status,
// spec, events), so a throttled client turned each hop into hundreds of milliseconds of
// waiting and stretched the GC pause window. controller-runtime's own loader turns the
// client-side limiter off and leaves fairness to the API server's priority and fairness;
// fedbr does the same for every client it builds.
package restconfig

import (
	"k8s.io/client-go/rest"

	"github.com/fedbr/fedbr/internal/version"
)

// Finish turns off client-side throttling (unless the configuration set its own) and names
// the client, so the API server's audit log and APF see which fedbr component calls. It
// returns cfg.
func Finish(cfg *rest.Config, component string) *rest.Config {
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS = -1
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "fedbr-" + component + "/" + version.Get().Version
	}
	return cfg
}
