// Package eksauth is the lab's stand-in for an Amazon EKS cluster's token authenticator: a
// Kubernetes webhook token authenticator (authentication.k8s.io/v1 TokenReview over HTTPS)
// that verifies EKS tokens as aws-iam-authenticator's server does
// (kubernetes-sigs/aws-iam-authenticator pkg/token/token.go, Verify) and maps the AWS identity
// to a Kubernetes user as EKS's aws-auth ConfigMap does (mapUsers, mapRoles).
//
// A token is "k8s-aws-v1." and the unpadded URL-safe base64 of a presigned STS
// GetCallerIdentity URL. The authenticator checks its envelope (size, prefix, an https URL on
// an STS host with path /, only the query parameters a presign has, each once,
// Action=GetCallerIdentity, Version=2011-06-15, x-k8s-aws-id among the signed headers,
// 0 ≤ X-Amz-Expires ≤ 900, X-Amz-Date within the last 15 minutes), then replays the request
// to STS with its own cluster's name in the x-k8s-aws-id header, so a token signed for another
// cluster fails STS's signature check. In the lab STS is the AWS double (Options.STSEndpoint),
// reached with the token's Host kept, which the signature covers. The ARN STS answers (an
// assumed role's in its role's form) is looked up in Options.Mappings.
package eksauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Prefix starts every EKS token.
	Prefix = "k8s-aws-v1."
	// ClusterHeader is the signed header that names the cluster.
	ClusterHeader = "x-k8s-aws-id"
	// Path is where the authenticator serves TokenReviews, as aws-iam-authenticator does.
	Path = "/authenticate"
	// Lifetime is how long after its X-Amz-Date a token is honoured.
	Lifetime = 15 * time.Minute
	// maxTokenLen is the longest token taken.
	maxTokenLen = 4096
	// maxExpires is the largest X-Amz-Expires taken, in seconds (STS ignores it).
	maxExpires    = 900
	amzDateFormat = "20060102T150405Z"
	stsVersion    = "2011-06-15"
	replayTimeout = 10 * time.Second
)

// The reasons a token is refused; Verify's error wraps one of them.
var (
	// ErrFormat is a token that is not a presigned GetCallerIdentity URL as EKS takes it.
	ErrFormat = errors.New("input token was not properly formatted")
	// ErrHost is a token whose URL is not on an STS host.
	ErrHost = errors.New("unexpected hostname in pre-signed URL")
	// ErrClusterHeader is a token whose signature does not cover the x-k8s-aws-id header.
	ErrClusterHeader = errors.New("client did not sign the " + ClusterHeader + " header in the pre-signed URL")
	// ErrExpired is a token signed more than Lifetime ago.
	ErrExpired = errors.New("X-Amz-Date parameter is expired")
	// ErrSTS is STS's refusal of the replayed request (or no answer): a signature that does
	// not match (another cluster's token, a tampered one), an unknown key.
	ErrSTS = errors.New("sts getCallerIdentity failed")
	// ErrUnmapped is an identity no mapping names.
	ErrUnmapped = errors.New("ARN is not mapped")
)

