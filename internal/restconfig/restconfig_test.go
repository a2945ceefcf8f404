package restconfig

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestFinish(t *testing.T) {
	limiter := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	for _, tc := range []struct {
		name    string
		in      rest.Config
		wantQPS float32
		wantUA  string
	}{
		{name: "kubeconfig default: unthrottled and named", in: rest.Config{}, wantQPS: -1, wantUA: "fedbr-agent/"},
		{name: "an explicit QPS is kept", in: rest.Config{QPS: 50, Burst: 100}, wantQPS: 50, wantUA: "fedbr-agent/"},
		{name: "an explicit limiter is kept", in: rest.Config{RateLimiter: limiter}, wantQPS: 0, wantUA: "fedbr-agent/"},
		{name: "a user agent is kept", in: rest.Config{UserAgent: "mine"}, wantQPS: -1, wantUA: "mine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.in
			got := Finish(&cfg, "agent")
			if got != &cfg {
				t.Fatal("Finish returned another config")
			}
			if got.QPS != tc.wantQPS || !strings.HasPrefix(got.UserAgent, tc.wantUA) {
				t.Errorf("QPS %v, user agent %q; want %v, %q…", got.QPS, got.UserAgent, tc.wantQPS, tc.wantUA)
			}
		})
	}
}
