package plane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fedbr/fedbr/internal/metrics"
)

// jwt builds an unsigned token with these claims (the parts fedbr reads; nothing verifies the
// signature on this side).
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc(b) + "." + enc([]byte("signature"))
}

func TestParseToken(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	sub := "system:serviceaccount:fedbr-system:fedbr-manager-remote"
	for _, tc := range []struct {
		name    string
		token   string
		ok      bool
		want    Token
		wantErr string // of Check at now; "" passes
	}{
		{name: "bound, 30 days left", ok: true,
			token: jwt(t, map[string]any{"iss": "https://kubernetes.default.svc", "sub": sub, "exp": now.Add(30 * 24 * time.Hour).Unix()}),
			want:  Token{Subject: sub, Expiry: now.Add(30 * 24 * time.Hour)}},
		{name: "bound, 2 days left", ok: true,
			token:   jwt(t, map[string]any{"iss": "https://kubernetes.default.svc", "sub": sub, "exp": now.Add(48 * time.Hour).Unix()}),
			want:    Token{Subject: sub, Expiry: now.Add(48 * time.Hour)},
			wantErr: "expires at 2026-12-08T12:00:00Z, in 48h0m0s, under 7 days: rotate it now"},
		{name: "expired", ok: true,
			token:   jwt(t, map[string]any{"iss": "https://kubernetes.default.svc", "sub": sub, "exp": now.Add(-time.Second).Unix()}),
			want:    Token{Subject: sub, Expiry: now.Add(-time.Second)},
			wantErr: "expired at 2026-12-06T11:59:59Z: the token of this plane's context has expired"},
		{name: "a token Secret's", ok: true,
			token:   jwt(t, map[string]any{"iss": "kubernetes/serviceaccount", "sub": sub, "kubernetes.io/serviceaccount/namespace": "fedbr-system"}),
			want:    Token{Subject: sub, Legacy: true},
			wantErr: "a token Secret's token, which never expires"},
		{name: "another issuer's JWT without expiry", ok: true,
			token: jwt(t, map[string]any{"iss": "https://issuer.example", "sub": "robot"}),
			want:  Token{Subject: "robot"}},
		{name: "an exp in float seconds", ok: true,
			token: jwt(t, map[string]any{"sub": sub, "exp": 1828094400.5}),
			want:  Token{Subject: sub, Expiry: time.Unix(1828094400, 0).UTC()}},
		{name: "opaque", token: "static-token"},
		{name: "payload not base64", token: "a.%%%.c"},
		{name: "payload not JSON", token: "a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c"},
		{name: "exp not a number", token: jwt(t, map[string]any{"exp": "soon"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseToken(tc.token)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseToken = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if !ok {
				return
			}
			err := got.Check(now)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Check: %v; want it to pass", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Check: %v; want %q", err, tc.wantErr)
			}
		})
	}
}

// TestExpiredTokenIsTheReason: a plane whose kubeconfig token has expired is unreachable with
// ErrTokenExpired as its reason, before its cache could sync (it never can) and after every
// refused probe, not a bare 401; a plane with a valid bound token exports its expiry. Both
// API servers refuse every request, as a real one refuses an expired token.
func TestExpiredTokenIsTheReason(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	defer api.Close()
	sub := "system:serviceaccount:fedbr-system:fedbr-manager-remote"
	expiredAt := time.Now().Add(-time.Hour).Truncate(time.Second)
	validTill := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: api.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})}
	for name, exp := range map[string]time.Time{"old": expiredAt, "fresh": validTill} {
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: jwt(t, map[string]any{"iss": "https://kubernetes.default.svc", "sub": sub, "exp": exp.Unix()})}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: "api", AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	s, err := Load(Options{Kubeconfig: path, Scheme: runtime.NewScheme(), Log: logr.Discard(), ProbeInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	old, ok := s.Get("old")
	if !ok || !old.TokenExpiry().Equal(expiredAt) {
		t.Fatalf("plane old: loaded %v, token expiry %v; want %v", ok, old.TokenExpiry(), expiredAt)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	fresh := func() float64 { return testutil.ToFloat64(metrics.PlaneTokenExpiry.WithLabelValues("fresh")) }
	deadline := time.Now().Add(30 * time.Second)
	for (old.LastError() == nil || fresh() == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	err = old.LastError()
	if !errors.Is(err, ErrTokenExpired) || !strings.Contains(err.Error(), `context "old": token of `+sub+" expired at "+expiredAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("plane old's reason %v; want its token's expiry (ErrTokenExpired)", err)
	}
	if old.Reachable() {
		t.Error("plane old is reachable")
	}
	if v := fresh(); v != float64(validTill.Unix()) {
		t.Errorf("fedbr_dataplane_token_expiry_timestamp_seconds{plane=fresh} = %v; want %d", v, validTill.Unix())
	}
}
