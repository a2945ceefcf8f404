package ekstoken_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// counting is a credentials provider that counts retrievals (one per mint: it has no cache)
// and fails while fail is set.
type counting struct {
	n    atomic.Int32
	fail atomic.Bool
}

func (c *counting) Retrieve(context.Context) (awssdk.Credentials, error) {
	c.n.Add(1)
	if c.fail.Load() {
		return awssdk.Credentials{}, errors.New("no credentials today")
	}
	return awssdk.Credentials{AccessKeyID: "AKIDMANAGER", SecretAccessKey: "secret", Source: "test"}, nil
}

// decode checks a token's envelope and returns its URL.
func decode(t *testing.T, tok string) *url.URL {
	t.Helper()
	enc, ok := strings.CutPrefix(tok, ekstoken.Prefix)
	if !ok {
		t.Fatalf("token %q lacks the prefix %q", tok, ekstoken.Prefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("token is not unpadded URL-safe base64: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token's URL %q: %v", raw, err)
	}
	return u
}

// TestTokenFormat: a token is the presigned GetCallerIdentity URL of the region's STS
// endpoint, signed at the clock's time for service sts with the cluster header signed, as the
// EKS authenticator wants it.
func TestTokenFormat(t *testing.T) {
	for _, tc := range []struct {
		region, host string
	}{
		{"us-west-2", "sts.us-west-2.amazonaws.com"},
		{"us-east-1", "sts.us-east-1.amazonaws.com"}, // regional, not the global sts.amazonaws.com
		{"cn-north-1", "sts.cn-north-1.amazonaws.com.cn"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			creds := &counting{}
			src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod-1", Region: tc.region},
				ekstoken.Options{AWS: &awssdk.Config{Credentials: creds}, Now: (&clock{t: t0}).Now})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := src.Token()
			if err != nil {
				t.Fatal(err)
			}
			if tok.Type() != "Bearer" || !tok.Expiry.Equal(t0.Add(14*time.Minute)) {
				t.Errorf("token type %q, expiry %v; want Bearer, %v", tok.Type(), tok.Expiry, t0.Add(14*time.Minute))
			}
			u := decode(t, tok.AccessToken)
			if u.Scheme != "https" || u.Host != tc.host || u.Path != "/" {
				t.Errorf("URL %s; want https://%s/", u, tc.host)
			}
			q := u.Query()
			want := map[string]string{
				"Action":           "GetCallerIdentity",
				"Version":          "2011-06-15",
				"X-Amz-Expires":    "60",
				"X-Amz-Algorithm":  "AWS4-HMAC-SHA256",
				"X-Amz-Date":       "20260102T030405Z",
				"X-Amz-Credential": "AKIDMANAGER/20260102/" + tc.region + "/sts/aws4_request",
			}
			for k, v := range want {
				if got := q.Get(k); got != v {
					t.Errorf("%s = %q; want %q", k, got, v)
				}
			}
			if signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";"); !slices.Contains(signed, "x-k8s-aws-id") || !slices.Contains(signed, "host") {
				t.Errorf("X-Amz-SignedHeaders = %q; want host and x-k8s-aws-id", signed)
			}
			if q.Get("X-Amz-Signature") == "" {
				t.Error("no X-Amz-Signature")
			}
			if q.Has("x-k8s-aws-id") {
				t.Error("the cluster header was moved into the query; the authenticator reads it as a header")
			}
		})
	}
}

// TestClusterHeaderIsSigned: the cluster's name is part of the signature, so a token minted
// for one cluster is not one for another.
func TestClusterHeaderIsSigned(t *testing.T) {
	sig := func(cluster string) string {
		src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: cluster, Region: "us-west-2"},
			ekstoken.Options{AWS: &awssdk.Config{Credentials: &counting{}}, Now: (&clock{t: t0}).Now})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := src.Token()
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, tok.AccessToken).Query().Get("X-Amz-Signature")
	}
	if a, b := sig("prod-1"), sig("prod-2"); a == b {
		t.Fatalf("tokens of two clusters, same credentials and time, have the same signature %s", a)
	}
}

