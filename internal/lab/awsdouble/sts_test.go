package awsdouble_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// eksToken mints, with ekstoken (the manager's code), the token of cluster signed with key and
// secret at time at, and returns its presigned URL.
func eksToken(t *testing.T, cluster, key, secret string, at time.Time) *url.URL {
	t.Helper()
	src, err := ekstoken.New(context.Background(), ekstoken.Request{Cluster: cluster, Region: "us-west-2"}, ekstoken.Options{
		AWS: &awssdk.Config{Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")},
		Now: func() time.Time { return at },
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Token()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok.AccessToken, ekstoken.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// replay sends the presigned request u to the double at endpoint as an EKS authenticator
// does: the token's URL on the double's listener, the token's host kept, the cluster header
// set; it returns the status and the body.
func replay(t *testing.T, endpoint string, u *url.URL, cluster, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, endpoint+u.Path+"?"+u.RawQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = u.Host
	req.Header.Set(ekstoken.ClusterHeader, cluster)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestSTSGetCallerIdentity: a token the manager's ekstoken mints with the lab's credentials,
// replayed with its cluster header, is answered with the lab user's identity in STS's XML
// (and in its JSON to Accept: application/json, as the EKS authenticator asks); a
// tampered signature, another secret, another cluster header, an unknown key and a token
// signed more than 15 minutes ago are refused with STS's error codes.
func TestSTSGetCallerIdentity(t *testing.T) {
	srv, endpoint := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	now := srv.Now()
	good := eksToken(t, "dp1", awsdouble.AccessKeyID, awsdouble.SecretAccessKey, now)

	status, body := replay(t, endpoint, good, "dp1", "")
	if status != http.StatusOK {
		t.Fatalf("good token: %d %s", status, body)
	}
	var x struct {
		XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ GetCallerIdentityResponse"`
		Arn     string   `xml:"GetCallerIdentityResult>Arn"`
		UserID  string   `xml:"GetCallerIdentityResult>UserId"`
		Account string   `xml:"GetCallerIdentityResult>Account"`
		ReqID   string   `xml:"ResponseMetadata>RequestId"`
	}
	if err := xml.Unmarshal(body, &x); err != nil {
		t.Fatalf("good token: %v in %s", err, body)
	}
	if x.Arn != "arn:aws:iam::123456789012:user/fedbr-lab" || x.Account != "123456789012" || !strings.HasPrefix(x.UserID, "AIDA") || x.ReqID == "" {
		t.Errorf("identity %+v; want the lab user arn:aws:iam::123456789012:user/fedbr-lab", x)
	}

	status, body = replay(t, endpoint, good, "dp1", "application/json")
	var j struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct {
				Arn     string `json:"Arn"`
				UserID  string `json:"UserId"`
				Account string `json:"Account"`
			}
		}
	}
	if err := json.Unmarshal(body, &j); status != http.StatusOK || err != nil {
		t.Fatalf("good token, JSON: %d %v %s", status, err, body)
	}
	if got := j.GetCallerIdentityResponse.GetCallerIdentityResult; got.Arn != awsdouble.LabUserARN("123456789012") || got.Account != "123456789012" {
		t.Errorf("JSON identity %+v", got)
	}

	tampered := *good
	q := tampered.Query()
	sig := []byte(q.Get("X-Amz-Signature"))
	sig[0] ^= 1
	q.Set("X-Amz-Signature", string(sig))
	tampered.RawQuery = q.Encode()

	for _, tc := range []struct {
		name    string
		u       *url.URL
		cluster string
		advance time.Duration
		code    string
		message string
	}{
		{"tampered signature", &tampered, "dp1", 0, "SignatureDoesNotMatch", "does not match"},
		{"another secret", eksToken(t, "dp1", awsdouble.AccessKeyID, "not-the-lab-secret", now), "dp1", 0, "SignatureDoesNotMatch", "does not match"},
		{"another cluster header", good, "dp2", 0, "SignatureDoesNotMatch", "does not match"},
		{"unknown access key", eksToken(t, "dp1", "AKIDSOMEONEELSE", awsdouble.SecretAccessKey, now), "dp1", 0, "InvalidClientTokenId", "security token included in the request is invalid"},
		{"signed 16 minutes ago", good, "dp1", 16 * time.Minute, "SignatureDoesNotMatch", "Signature expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Advance(tc.advance)
			status, body := replay(t, endpoint, tc.u, tc.cluster, "")
			var e struct {
				XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ ErrorResponse"`
				Code    string   `xml:"Error>Code"`
				Message string   `xml:"Error>Message"`
			}
			if err := xml.Unmarshal(body, &e); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if status != http.StatusForbidden || e.Code != tc.code || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("%d %s: %s; want 403 %s %q", status, e.Code, e.Message, tc.code, tc.message)
			}
		})
	}
}

// TestSTSPresignWindow: STS honours a presigned request for 15 minutes after its X-Amz-Date,
// whatever its X-Amz-Expires (60 here): at 14m59s it answers, at 15m01s it refuses.
func TestSTSPresignWindow(t *testing.T) {
	srv, endpoint := serve(t, t.TempDir(), awsdouble.Options{TimeFactor: stopped})
	tok := eksToken(t, "dp1", awsdouble.AccessKeyID, awsdouble.SecretAccessKey, srv.Now().Truncate(time.Second))
	if got := tok.Query().Get("X-Amz-Expires"); got != "60" {
		t.Fatalf("X-Amz-Expires %s; the test wants the 60 both EKS tools send", got)
	}
	srv.Advance(15*time.Minute - time.Second)
	if status, body := replay(t, endpoint, tok, "dp1", ""); status != http.StatusOK {
		t.Fatalf("at 14m59s: %d %s; want it honoured", status, body)
	}
	srv.Advance(2 * time.Second)
	if status, body := replay(t, endpoint, tok, "dp1", ""); status != http.StatusForbidden || !strings.Contains(string(body), "Signature expired") {
		t.Fatalf("at 15m01s: %d %s; want Signature expired", status, body)
	}
}
