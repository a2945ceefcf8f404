package awsdouble_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// jwt is a token with claims; the double does not check the signature.
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + ".c2ln"
}

// TestAssumeRoleWithWebIdentityThroughTheEgress: the SDK's STS client at its default endpoint
// (https://sts.us-west-2.amazonaws.com) reaches the double as its HTTPS proxy, trusting the
// egress CA, and exchanges a service-account token for credentials as IRSA does; the token's
// audience, expiry and subject (against the role's trust) are checked, and the proxy reaches
// nothing but STS.
func TestAssumeRoleWithWebIdentityThroughTheEgress(t *testing.T) {
	dir := t.TempDir()
	srv, base := serve(t, dir, awsdouble.Options{WebIdentityRoles: map[string][]string{"fedbr-br": {"system:serviceaccount:*:fedbr-br"}}})
	ca, err := os.ReadFile(awsdouble.EgressCAFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(awsdouble.EgressCAFile(dir)); err != nil || fi.Mode().Perm()&0o004 == 0 {
		t.Fatalf("the egress CA is not readable by every user (a non-root pod trusts it): %v %v", fi.Mode(), err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("no CA in the egress CA file")
	}
	proxy, _ := url.Parse(base)
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	c := sts.New(sts.Options{Region: "us-west-2", HTTPClient: hc, Retryer: awssdk.NopRetryer{}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	now := time.Now()
	good := map[string]any{"iss": "https://kubernetes.default.svc", "sub": "system:serviceaccount:tidb:fedbr-br",
		"aud": []string{"sts.amazonaws.com"}, "exp": now.Add(time.Hour).Unix(), "nbf": now.Unix()}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for a, b := range good {
			c[a] = b
		}
		c[k] = v
		return c
	}
	role := "arn:aws:iam::" + awsdouble.DefaultAccountID + ":role/fedbr-br"
	assume := func(role, session string, claims map[string]any) (*sts.AssumeRoleWithWebIdentityOutput, error) {
		return c.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
			RoleArn: awssdk.String(role), RoleSessionName: awssdk.String(session), WebIdentityToken: awssdk.String(jwt(t, claims))})
	}
	out, err := assume(role, "step-1", good)
	if err != nil {
		t.Fatalf("the exchange: %v", err)
	}
	if cr := out.Credentials; cr == nil || len(*cr.AccessKeyId) < 16 || *cr.SessionToken == "" || !cr.Expiration.After(now) {
		t.Fatalf("credentials %+v", out.Credentials)
	}
	if got, want := *out.AssumedRoleUser.Arn, "arn:aws:sts::"+awsdouble.DefaultAccountID+":assumed-role/fedbr-br/step-1"; got != want {
		t.Errorf("assumed role %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name, role, session string
		claims              map[string]any
		code                string
	}{
		{"another audience", role, "s1", with("aud", "api"), "InvalidIdentityToken"},
		{"expired", role, "s1", with("exp", now.Add(-time.Minute).Unix()), "ExpiredTokenException"},
		{"a subject the trust does not name", role, "s1", with("sub", "system:serviceaccount:tidb:default"), "AccessDenied"},
		{"a role the account does not have", "arn:aws:iam::" + awsdouble.DefaultAccountID + ":role/admin", "s1", good, "AccessDenied"},
		{"a session name STS refuses", role, "a/b", good, "ValidationError"},
	} {
		if _, err := assume(tc.role, tc.session, tc.claims); code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if n := srv.Stats().Calls["AssumeRoleWithWebIdentity"]; n != 6 {
		t.Errorf("%d exchanges counted, want 6", n)
	}
	// The proxy tunnels to STS only.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://ec2.us-west-2.amazonaws.com/", nil)
	if resp, err := hc.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a tunnel to EC2's host was opened: %s", resp.Status)
	}
}