// TestRegion: the region is the arguments', else the environment's; without either, New fails.
func TestRegion(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	host := func(req ekstoken.Request) (string, error) {
		src, err := ekstoken.New(context.Background(), req, ekstoken.Options{Now: (&clock{t: t0}).Now})
		if err != nil {
			return "", err
		}
		tok, err := src.Token()
		if err != nil {
			return "", err
		}
		u := decode(t, tok.AccessToken)
		if got := u.Query().Get("X-Amz-Credential"); !strings.HasPrefix(got, "AKIDENV/") {
			t.Errorf("X-Amz-Credential %q; want the environment's key", got)
		}
		return u.Host, nil
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_DEFAULT_REGION", "")
	if h, err := host(ekstoken.Request{Cluster: "c"}); err != nil || h != "sts.eu-west-1.amazonaws.com" {
		t.Errorf("environment's region: %s, %v; want sts.eu-west-1.amazonaws.com", h, err)
	}
	if h, err := host(ekstoken.Request{Cluster: "c", Region: "ap-south-1"}); err != nil || h != "sts.ap-south-1.amazonaws.com" {
		t.Errorf("arguments' region: %s, %v; want sts.ap-south-1.amazonaws.com", h, err)
	}
	t.Setenv("AWS_REGION", "")
	if _, err := host(ekstoken.Request{Cluster: "c"}); !errors.Is(err, ekstoken.ErrNoRegion) {
		t.Errorf("no region anywhere: %v; want a no-region error", err)
	}
}

// TestCacheAndRefresh: one mint serves every caller until RefreshAfter; a failed re-mint
// keeps serving the old token while STS honours it, and fails after; a reset drops only a
// token older than its time.
func TestCacheAndRefresh(t *testing.T) {
	c := &clock{t: t0}
	creds := &counting{}
	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod", Region: "us-west-2"},
		ekstoken.Options{AWS: &awssdk.Config{Credentials: creds}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, wantMints int32) string {
		t.Helper()
		tok, err := src.Token()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := creds.n.Load(); n != wantMints {
			t.Fatalf("%s: %d mints; want %d", name, n, wantMints)
		}
		return tok.AccessToken
	}
	date := func(tok string) string { return decode(t, tok).Query().Get("X-Amz-Date") }

	tok1 := step("first", 1)
	c.Add(ekstoken.RefreshAfter - time.Second)
	if tok := step("a second before the refresh", 1); tok != tok1 {
		t.Fatal("the token changed before its refresh")
	}
	c.Add(time.Second)
	tok2 := step("at the refresh", 2)
	if tok2 == tok1 || date(tok2) != "20260102T031805Z" {
		t.Fatalf("refreshed token signed at %s; want a new one signed at 20260102T031805Z", date(tok2))
	}

	creds.fail.Store(true)
	c.Add(ekstoken.RefreshAfter)
	if tok := step("re-mint fails, old token still honoured", 3); tok != tok2 {
		t.Fatal("a failed re-mint did not return the token STS still honours")
	}
	c.Add(ekstoken.Lifetime - ekstoken.RefreshAfter)
	if tok, err := src.Token(); err == nil || !strings.Contains(err.Error(), "no credentials today") || !strings.Contains(err.Error(), "prod") {
		t.Fatalf("re-mint fails, old token expired: %v, %v; want the error naming the cluster", tok, err)
	}
	creds.fail.Store(false)
	tok3 := step("credentials back", 5)

	src.ResetTokenOlderThan(c.Now()) // minted at that very time: not older
	if tok := step("reset at its mint time", 5); tok != tok3 {
		t.Fatal("a reset dropped a token that was not older than its time")
	}
	src.ResetTokenOlderThan(c.Now().Add(time.Nanosecond))
	step("reset after its mint time", 6)
}

// TestConcurrentCallersShareOneMint: callers at once get one token, minted once (run with
// -race: the cache is shared).
func TestConcurrentCallersShareOneMint(t *testing.T) {
	creds := &counting{}
	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod", Region: "us-west-2"},
		ekstoken.Options{AWS: &awssdk.Config{Credentials: creds}, Now: (&clock{t: t0}).Now})
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]string, 16)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			tok, err := src.Token()
			if err != nil {
				t.Error(err)
				return
			}
			toks[i] = tok.AccessToken
		})
	}
	wg.Wait()
	if n := creds.n.Load(); n != 1 {
		t.Errorf("%d mints; want 1", n)
	}
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatal("callers got different tokens")
		}
	}
}

