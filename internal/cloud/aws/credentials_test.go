package aws_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// TestEndpointImpliesNoCredentials: an endpoint override only says where calls go. With no
// credentials in the environment, a provider pointed at the AWS double fails for want of
// credentials and the double sees no call; given the lab's credentials explicitly
// (environment), the same provider works.
func TestEndpointImpliesNoCredentials(t *testing.T) {
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	// An empty SDK environment: no keys, no profile, no shared files, no instance metadata.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	describe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := aws.New(ctx, aws.Config{Region: srv.Options().Region, Endpoint: hs.URL, MaxAttempts: 1, RetryMode: "standard"})
		if err != nil {
			return err
		}
		_, err = p.DescribeSnapshots(ctx, []string{"snap-0a1b2c3d4e5f60001"})
		return err
	}
	if err := describe(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "credentials") {
		t.Fatalf("describe without credentials = %v; want a credentials error", err)
	}
	if n := srv.Stats().Calls["DescribeSnapshots"]; n != 0 {
		t.Fatalf("the double saw %d DescribeSnapshots calls without credentials", n)
	}
	for _, kv := range awsdouble.CredentialsEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if err := describe(); err != nil {
		t.Fatalf("describe with the lab's credentials: %v", err)
	}
}