// Mapping maps an AWS identity to a Kubernetes user, as an entry of aws-auth's mapUsers (an
// IAM user's ARN) or mapRoles (an IAM role's ARN, which every session of the role maps to).
type Mapping struct {
	ARN      string   `json:"arn"`
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

// ParseMapping reads "ARN=USERNAME[:GROUP,GROUP…]".
func ParseMapping(s string) (Mapping, error) {
	arn, rest, ok := strings.Cut(s, "=")
	user, groups, _ := strings.Cut(rest, ":")
	if !ok || !strings.HasPrefix(arn, "arn:") || user == "" {
		return Mapping{}, fmt.Errorf("mapping %q: want ARN=USERNAME[:GROUP,GROUP…]", s)
	}
	m := Mapping{ARN: arn, Username: user}
	if groups != "" {
		m.Groups = strings.Split(groups, ",")
	}
	return m, nil
}

// Options configure an Authenticator.
type Options struct {
	// Cluster is the cluster's name (or id): the x-k8s-aws-id value tokens are signed for.
	Cluster string
	// STSEndpoint is where tokens are replayed (scheme and host; the token's path and query
	// are kept, and its host sent as Host): the lab's AWS double.
	STSEndpoint string
	// Mappings map identities to users.
	Mappings []Mapping
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Client replays tokens; nil means a client that follows no redirect.
	Client *http.Client
}

// Identity is a verified token's.
type Identity struct {
	// ARN is what STS answered; CanonicalARN is its IAM form (an assumed role's role).
	ARN, CanonicalARN string
	Account, UserID   string
	// SessionName is an assumed role's session ("" for an IAM user).
	SessionName string
	AccessKeyID string
	// User is the mapped Kubernetes user.
	User authv1.UserInfo
}

// Authenticator verifies EKS tokens of one cluster.
type Authenticator struct {
	o        Options
	endpoint *url.URL
}

// New checks o and returns its Authenticator.
func New(o Options) (*Authenticator, error) {
	if o.Cluster == "" {
		return nil, errors.New("eksauth: no cluster name")
	}
	u, err := url.Parse(o.STSEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("eksauth: STS endpoint %q is not an http(s) URL", o.STSEndpoint)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Timeout:       replayTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Authenticator{o: o, endpoint: u}, nil
}

// stsHostRE matches STS's host names: sts.amazonaws.com and the regional
// sts.REGION.amazonaws.com, in the aws and aws-cn (.cn) partitions.
var stsHostRE = regexp.MustCompile(`^sts(\.[a-z0-9]+(-[a-z0-9]+)+)?\.amazonaws\.com(\.cn)?$`)

// presignParams are the query parameters a presigned GetCallerIdentity has (lower case).
var presignParams = []string{"action", "version", "x-amz-algorithm", "x-amz-credential", "x-amz-date",
	"x-amz-expires", "x-amz-security-token", "x-amz-signature", "x-amz-signedheaders"}

// Verify checks token and returns the identity it maps to.
func (a *Authenticator) Verify(ctx context.Context, token string) (*Identity, error) {
	u, q, err := a.parse(token)
	if err != nil {
		return nil, err
	}
	id, err := a.replay(ctx, u)
	if err != nil {
		return nil, err
	}
	id.AccessKeyID, _, _ = strings.Cut(q.Get("x-amz-credential"), "/")
	for _, m := range a.o.Mappings {
		if m.ARN == id.CanonicalARN || m.ARN == id.ARN {
			id.User = authv1.UserInfo{
				Username: m.Username,
				UID:      "aws-iam-authenticator:" + id.Account + ":" + id.UserID,
				Groups:   slices.Clone(m.Groups),
				Extra: map[string]authv1.ExtraValue{
					"arn":          {id.ARN},
					"canonicalArn": {id.CanonicalARN},
					"accessKeyId":  {id.AccessKeyID},
				},
			}
			if id.SessionName != "" {
				id.User.Extra["sessionName"] = authv1.ExtraValue{id.SessionName}
			}
			return id, nil
		}
	}
	return nil, fmt.Errorf("%w: %s (canonical %s)", ErrUnmapped, id.ARN, id.CanonicalARN)
}

// parse checks the token's envelope and returns its URL and lower-cased query.
func (a *Authenticator) parse(token string) (*url.URL, url.Values, error) {
	if len(token) > maxTokenLen {
		return nil, nil, fmt.Errorf("%w: token is too large", ErrFormat)
	}
	enc, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return nil, nil, fmt.Errorf("%w: token is missing expected %q prefix", ErrFormat, Prefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if u.Scheme != "https" {
		return nil, nil, fmt.Errorf("%w: unexpected scheme %q in pre-signed URL", ErrFormat, u.Scheme)
	}
	if !stsHostRE.MatchString(u.Host) {
		return nil, nil, fmt.Errorf("%w: %q", ErrHost, u.Host)
	}
	if u.Path != "/" {
		return nil, nil, fmt.Errorf("%w: unexpected path %q in pre-signed URL", ErrFormat, u.Path)
	}
	params, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: malformed query parameter", ErrFormat)
	}
	q := url.Values{}
	for k, v := range params {
		lk := strings.ToLower(k)
		if !slices.Contains(presignParams, lk) {
			return nil, nil, fmt.Errorf("%w: non-whitelisted query parameter %q", ErrFormat, k)
		}
		if len(v) != 1 || q.Has(lk) {
			return nil, nil, fmt.Errorf("%w: query parameter %q with multiple values", ErrFormat, k)
		}
		q.Set(lk, v[0])
	}
	if q.Get("action") != "GetCallerIdentity" {
		return nil, nil, fmt.Errorf("%w: unexpected action %q in pre-signed URL", ErrFormat, q.Get("action"))
	}
	if q.Get("version") != stsVersion {
		return nil, nil, fmt.Errorf("%w: unexpected version %q in pre-signed URL", ErrFormat, q.Get("version"))
	}
	signed := strings.Split(strings.ToLower(q.Get("x-amz-signedheaders")), ";")
	if !slices.Contains(signed, ClusterHeader) {
		return nil, nil, ErrClusterHeader
	}
	expires, err := strconv.Atoi(q.Get("x-amz-expires"))
	if err != nil || expires < 0 || expires > maxExpires {
		return nil, nil, fmt.Errorf("%w: invalid X-Amz-Expires parameter %q in pre-signed URL", ErrFormat, q.Get("x-amz-expires"))
	}
	date, err := time.Parse(amzDateFormat, q.Get("x-amz-date"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: X-Amz-Date parameter %q: %w", ErrFormat, q.Get("x-amz-date"), err)
	}
	if a.o.Now().After(date.Add(Lifetime)) {
		return nil, nil, fmt.Errorf("%w (%.f minute expiration) %s", ErrExpired, Lifetime.Minutes(), date)
	}
	return u, q, nil
}

// callerIdentity is STS's JSON answer, which the authenticator asks for.
type callerIdentity struct {
	GetCallerIdentityResponse struct {
		GetCallerIdentityResult struct {
			Account string `json:"Account"`
			Arn     string `json:"Arn"`
			UserID  string `json:"UserId"`
		} `json:"GetCallerIdentityResult"`
	} `json:"GetCallerIdentityResponse"`
}

// replay sends the presigned request to STS with this cluster's header and reads the caller.
func (a *Authenticator) replay(ctx context.Context, u *url.URL) (*Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	target := *a.endpoint
	target.Path, target.RawQuery = u.Path, u.RawQuery
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSTS, err)
	}
	req.Host = u.Host // the signature covers it
	req.Header.Set(ClusterHeader, a.o.Cluster)
	req.Header.Set("Accept", "application/json")
	resp, err := a.o.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // not the URL: it is the token
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: error during GET: %w", ErrSTS, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: error reading HTTP result: %w", ErrSTS, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: error from AWS (expected 200, got %d). Body: %s", ErrSTS, resp.StatusCode, bytes.TrimSpace(body))
	}
	var ci callerIdentity
	if err := json.Unmarshal(body, &ci); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSTS, err)
	}
	r := ci.GetCallerIdentityResponse.GetCallerIdentityResult
	id := &Identity{ARN: r.Arn, Account: r.Account}
	if id.CanonicalARN, err = canonicalize(r.Arn); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSTS, err)
	}
	// UserId is the unique id, then ":" and the session name for an assumed role.
	parts := strings.Split(r.UserID, ":")
	switch len(parts) {
	case 1:
		id.UserID = parts[0]
	case 2:
		id.UserID, id.SessionName = parts[0], parts[1]
	default:
		return nil, fmt.Errorf("%w: malformed UserID %q", ErrSTS, r.UserID)
	}
	return id, nil
}