// TestUnauthorizedForcesRemint: through Wrap, every request carries the token; a 401 makes
// the next request carry a newly minted one, which is then kept.
func TestUnauthorizedForcesRemint(t *testing.T) {
	var (
		mu    sync.Mutex
		seen  []string
		calls int
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Get("Authorization"))
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer api.Close()
	// Before the real clock: client-go's transport resets a token minted before the real
	// time the 401's request was sent.
	c := &clock{t: time.Now().Add(-time.Hour)}
	creds := &counting{}
	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod", Region: "us-west-2"},
		ekstoken.Options{AWS: &awssdk.Config{Credentials: creds}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: src.Wrap(http.DefaultTransport)}
	for i, want := range []int{http.StatusUnauthorized, http.StatusOK, http.StatusOK} {
		resp, err := hc.Get(api.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d; want %d", i, resp.StatusCode, want)
		}
		c.Add(time.Second) // a new mint is signed at a new time, so it differs
	}
	if n := creds.n.Load(); n != 2 {
		t.Errorf("%d mints; want 2 (the first, and one after the 401)", n)
	}
	signed := make([]string, len(seen)) // each token's signing time
	for i, h := range seen {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			t.Fatalf("request %d: Authorization %q", i, h)
		}
		signed[i] = decode(t, tok).Query().Get("X-Amz-Date")
	}
	if seen[1] == seen[0] || seen[2] != seen[1] {
		t.Fatalf("tokens sent signed at %q; want a new one after the 401, then kept", signed)
	}
}

// stsDouble answers AssumeRole the way STS does (query protocol) and records each call.
type stsDouble struct {
	mu    sync.Mutex
	calls []url.Values
	auth  []string
}

func (d *stsDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.calls = append(d.calls, r.PostForm)
	d.auth = append(d.auth, r.Header.Get("Authorization"))
	d.mu.Unlock()
	if r.PostForm.Get("Action") != "AssumeRole" {
		http.Error(w, "unexpected action", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/eks/%s</Arn><AssumedRoleId>AROAEXAMPLE:%s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAASSUMED</AccessKeyId>
      <SecretAccessKey>assumed-secret</SecretAccessKey>
      <SessionToken>assumed-session-token</SessionToken>
      <Expiration>2099-01-01T00:00:00Z</Expiration>
    </Credentials>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, r.PostForm.Get("RoleSessionName"), r.PostForm.Get("RoleSessionName"))
}

// TestAssumeRole: with a role, the manager's credentials call AssumeRole (once: the role's
// credentials are cached) and the token is signed with the role's, session token included;
// without one, no STS call is made.
func TestAssumeRole(t *testing.T) {
	double := &stsDouble{}
	srv := httptest.NewServer(double)
	defer srv.Close()
	c := &clock{t: t0}
	base := &awssdk.Config{Region: "us-west-2", Credentials: &counting{}, BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client()}
	const role = "arn:aws:iam::111122223333:role/eks"

	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod", RoleARN: role}, ekstoken.Options{AWS: base, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for range 2 {
		tok, err := src.Token()
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok.AccessToken)
		c.Add(ekstoken.RefreshAfter)
	}
	double.mu.Lock()
	calls, auth := double.calls, double.auth
	double.mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("the STS double got %d calls; want one AssumeRole", len(calls))
	}
	if got := calls[0]; got.Get("Action") != "AssumeRole" || got.Get("RoleArn") != role || got.Get("RoleSessionName") != ekstoken.DefaultSessionName {
		t.Errorf("AssumeRole call %v; want RoleArn %s, RoleSessionName %s", got, role, ekstoken.DefaultSessionName)
	}
	if !strings.Contains(auth[0], "Credential=AKIDMANAGER/") {
		t.Errorf("AssumeRole signed with %q; want the manager's key", auth[0])
	}
	for i, tok := range toks {
		q := decode(t, tok).Query()
		if got := q.Get("X-Amz-Credential"); !strings.HasPrefix(got, "ASIAASSUMED/") {
			t.Errorf("token %d signed by %q; want the role's key", i, got)
		}
		if got := q.Get("X-Amz-Security-Token"); got != "assumed-session-token" {
			t.Errorf("token %d X-Amz-Security-Token %q; want the role's session token", i, got)
		}
		if u := decode(t, tok); u.Host != "sts.us-west-2.amazonaws.com" {
			t.Errorf("token %d is for %s; want the real STS host whatever the SDK's endpoint", i, u.Host)
		}
	}

	// Without a role: no call.
	plain, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: "prod"}, ekstoken.Options{AWS: base, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Token(); err != nil {
		t.Fatal(err)
	}
	double.mu.Lock()
	defer double.mu.Unlock()
	if len(double.calls) != 1 {
		t.Fatalf("a token without a role made %d STS calls", len(double.calls)-1)
	}
}
