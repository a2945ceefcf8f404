package eksauth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	authv1 "k8s.io/api/authentication/v1"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/eksauth"
)

// stopped is a double clock that practically stands still.
const stopped = 1e-9

// sts serves an AWS double (its STS checks signatures with the lab's credentials).
func sts(t *testing.T) (*awsdouble.Server, string) {
	t.Helper()
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return srv, hs.URL
}

// mint is the token ekstoken (the manager's code) mints for cluster at time at with the lab's
// credentials.
func mint(t *testing.T, cluster string, at time.Time) string {
	t.Helper()
	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: cluster, Region: "us-west-2"}, ekstoken.Options{
		AWS: awsdouble.Config("us-west-2"), Now: func() time.Time { return at },
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Token()
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// rewrite decodes a token, changes its URL, and encodes it again.
func rewrite(t *testing.T, tok string, change func(u *url.URL)) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, ekstoken.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	change(u)
	return ekstoken.Prefix + base64.RawURLEncoding.EncodeToString([]byte(u.String()))
}

// withoutClusterHeader is a presigned GetCallerIdentity of the lab's credentials, signed at
// at, that does not sign x-k8s-aws-id.
func withoutClusterHeader(t *testing.T, at time.Time) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		"https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := awssdk.Credentials{AccessKeyID: awsdouble.AccessKeyID, SecretAccessKey: awsdouble.SecretAccessKey}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sts", "us-west-2", at)
	if err != nil {
		t.Fatal(err)
	}
	return ekstoken.Prefix + base64.RawURLEncoding.EncodeToString([]byte(signed))
}

var labMapping = eksauth.Mapping{ARN: awsdouble.LabUserARN(awsdouble.DefaultAccountID), Username: "fedbr-manager", Groups: []string{"fedbr:managers"}}

// review POSTs a TokenReview of tok to the authenticator's handler and returns its status.
func review(t *testing.T, a *eksauth.Authenticator, tok string) authv1.TokenReviewStatus {
	t.Helper()
	body, err := json.Marshal(authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodPost, eksauth.Path, bytes.NewReader(body)))
	if w.Code != http.StatusOK {
		t.Fatalf("TokenReview answered %d %s", w.Code, w.Body)
	}
	var out authv1.TokenReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "authentication.k8s.io/v1" || out.Kind != "TokenReview" {
		t.Errorf("answer is a %s %s; want an authentication.k8s.io/v1 TokenReview", out.APIVersion, out.Kind)
	}
	return out.Status
}

// TestTokenReview: a token the manager's ekstoken mints for this cluster with the lab's
// credentials is authenticated as the user the lab's identity maps to; every other token is
// refused, with status.authenticated false and the reason: another cluster's (STS's
// signature check, as the real authenticator sends its own cluster's name), a URL off STS's
// hosts, a presign that does not sign the cluster header, one signed 16 minutes ago, a
// wrong prefix, an X-Amz-Expires over 900, a parameter a presign does not have, an identity
// no mapping names.
func TestTokenReview(t *testing.T) {
	srv, endpoint := sts(t)
	now := srv.Now()
	newAuth := func(maps ...eksauth.Mapping) *eksauth.Authenticator {
		a, err := eksauth.New(eksauth.Options{Cluster: "dp1", STSEndpoint: endpoint, Mappings: maps, Now: srv.Now})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := newAuth(labMapping)
	good := mint(t, "dp1", now)

	st := review(t, a, good)
	if !st.Authenticated || st.Error != "" || st.User.Username != "fedbr-manager" ||
		len(st.User.Groups) != 1 || st.User.Groups[0] != "fedbr:managers" ||
		st.User.Extra["arn"][0] != "arn:aws:iam::123456789012:user/fedbr-lab" || st.User.Extra["accessKeyId"][0] != awsdouble.AccessKeyID {
		t.Fatalf("good token: %+v; want fedbr-manager in fedbr:managers, ARN of the lab user", st)
	}

	for _, tc := range []struct {
		name    string
		auth    *eksauth.Authenticator
		token   string
		is      error
		mention string
	}{
		{"another cluster's token", a, mint(t, "dp2", now), eksauth.ErrSTS, "SignatureDoesNotMatch"},
		{"not an STS host", a, rewrite(t, good, func(u *url.URL) { u.Host = "sts.us-west-2.amazonaws.com.evil.example" }), eksauth.ErrHost, "evil.example"},
		{"cluster header not signed", a, withoutClusterHeader(t, now), eksauth.ErrClusterHeader, "x-k8s-aws-id"},
		{"signed 16 minutes ago", a, mint(t, "dp1", now.Add(-16*time.Minute)), eksauth.ErrExpired, "15 minute expiration"},
		{"another prefix", a, "k8s-aws-v2." + strings.TrimPrefix(good, ekstoken.Prefix), eksauth.ErrFormat, "prefix"},
		{"X-Amz-Expires over 900", a, rewrite(t, good, func(u *url.URL) {
			q := u.Query()
			q.Set("X-Amz-Expires", "901")
			u.RawQuery = q.Encode()
		}), eksauth.ErrFormat, "X-Amz-Expires"},
		{"a parameter a presign does not have", a, rewrite(t, good, func(u *url.URL) { u.RawQuery += "&RoleArn=x" }), eksauth.ErrFormat, "RoleArn"},
		{"another action", a, rewrite(t, good, func(u *url.URL) {
			q := u.Query()
			q.Set("Action", "AssumeRole")
			u.RawQuery = q.Encode()
		}), eksauth.ErrFormat, "AssumeRole"},
		{"an identity not mapped", newAuth(), good, eksauth.ErrUnmapped, "fedbr-lab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.auth.Verify(context.Background(), tc.token)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Verify = %+v, %v; want %v mentioning %q", id, err, tc.is, tc.mention)
			}
			st := review(t, tc.auth, tc.token)
			if st.Authenticated || !strings.HasPrefix(st.Error, tc.is.Error()) || !strings.Contains(st.Error, tc.mention) || st.User.Username != "" {
				t.Fatalf("TokenReview status %+v; want not authenticated with error %q mentioning %q", st, tc.is, tc.mention)
			}
		})
	}
}

// TestParseMapping: ARN=USER[:GROUP,…], and nothing else.
func TestParseMapping(t *testing.T) {
	m, err := eksauth.ParseMapping("arn:aws:iam::123456789012:user/fedbr-lab=fedbr-manager:a,b")
	if err != nil || m.ARN != "arn:aws:iam::123456789012:user/fedbr-lab" || m.Username != "fedbr-manager" || len(m.Groups) != 2 || m.Groups[1] != "b" {
		t.Fatalf("ParseMapping = %+v, %v", m, err)
	}
	for _, bad := range []string{"fedbr-manager", "arn:aws:iam::1:user/x=", "user/x=fedbr-manager"} {
		if _, err := eksauth.ParseMapping(bad); err == nil {
			t.Errorf("ParseMapping(%q) took it", bad)
		}
	}
}
