package plane

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Token is what a plane's static bearer token says of itself: its subject and when it expires.
// It is read without verifying the signature (the API server does that), so it only ever
// informs (the expiry metric, preflight, an unreachable plane's reason), never decides access.
type Token struct {
	// Subject is the token's sub claim (a service account's system:serviceaccount:NS:NAME).
	Subject string
	// Expiry is its exp claim; zero when it has none.
	Expiry time.Time
	// Legacy is a token Secret's token (issuer kubernetes/serviceaccount): it never expires and
	// lives as long as its Secret.
	Legacy bool
}

// legacyIssuer is the iss claim of the tokens the token controller writes into Secrets of type
// kubernetes.io/service-account-token (bound tokens carry the API server's
// --service-account-issuer instead).
const legacyIssuer = "kubernetes/serviceaccount"

// RenewWithin is how long before its expiry a plane's token counts as due for rotation: the
// FedbrDataPlaneTokenExpiring alert's and preflight's margin.
const RenewWithin = 7 * 24 * time.Hour

// ErrTokenExpired is the reason of a plane whose kubeconfig token has expired.
var ErrTokenExpired = errors.New("the token of this plane's context has expired: mint a new one (kubectl -n fedbr-system create token fedbr-manager-remote --duration=720h in that cluster) and update the data planes' kubeconfig Secret (docs/install.md, rotating the manager's tokens)")

// ErrLegacyToken is preflight's reason for a context whose token never expires.
var ErrLegacyToken = errors.New("a token Secret's token, which never expires: mint a bound token instead (kubectl create token) and delete the Secret (docs/install.md)")

// ParseToken reads a bearer token's claims; ok is false for a token that is not a JWT (an
// opaque token of another authenticator), of which nothing is known.
func ParseToken(bearer string) (t Token, ok bool) {
	parts := strings.Split(bearer, ".")
	if len(parts) != 3 {
		return Token{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return Token{}, false
	}
	var claims struct {
		Iss string   `json:"iss"`
		Sub string   `json:"sub"`
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return Token{}, false
	}
	t = Token{Subject: claims.Sub, Legacy: claims.Iss == legacyIssuer && claims.Exp == nil}
	if claims.Exp != nil {
		t.Expiry = time.Unix(int64(*claims.Exp), 0).UTC()
	}
	return t, true
}

// ContextToken is the token of context name's user in raw, if it has a static token.
func ContextToken(raw *clientcmdapi.Config, name string) (Token, bool) {
	c := raw.Contexts[name]
	if c == nil {
		return Token{}, false
	}
	u := raw.AuthInfos[c.AuthInfo]
	if u == nil || u.Token == "" {
		return Token{}, false
	}
	return ParseToken(u.Token)
}

// Check judges a token at now as preflight does: expired (ErrTokenExpired), due within
// RenewWithin, or never expiring (ErrLegacyToken) fail; a token without an expiry of another
// issuer passes (nothing is known of it).
func (t Token) Check(now time.Time) error {
	switch {
	case t.Legacy:
		return ErrLegacyToken
	case t.Expiry.IsZero():
		return nil
	case !now.Before(t.Expiry):
		return fmt.Errorf("expired at %s: %w", t.Expiry.Format(time.RFC3339), ErrTokenExpired)
	case t.Expiry.Sub(now) < RenewWithin:
		return fmt.Errorf("expires at %s, in %s, under 7 days: rotate it now (docs/install.md, rotating the manager's tokens)",
			t.Expiry.Format(time.RFC3339), t.Expiry.Sub(now).Round(time.Minute))
	}
	return nil
}

// expired says whether the token is known to have expired at now.
func (t Token) expired(now time.Time) bool {
	return !t.Expiry.IsZero() && !now.Before(t.Expiry)
}
