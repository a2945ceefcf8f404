// Package metricsauth serves the manager's and the agent's /metrics to authorized callers only:
// over HTTPS, each request's bearer token authenticated by the API server (TokenReview) and the
// caller authorized for `get` on the request's path as a non-resource URL (SubjectAccessReview),
// as kube-rbac-proxy and controller-runtime's filters do. It calls the two APIs with client-go
// itself rather than through controller-runtime's filters package, which would link
// k8s.io/apiserver into every fedbr binary for two requests.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Flags are the metrics endpoint's flags, the same on the manager and the agent.
type Flags struct {
	// Addr is the listen address ("0" disables the endpoint).
	Addr string
	// Secure serves HTTPS to authorized callers only (ServerOptions).
	Secure bool
	// CertDir holds the serving certificate (tls.crt, tls.key); empty: a self-signed one.
	CertDir string
}

// Register adds --metrics-bind-address, --metrics-secure and --metrics-cert-dir to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Addr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it)")
	fs.BoolVar(&f.Secure, "metrics-secure", true, "serve /metrics over HTTPS to callers whose bearer token the API server authenticates (TokenReview) and authorizes for get on the non-resource URL /metrics (SubjectAccessReview); false serves plain HTTP to anyone who can reach the port")
	fs.StringVar(&f.CertDir, "metrics-cert-dir", "", "folder with the metrics endpoint's tls.crt and tls.key, reloaded when they change (default: a self-signed certificate made at start)")
}

// Options are f's metrics server options (ServerOptions).
func (f Flags) Options() metricsserver.Options { return ServerOptions(f.Addr, f.Secure, f.CertDir) }

// ServerOptions are the metrics server's options for addr ("0" disables it). Secure serves
// HTTPS (a self-signed certificate unless certDir holds tls.crt and tls.key) and lets only
// authorized callers read (Filter); insecure serves plain HTTP to anyone who can reach addr.
func ServerOptions(addr string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing, o.CertDir, o.FilterProvider = true, certDir, Filter
	}
	return o
}

// cacheTTL is how long a token's decision is reused: a scrape every 30 s costs the API server
// two requests a minute, and a revoked permission holds for at most this long.
const cacheTTL = time.Minute

// maxCached bounds the decisions kept (one per token and path seen in cacheTTL).
const maxCached = 256

// Filter is a metricsserver.FilterProvider: it authenticates and authorizes every request
// through the API server at c.
func Filter(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	a := &authorizer{reviews: reviewer{cs}, now: time.Now, cache: map[[sha256.Size]byte]decision{}}
	return func(log logr.Logger, h http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status, why := a.allow(r.Context(), r)
			if status != http.StatusOK {
				log.V(1).Info("metrics request refused", "path", r.URL.Path, "status", status, "reason", why)
				http.Error(w, why, status)
				return
			}
			h.ServeHTTP(w, r)
		}), nil
	}, nil
}

// Reviews are the two API calls a decision needs.
type Reviews interface {
	// User returns the token's user, or ok false when the API server does not authenticate it.
	User(ctx context.Context, token string) (user authnv1.UserInfo, ok bool, err error)
	// Allowed says whether user may get the non-resource URL path.
	Allowed(ctx context.Context, user authnv1.UserInfo, path string) (bool, error)
}

type reviewer struct{ cs kubernetes.Interface }

func (r reviewer) User(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	tr, err := r.cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, err
	}
	return tr.Status.User, tr.Status.Authenticated, nil
}

func (r reviewer) Allowed(ctx context.Context, u authnv1.UserInfo, path string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := r.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

type decision struct {
	status int
	why    string
	at     time.Time
}

type authorizer struct {
	reviews Reviews
	now     func() time.Time
	mu      sync.Mutex
	cache   map[[sha256.Size]byte]decision
}

// allow decides a request: 200, 401 without a token the API server authenticates, 403 when
// its user may not get the path, 500 when the API server could not be asked (not cached).
func (a *authorizer) allow(ctx context.Context, r *http.Request) (int, string) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return http.StatusUnauthorized, "Unauthorized: a bearer token is required"
	}
	key := sha256.Sum256([]byte(r.URL.Path + "\x00" + token))
	a.mu.Lock()
	d, hit := a.cache[key]
	a.mu.Unlock()
	if hit && a.now().Sub(d.at) < cacheTTL {
		return d.status, d.why
	}
	d = a.decide(ctx, token, r.URL.Path)
	if d.status == http.StatusInternalServerError {
		return d.status, d.why
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCached {
		for k, old := range a.cache {
			if a.now().Sub(old.at) >= cacheTTL {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= maxCached {
			clear(a.cache)
		}
	}
	a.cache[key] = d
	return d.status, d.why
}

func (a *authorizer) decide(ctx context.Context, token, path string) decision {
	d := decision{at: a.now()}
	user, ok, err := a.reviews.User(ctx, token)
	switch {
	case err != nil:
		d.status, d.why = http.StatusInternalServerError, fmt.Sprintf("authenticating the token: %v", err)
	case !ok:
		d.status, d.why = http.StatusUnauthorized, "Unauthorized: the token is not valid"
	default:
		allowed, err := a.reviews.Allowed(ctx, user, path)
		switch {
		case err != nil:
			d.status, d.why = http.StatusInternalServerError, fmt.Sprintf("authorizing %s: %v", user.Username, err)
		case !allowed:
			d.status, d.why = http.StatusForbidden, fmt.Sprintf("Forbidden: %s may not get %s", user.Username, path)
		default:
			d.status = http.StatusOK
		}
	}
	return d
}
