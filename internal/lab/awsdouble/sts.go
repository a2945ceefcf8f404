package awsdouble

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// STS: the double answers GetCallerIdentity presigned as a GET with the signature in the
// query string, which is what an EKS token is and what an EKS cluster's authenticator replays
// (kubernetes-sigs/aws-iam-authenticator pkg/token/token.go). It is reached by the request's
// Host: a real STS host name (sts.amazonaws.com, sts.REGION.amazonaws.com[.cn]) on the
// double's listener, so a replay that keeps the token's host reaches it with the host the
// signature covers. It also answers IRSA's AssumeRoleWithWebIdentity (webidentity.go).
// Nothing else of STS is served.

const (
	stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
	// stsVersion is the STS API version every request names.
	stsVersion = "2011-06-15"
	// presignWindow is how long after (and before) its X-Amz-Date STS honours a signed
	// request; X-Amz-Expires does not change it for STS (aws/aws-sdk-go issue 2167,
	// aws-iam-authenticator's presignedURLExpiration).
	presignWindow = 15 * time.Minute
	// emptySHA256 is the payload hash of a GET, which a presigned request signs.
	emptySHA256   = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	amzDateFormat = "20060102T150405Z"
)

// LabUserName is the IAM user of the lab's credentials (AccessKeyID): GetCallerIdentity
// signed with them answers LabUserARN.
const LabUserName = "fedbr-lab"

// labUserID is the lab user's unique id, in the shape of an IAM user's (AIDA…).
const labUserID = "AIDAFEDBRLAB0EXAMPLE"

// DefaultAccountID is the account the double reports when Options.AccountID is empty.
const DefaultAccountID = "123456789012"

// LabUserARN is the ARN STS answers for the lab's credentials in account.
func LabUserARN(account string) string {
	return "arn:aws:iam::" + account + ":user/" + LabUserName
}

// stsHostRE matches STS's host names: the global one and the regional ones of the aws and
// aws-cn partitions. The first group is the region ("" for the global host, us-east-1).
var stsHostRE = regexp.MustCompile(`^sts(?:\.([a-z0-9]+(?:-[a-z0-9]+)+))?\.amazonaws\.com(?:\.cn)?$`)

// isSTSHost says whether host (with or without a port) is an STS host name.
func isSTSHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return stsHostRE.MatchString(strings.ToLower(host))
}

type xmlCallerIdentity struct {
	XMLName xml.Name `xml:"GetCallerIdentityResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		Arn     string `xml:"Arn"`
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
	} `xml:"GetCallerIdentityResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

type xmlSTSError struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

// serveSTS answers one STS request.
func (s *Server) serveSTS(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == webIdentityAction {
			s.serveWebIdentity(w, r)
			return
		}
	}
	const action = "GetCallerIdentity"
	s.received(action)
	arn, userID, e := s.getCallerIdentity(r)
	if e != nil {
		s.count(action, e.Code)
		writeSTSError(w, r, e)
		return
	}
	s.count(action, "")
	id := requestID()
	if wantsJSON(r) {
		// STS answers the JSON form of the same shape to Accept: application/json, which the
		// EKS authenticator sends and reads.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"GetCallerIdentityResponse": map[string]any{
			"GetCallerIdentityResult": map[string]string{"Arn": arn, "UserId": userID, "Account": s.opts.AccountID},
			"ResponseMetadata":        map[string]string{"RequestId": id},
		}})
		return
	}
	out := xmlCallerIdentity{Xmlns: stsNamespace, RequestID: id}
	out.Result.Arn, out.Result.UserID, out.Result.Account = arn, userID, s.opts.AccountID
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(out)
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(strings.ToLower(r.Header.Get("Accept")), "application/json")
}

func writeSTSError(w http.ResponseWriter, r *http.Request, e *apiError) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"Error":     map[string]string{"Type": "Sender", "Code": e.Code, "Message": e.Message},
			"RequestId": requestID(),
		})
		return
	}
	out := xmlSTSError{Xmlns: stsNamespace, RequestID: requestID()}
	out.Error.Type, out.Error.Code, out.Error.Message = "Sender", e.Code, e.Message
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(out)
}

