package awsdouble

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/lab/labtls"
)

// AssumeRoleWithWebIdentity: the exchange IRSA makes. A pod whose service account names a role
// (eks.amazonaws.com/role-arn) gets AWS_ROLE_ARN and a projected service-account token for
// audience sts.amazonaws.com (AWS_WEB_IDENTITY_TOKEN_FILE); the SDK's web-identity provider
// posts that token, unsigned, to STS, which checks it and the role's trust and answers
// temporary credentials. The double checks what fedbr's side of the exchange decides (the
// role, the session name, the duration) as STS documents them, and the token's claims as the
// role's trust policy would: the audience, the expiry and the subject
// (system:serviceaccount:NAMESPACE:NAME) against Options.WebIdentityRoles. It does not check the
// token's signature against the issuer's keys: the lab's API servers sign it and nothing of
// fedbr's makes it.
//
// The exchange goes where the SDK's default endpoint resolution sends it, https://sts.REGION.
// amazonaws.com: a lab pod reaches it through the double as its HTTPS proxy (CONNECT, served
// only for STS hosts), with TLS from the lab's egress CA (EgressCAFile), as a real pod reaches
// the real STS through DNS and a public CA. So whatever a pod's own configuration could do to
// that endpoint (a shared config file's endpoint_url) outranks the lab's route, as it would
// outrank the real one.

const (
	// webIdentityAction is the STS action of IRSA's exchange.
	webIdentityAction = "AssumeRoleWithWebIdentity"
	// WebIdentityAudience is the audience IRSA's token carries and STS requires.
	WebIdentityAudience = "sts.amazonaws.com"
	// egressDir holds the egress TLS material under the double's data directory.
	egressDir = "egress-tls"
)

// EgressCAFile is the CA certificate (PEM) of the double's STS host names in the double's data
// directory dir: what a lab pod trusts (SSL_CERT_FILE) to reach STS through the double.
func EgressCAFile(dir string) string { return filepath.Join(dir, egressDir, labtls.CAFile) }

// roleSessionRE is STS's RoleSessionName constraint, 2 to 64 of [\w+=,.@-].
var roleSessionRE = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

