// Package ekstoken mints the bearer tokens of Amazon EKS clusters in-process, for the kubeconfig
// users that would run "aws eks get-token" or "aws-iam-authenticator token": the manager's image
// has neither program, and runs no credential plugin at all.
//
// An EKS token is a presigned STS GetCallerIdentity request: "k8s-aws-v1." followed by the
// unpadded URL-safe base64 of the URL https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity
// &Version=2011-06-15&X-Amz-Expires=60&X-Amz-Algorithm=…, signed with SigV4 for service sts with
// the header x-k8s-aws-id (the cluster's name) among the signed headers. The cluster's
// authenticator replays the request to STS and maps the identity that answers. STS honours such
// a URL for 15 minutes after its X-Amz-Date whatever X-Amz-Expires says (60 is what both tools
// send); both tools tell client-go the token expires after 14 minutes, and a Source mints a new
// one then (kubernetes-sigs/aws-iam-authenticator pkg/token/token.go, aws/aws-cli
// awscli/customizations/eks/get_token.py).
//
// The token is signed with the manager's own AWS identity, loaded like every fedbr AWS
// configuration from the environment only (internal/cloud/aws.LoadConfig: static keys, IRSA's
// web identity, EKS Pod Identity's container credentials, the instance's role; never
// ~/.aws files), or with a role assumed with it when the command names one. Nothing of the
// kubeconfig's exec entry but the command's arguments is read: its env entries (AWS_PROFILE,
// AWS_ROLE_ARN, AWS_STS_REGIONAL_ENDPOINTS, …) are ignored, so the kubeconfig cannot choose the
// credentials or the STS endpoint beyond the region and the role its arguments name.
package ekstoken

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"golang.org/x/oauth2"
	"k8s.io/client-go/transport"

	fedaws "github.com/fedbr/fedbr/internal/cloud/aws"
)

const (
	// Prefix starts every EKS token.
	Prefix = "k8s-aws-v1."
	// ClusterHeader is the signed header that names the cluster.
	ClusterHeader = "x-k8s-aws-id"
	// PresignExpires is the URL's X-Amz-Expires in seconds; STS ignores it (Lifetime rules).
	PresignExpires = 60
	// Lifetime is how long STS honours a token after its signing time.
	Lifetime = 15 * time.Minute
	// RefreshAfter is when a Source mints the next token: a minute before Lifetime ends, as
	// the expirationTimestamp both tools give client-go.
	RefreshAfter = 14 * time.Minute
	// mintTimeout bounds one mint: the credentials' retrieval (an AssumeRole, a web identity
	// exchange) and the signing.
	mintTimeout = 30 * time.Second
	// emptyPayloadHash is the SHA-256 of an empty body, which a GET signs.
	emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// ErrNoRegion is New's error when neither the request nor the environment names a region.
var ErrNoRegion = errors.New("no region: give --region in the exec arguments or AWS_REGION to the manager")

// Options configure a Source. Zero fields take defaults.
type Options struct {
	// AWS is a pre-loaded SDK configuration (tests); nil means LoadConfig from the environment.
	AWS *awssdk.Config
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Source mints and caches the tokens of one EKS cluster. It is an oauth2.TokenSource and a
// client-go transport.ResettableTokenSource, safe for concurrent use: one token at a time is
// minted, and every caller gets the cached one until RefreshAfter (or a reset) has passed.
type Source struct {
	req    Request
	region string
	url    string // the presigned request's URL before signing
	creds  awssdk.CredentialsProvider
	now    func() time.Time
	signer *v4.Signer

	mu     sync.Mutex
	token  string
	minted time.Time
}

var _ transport.ResettableTokenSource = (*Source)(nil)

// New prepares the Source of req's cluster: the region (req's, else the environment's), the
// credentials (the environment's, through the role when req names one). It calls nothing;
// the first Token does.
func New(ctx context.Context, req Request, o Options) (*Source, error) {
	ac, err := fedaws.LoadConfig(ctx, o.AWS, req.Region)
	if err != nil {
		return nil, fmt.Errorf("EKS cluster %s: %w", req.Cluster, err)
	}
	region := req.Region
	if region == "" {
		region = ac.Region
	}
	if region == "" {
		return nil, fmt.Errorf("EKS cluster %s: %w", req.Cluster, ErrNoRegion)
	}
	if !regionRE.MatchString(region) {
		return nil, fmt.Errorf("EKS cluster %s: region %q is not a region name", req.Cluster, region)
	}
	ac.Region = region
	endpoint, err := sts.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, sts.EndpointParameters{
		Region: awssdk.String(region), UseGlobalEndpoint: awssdk.Bool(false),
	})
	if err != nil {
		return nil, fmt.Errorf("EKS cluster %s: STS endpoint of region %s: %w", req.Cluster, region, err)
	}
	u := endpoint.URI
	u.Path = "/"
	u.RawQuery = "Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=" + strconv.Itoa(PresignExpires)
	creds := ac.Credentials
	if req.RoleARN != "" {
		session := req.SessionName
		if session == "" {
			session = DefaultSessionName
		}
		creds = awssdk.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(ac), req.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = session }))
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Source{req: req, region: region, url: u.String(), creds: creds, now: now, signer: v4.NewSigner()}, nil
}

// Token returns the cached token while it is younger than RefreshAfter, else mints one. A
// failed mint still returns the cached token while STS honours it (younger than Lifetime; the
// next call tries again), and the error after that.
func (s *Source) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Before(s.minted.Add(RefreshAfter)) {
		return s.oauth2(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), mintTimeout)
	defer cancel()
	tok, err := s.mint(ctx, now)
	if err != nil {
		if s.token != "" && now.Before(s.minted.Add(Lifetime)) {
			return s.oauth2(), nil
		}
		return nil, fmt.Errorf("minting a token for EKS cluster %s: %w", s.req.Cluster, err)
	}
	s.token, s.minted = tok, now
	return s.oauth2(), nil
}

// ResetTokenOlderThan drops the cached token if it was minted before t, so the next Token
// mints one: client-go calls it when the API server answered 401 to a request sent at t.
func (s *Source) ResetTokenOlderThan(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && s.minted.Before(t) {
		s.token = ""
	}
}

// Wrap is a rest.Config WrapTransport: it sets the Source's token on every request that has
// no Authorization header, and resets it when the API server answers 401.
func (s *Source) Wrap(rt http.RoundTripper) http.RoundTripper {
	return transport.ResettableTokenSourceWrapTransport(s)(rt)
}

func (s *Source) oauth2() *oauth2.Token {
	return &oauth2.Token{AccessToken: s.token, TokenType: "Bearer", Expiry: s.minted.Add(RefreshAfter)}
}

// mint signs a GetCallerIdentity request for the cluster at now and encodes its URL.
func (s *Source) mint(ctx context.Context, now time.Time) (string, error) {
	if s.creds == nil {
		return "", errors.New("no AWS credentials in the manager's environment")
	}
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, http.NoBody)
	if err != nil {
		return "", err
	}
	req.Header.Set(ClusterHeader, s.req.Cluster)
	signed, _, err := s.signer.PresignHTTP(ctx, creds, req, emptyPayloadHash, "sts", s.region, now)
	if err != nil {
		return "", err
	}
	return Prefix + base64.RawURLEncoding.EncodeToString([]byte(signed)), nil
}