// getCallerIdentity checks a presigned GetCallerIdentity as STS does and returns the caller.
// The signature is recomputed with aws-sdk-go-v2's signer from the request as received (its
// host, path, query without X-Amz-Signature, and the headers X-Amz-SignedHeaders names) and
// the secret of the access key the credential names; the double knows one key, the lab's.
func (s *Server) getCallerIdentity(r *http.Request) (arn, userID string, _ *apiError) {
	if r.Method != http.MethodGet {
		return "", "", errf(400, "InvalidAction", "the double's STS serves GetCallerIdentity presigned as a GET, not %s", r.Method)
	}
	q := r.URL.Query()
	for k, v := range q {
		if len(v) != 1 {
			return "", "", errf(400, "MalformedQueryString", "parameter %s is given %d times", k, len(v))
		}
	}
	if a := q.Get("Action"); a != "GetCallerIdentity" {
		return "", "", errf(400, "InvalidAction", "could not find operation %q for version %s", a, stsVersion)
	}
	if v := q.Get("Version"); v != stsVersion {
		return "", "", errf(400, "InvalidAction", "could not find operation GetCallerIdentity for version %q", v)
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-SignedHeaders") == "" {
		return "", "", errf(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
	}
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "", "", errf(400, "IncompleteSignature", "credential %q is not KEY/DATE/REGION/SERVICE/aws4_request", q.Get("X-Amz-Credential"))
	}
	key, day, region, service := scope[0], scope[1], scope[2], scope[3]
	if key != AccessKeyID || q.Has("X-Amz-Security-Token") {
		// The lab's key is a long-term key: a session token with it is as unknown as
		// another key.
		return "", "", errf(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	signedAt, err := time.Parse(amzDateFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return "", "", errf(400, "IncompleteSignature", "X-Amz-Date %q is not a date like %s", q.Get("X-Amz-Date"), amzDateFormat)
	}
	if day != signedAt.Format("20060102") {
		return "", "", errf(403, "SignatureDoesNotMatch", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: %q != %q", day, signedAt.Format("20060102"))
	}
	if service != "sts" {
		return "", "", errf(403, "SignatureDoesNotMatch", "Credential should be scoped to correct service: 'sts'.")
	}
	if want := hostRegion(r.Host); region != want {
		return "", "", errf(403, "SignatureDoesNotMatch", "Credential should be scoped to a valid region, not %q (host %s is %s).", region, r.Host, want)
	}
	now := s.Now().UTC()
	switch {
	case now.After(signedAt.Add(presignWindow)):
		return "", "", errf(403, "SignatureDoesNotMatch", "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			signedAt.Format(amzDateFormat), now.Add(-presignWindow).Format(amzDateFormat), now.Format(amzDateFormat))
	case now.Before(signedAt.Add(-presignWindow)):
		return "", "", errf(403, "SignatureDoesNotMatch", "Signature not yet current: %s is still later than %s (%s + 15 min.)",
			signedAt.Format(amzDateFormat), now.Add(presignWindow).Format(amzDateFormat), now.Format(amzDateFormat))
	}
	want, err := presignedSignature(r, q, region, signedAt)
	if err != nil {
		// STS computes its signature from whatever the request holds; one that cannot
		// match is a mismatch.
		return "", "", errf(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided: %v", err)
	}
	if !hmac.Equal([]byte(want), []byte(q.Get("X-Amz-Signature"))) {
		return "", "", errf(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return LabUserARN(s.opts.AccountID), labUserID, nil
}

// hostRegion is the region of an STS host: the regional host's, else us-east-1 (the global
// endpoint's signing region).
func hostRegion(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if m := stsHostRE.FindStringSubmatch(strings.ToLower(host)); m != nil && m[1] != "" {
		return m[1]
	}
	return "us-east-1"
}

// presignedSignature signs the request as received again with the lab's secret, with the
// signer the SDK presigns with, and returns the signature; the signed headers it derives
// must be the ones the request claims.
func presignedSignature(r *http.Request, q url.Values, region string, signedAt time.Time) (string, error) {
	claimed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	u := url.URL{Scheme: "https", Host: r.Host, Path: r.URL.Path}
	unsigned := url.Values{}
	for k, v := range q {
		if k != "X-Amz-Signature" {
			unsigned[k] = v
		}
	}
	u.RawQuery = unsigned.Encode()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return "", err
	}
	req.Host = r.Host
	for _, h := range claimed {
		if h == "host" {
			continue
		}
		v, ok := r.Header[http.CanonicalHeaderKey(h)]
		if !ok {
			return "", fmt.Errorf("signed header %s is not in the request", h)
		}
		req.Header[http.CanonicalHeaderKey(h)] = v
	}
	creds := awssdk.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, emptySHA256, "sts", region, signedAt)
	if err != nil {
		return "", err
	}
	su, err := url.Parse(signed)
	if err != nil {
		return "", err
	}
	got := strings.Split(su.Query().Get("X-Amz-SignedHeaders"), ";")
	if !slices.Equal(got, claimed) {
		// Headers the signer never signs (User-Agent, …) were claimed: no signature
		// computed from this request can match.
		return "", fmt.Errorf("signed headers %q are not %q", claimed, got)
	}
	return su.Query().Get("X-Amz-Signature"), nil
}
