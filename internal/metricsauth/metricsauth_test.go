package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
)

// fakeReviews authenticates tokens by name and allows the users in allowed; it counts calls.
type fakeReviews struct {
	users   map[string]string
	allowed map[string]bool
	err     error
	calls   int
}

func (f *fakeReviews) User(_ context.Context, token string) (authnv1.UserInfo, bool, error) {
	f.calls++
	if f.err != nil {
		return authnv1.UserInfo{}, false, f.err
	}
	u, ok := f.users[token]
	return authnv1.UserInfo{Username: u}, ok, nil
}

func (f *fakeReviews) Allowed(_ context.Context, u authnv1.UserInfo, path string) (bool, error) {
	f.calls++
	return f.allowed[u.Username] && path == "/metrics", nil
}

func request(auth string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// TestDecisions: no token 401, a token the API server does not know 401, a user without get on
// /metrics 403, an allowed user 200; an API server error is 500 and not remembered.
func TestDecisions(t *testing.T) {
	f := &fakeReviews{users: map[string]string{"t-prom": "prometheus", "t-dev": "dev"}, allowed: map[string]bool{"prometheus": true}}
	now := time.Unix(1000, 0)
	a := &authorizer{reviews: f, now: func() time.Time { return now }, cache: map[[32]byte]decision{}}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Basic dXNlcjpwdw==", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer t-unknown", http.StatusUnauthorized},
		{"Bearer t-dev", http.StatusForbidden},
		{"Bearer t-prom", http.StatusOK},
	} {
		if got, why := a.allow(context.Background(), request(tc.auth)); got != tc.want {
			t.Errorf("%q: %d (%s), want %d", tc.auth, got, why, tc.want)
		}
	}

	f.err = errors.New("connection refused")
	if got, _ := a.allow(context.Background(), request("Bearer t-new")); got != http.StatusInternalServerError {
		t.Errorf("API server down: %d, want 500", got)
	}
	f.err = nil
	if got, _ := a.allow(context.Background(), request("Bearer t-new")); got != http.StatusUnauthorized {
		t.Errorf("after the API server came back: %d, want 401 (an error is not cached)", got)
	}
}

// TestDecisionsAreCachedForAMinute: a scrape repeated within cacheTTL asks the API server
// nothing; after it, the decision is taken again (a revoked permission then holds).
func TestDecisionsAreCachedForAMinute(t *testing.T) {
	f := &fakeReviews{users: map[string]string{"t-prom": "prometheus"}, allowed: map[string]bool{"prometheus": true}}
	now := time.Unix(1000, 0)
	a := &authorizer{reviews: f, now: func() time.Time { return now }, cache: map[[32]byte]decision{}}
	if got, _ := a.allow(context.Background(), request("Bearer t-prom")); got != http.StatusOK {
		t.Fatalf("first: %d", got)
	}
	calls := f.calls
	now = now.Add(cacheTTL - time.Second)
	if got, _ := a.allow(context.Background(), request("Bearer t-prom")); got != http.StatusOK || f.calls != calls {
		t.Errorf("within the TTL: %d after %d more calls, want 200 from the cache", got, f.calls-calls)
	}
	f.allowed["prometheus"] = false
	now = now.Add(2 * time.Second)
	if got, _ := a.allow(context.Background(), request("Bearer t-prom")); got != http.StatusForbidden {
		t.Errorf("after the TTL with the permission revoked: %d, want 403", got)
	}
}

// TestCacheIsBounded: many tokens never grow the cache past maxCached.
func TestCacheIsBounded(t *testing.T) {
	f := &fakeReviews{users: map[string]string{}}
	now := time.Unix(1000, 0)
	a := &authorizer{reviews: f, now: func() time.Time { return now }, cache: map[[32]byte]decision{}}
	for i := range 3 * maxCached {
		a.allow(context.Background(), request("Bearer t-"+string(rune('a'+i%26))+time.Duration(i).String()))
	}
	if len(a.cache) > maxCached {
		t.Errorf("%d decisions cached, want at most %d", len(a.cache), maxCached)
	}
}

// TestServerOptions: secure serving has the filter; insecure has neither.
func TestServerOptions(t *testing.T) {
	if o := ServerOptions(":8080", true, "/certs"); !o.SecureServing || o.FilterProvider == nil || o.CertDir != "/certs" || o.BindAddress != ":8080" {
		t.Errorf("secure: %+v", o)
	}
	if o := ServerOptions(":8080", false, ""); o.SecureServing || o.FilterProvider != nil {
		t.Errorf("insecure: %+v", o)
	}
}