// canonicalize turns an assumed role's ARN (arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/
// SESSION) into its role's (arn:PARTITION:iam::ACCOUNT:role/ROLE) and leaves an IAM user's,
// role's or the root's as they are.
func canonicalize(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return "", fmt.Errorf("%q is not an ARN", arn)
	}
	partition, service, account, resource := parts[1], parts[2], parts[4], parts[5]
	switch service {
	case "iam":
		return arn, nil
	case "sts":
		kind, rest, _ := strings.Cut(resource, "/")
		role, _, ok := strings.Cut(rest, "/")
		if kind != "assumed-role" || !ok || role == "" {
			return "", fmt.Errorf("unrecognized resource %q of STS ARN %s", resource, arn)
		}
		return "arn:" + partition + ":iam::" + account + ":role/" + role, nil
	}
	return "", fmt.Errorf("service %q in ARN %s is neither iam nor sts", service, arn)
}

// ServeHTTP answers a TokenReview (authentication.k8s.io/v1) POSTed to Path: authenticated
// with the mapped user, or not with the reason in status.error.
func (a *Authenticator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST a TokenReview", http.StatusMethodNotAllowed)
		return
	}
	var review authv1.TokenReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(w, "not a TokenReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := authv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: authv1.SchemeGroupVersion.String(), Kind: "TokenReview"}}
	id, err := a.Verify(r.Context(), review.Spec.Token)
	if err != nil {
		out.Status.Error = err.Error()
	} else {
		out.Status.Authenticated = true
		out.Status.User = id.User
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
