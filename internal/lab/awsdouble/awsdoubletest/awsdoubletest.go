// Package awsdoubletest serves the AWS double to a test and gives it the production provider
// pointed at it, tuned to poll fast, so engine tests drive the real SDK over HTTP.
package awsdoubletest

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// Lab is a served AWS double and a provider that talks to it.
type Lab struct {
	Server   *awsdouble.Server
	Provider *aws.Provider
	// Endpoint is the double's URL (for --aws-endpoint).
	Endpoint string
}

// Serve opens an AWS double with opts (volumes created in 5ms unless set) in a temporary
// directory, serves it on 127.0.0.1 and builds a provider with its own budget and fast polls.
// retryMode is the SDK retry mode ("" for the production default, adaptive). The test's
// environment gets the lab's credentials (t.Setenv, so not from a parallel test), as a lab
// node gives its pods: steps run in process with --aws-endpoint find them through the SDK's
// default chain. Everything stops when the test ends.
func Serve(t testing.TB, opts awsdouble.Options, retryMode string) Lab {
	t.Helper()
	Credentials(t)
	if opts.VolumeCreateDuration == 0 {
		opts.VolumeCreateDuration = 5 * time.Millisecond
	}
	srv, err := awsdouble.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	p, err := aws.New(context.Background(), aws.Config{
		Region: srv.Options().Region, Endpoint: hs.URL, AWS: awsdouble.Config(srv.Options().Region), Budget: budget.New(budget.ClientLimits(), nil),
		PollInterval: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, RetryMode: retryMode,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Budget().Pending().SetPollInterval(10 * time.Millisecond)
	return Lab{Server: srv, Provider: p, Endpoint: hs.URL}
}

// Credentials puts the lab's credentials in the test's environment (t.Setenv, so not from a
// parallel test), for code run in process against the double with --aws-endpoint.
func Credentials(t testing.TB) {
	for _, kv := range awsdouble.CredentialsEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}