type xmlWebIdentity struct {
	XMLName xml.Name `xml:"AssumeRoleWithWebIdentityResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		Subject     string `xml:"SubjectFromWebIdentityToken"`
		Audience    string `xml:"Audience"`
		Provider    string `xml:"Provider"`
		AssumedRole struct {
			Arn string `xml:"Arn"`
			ID  string `xml:"AssumedRoleId"`
		} `xml:"AssumedRoleUser"`
		Credentials struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
			Expiration      string `xml:"Expiration"`
		} `xml:"Credentials"`
	} `xml:"AssumeRoleWithWebIdentityResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// serveWebIdentity answers one AssumeRoleWithWebIdentity.
func (s *Server) serveWebIdentity(w http.ResponseWriter, r *http.Request) {
	s.received(webIdentityAction)
	out, e := s.assumeRoleWithWebIdentity(r)
	if e != nil {
		s.count(webIdentityAction, e.Code)
		writeSTSError(w, r, e)
		return
	}
	s.count(webIdentityAction, "")
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(out)
}

func (s *Server) assumeRoleWithWebIdentity(r *http.Request) (*xmlWebIdentity, *apiError) {
	if err := r.ParseForm(); err != nil {
		return nil, errf(400, "MalformedQueryString", "%v", err)
	}
	f := r.PostForm
	if v := f.Get("Version"); v != stsVersion {
		return nil, errf(400, "InvalidAction", "could not find operation %s for version %q", webIdentityAction, v)
	}
	roleARN, session, token := f.Get("RoleArn"), f.Get("RoleSessionName"), f.Get("WebIdentityToken")
	switch {
	case len(roleARN) < 20 || len(roleARN) > 2048:
		return nil, errf(400, "ValidationError", "1 validation error detected: Value at 'roleArn' failed to satisfy constraint: Member must have length between 20 and 2048")
	case !roleSessionRE.MatchString(session):
		return nil, errf(400, "ValidationError", "1 validation error detected: Value %q at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]* and length between 2 and 64", session)
	case len(token) < 4 || len(token) > 20000:
		return nil, errf(400, "ValidationError", "1 validation error detected: Value at 'webIdentityToken' failed to satisfy constraint: Member must have length between 4 and 20000")
	}
	duration := time.Hour
	if d := f.Get("DurationSeconds"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 900 || n > 43200 {
			return nil, errf(400, "ValidationError", "1 validation error detected: Value %q at 'durationSeconds' failed to satisfy constraint: Member must have value between 900 and 43200", d)
		}
		duration = time.Duration(n) * time.Second
	}
	claims, e := tokenClaims(token, time.Now())
	if e != nil {
		return nil, e
	}
	prefix := "arn:aws:iam::" + s.opts.AccountID + ":role/"
	name, ok := strings.CutPrefix(roleARN, prefix)
	subjects, known := s.opts.WebIdentityRoles[name]
	if !ok || !known || !trusts(subjects, claims.Subject) {
		// STS says no more than this, whether the role is missing or its trust refuses.
		return nil, errf(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
	}
	out := &xmlWebIdentity{Xmlns: stsNamespace, RequestID: requestID()}
	res := &out.Result
	res.Subject, res.Audience, res.Provider = claims.Subject, WebIdentityAudience, claims.Issuer
	res.AssumedRole.Arn = "arn:aws:sts::" + s.opts.AccountID + ":assumed-role/" + name + "/" + session
	res.AssumedRole.ID = "AROA" + strings.ToUpper(randomHex(17)) + ":" + session
	res.Credentials.AccessKeyID = "ASIA" + strings.ToUpper(randomHex(16))
	res.Credentials.SecretAccessKey = randomHex(40)
	res.Credentials.SessionToken = base64.StdEncoding.EncodeToString([]byte(randomHex(32)))
	res.Credentials.Expiration = time.Now().Add(duration).UTC().Format(time.RFC3339)
	return out, nil
}

// webIdentityClaims are the claims of a projected service-account token STS reads.
type webIdentityClaims struct {
	Issuer    string          `json:"iss"`
	Subject   string          `json:"sub"`
	Audience  json.RawMessage `json:"aud"`
	Expiry    int64           `json:"exp"`
	NotBefore int64           `json:"nbf"`
}

// tokenClaims decodes a JWT's claims and checks them as STS does for an OIDC token: issuer and
// subject present, the audience sts.amazonaws.com, not expired, already valid.
func tokenClaims(token string, now time.Time) (*webIdentityClaims, *apiError) {
	invalid := func(why string) *apiError {
		return errf(400, "InvalidIdentityToken", "The web identity token that was passed could not be validated by AWS (%s).", why)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalid("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, invalid("claims are not base64url")
	}
	var c webIdentityClaims
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, invalid("claims are not JSON")
	}
	var auds []string
	if err := json.Unmarshal(c.Audience, &auds); err != nil {
		var one string
		if json.Unmarshal(c.Audience, &one) != nil {
			return nil, invalid("no audience")
		}
		auds = []string{one}
	}
	switch {
	case c.Issuer == "" || c.Subject == "":
		return nil, invalid("no issuer or subject")
	case !slices.Contains(auds, WebIdentityAudience):
		return nil, errf(400, "InvalidIdentityToken", "Incorrect token audience %v", auds)
	case c.Expiry == 0 || !now.Before(time.Unix(c.Expiry, 0)):
		return nil, errf(400, "ExpiredTokenException", "Token expired: current date/time %s must be before the expiration date/time %s",
			now.UTC().Format(time.RFC3339), time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	case c.NotBefore != 0 && now.Add(5*time.Minute).Before(time.Unix(c.NotBefore, 0)):
		return nil, invalid("not valid yet")
	}
	return &c, nil
}

// trusts says whether a role trusting subjects (globs as a trust policy's StringLike on
// ISSUER:sub) lets subject assume it.
func trusts(subjects []string, subject string) bool {
	for _, g := range subjects {
		if ok, _ := path.Match(g, subject); ok {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// egressTLS makes the egress CA (EgressCAFile) and the STS hosts' certificate in the data
// directory dir, a new CA each time the double starts.
func egressTLS(dir, region string) (*tls.Config, error) {
	set, err := labtls.New(filepath.Join(dir, egressDir), "sts.amazonaws.com", "sts."+region+".amazonaws.com")
	if err != nil {
		return nil, fmt.Errorf("egress TLS: %w", err)
	}
	// Every pod trusts it, whatever user it runs as: a CA certificate is public.
	if err := os.Chmod(EgressCAFile(dir), 0o644); err != nil {
		return nil, fmt.Errorf("egress TLS: %w", err)
	}
	cfg := set.Node()
	cfg.NextProtos = []string{"http/1.1"}
	// STS asks no client certificate.
	cfg.ClientAuth, cfg.ClientCAs = tls.NoClientCert, nil
	return cfg, nil
}

// serveConnect is the double as an HTTPS proxy: a CONNECT to an STS host on port 443 is
// answered by the double itself, over TLS with the egress CA's certificate; any other host is
// refused, so a pod's traffic reaches nothing else through it.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || port != "443" || !isSTSHost(host) {
		http.Error(w, "the lab's egress reaches STS only (sts[.REGION].amazonaws.com:443), not "+r.Host, http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		return
	}
	tc := tls.Server(&bufferedConn{Conn: conn, r: buf.Reader}, s.egress)
	// One connection's HTTP server: the requests inside the tunnel reach the double's handler
	// with their own Host (the STS host), as at the real endpoint.
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	_ = hs.Serve(&oneConn{conn: tc, done: make(chan struct{})})
}

// bufferedConn reads what the hijacked connection's reader already holds first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConn is a listener that accepts one connection, then blocks until that connection closes.
type oneConn struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = &closeNotify{Conn: l.conn, done: l.done} })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

// closeNotify ends its listener's Accept when the connection closes.
type closeNotify struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}
