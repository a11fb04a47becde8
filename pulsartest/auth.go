package pulsartest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Auth configures authentication and authorization like a Pulsar broker with authenticationEnabled and
// authorizationEnabled. It is for tests of clients' credentials, not security: secrets live in memory and
// the checks are the subset clients exercise.
type Auth struct {
	// TokenSecret is the HMAC-SHA256 key of JWT tokens (auth method "token", HTTP "Bearer"); the principal is
	// the token's "sub" claim and an "exp" claim in the past fails. Nil: tokens are not accepted.
	TokenSecret []byte
	// Basic maps user names to passwords (auth method "basic", HTTP "Basic"); the principal is the user.
	Basic map[string]string
	// TLS accepts client certificates on the TLS listeners (auth method "tls"); the principal is the
	// certificate's common name. The tls.Config must request and verify them (ClientCAs, ClientAuth).
	TLS bool
	// Anonymous is the role of a client without credentials; "" refuses such clients.
	Anonymous string
	// SuperUsers may use every namespace.
	SuperUsers []string
	// Grants lists, per namespace ("tenant/namespace"), the roles that may produce and consume there.
	// A namespace not listed is open to every authenticated role.
	Grants map[string][]string
}

// WithAuth turns on authentication and authorization. CONNECT with credentials that do not verify is
// answered ERROR(AuthenticationError) and the connection closed; LOOKUP, PARTITIONED_METADATA, PRODUCER
// and SUBSCRIBE on a namespace the role may not use fail with AuthorizationError. The admin subset answers
// 401 and 403 likewise. It replaces WithAuthToken. Default: off (any credentials are accepted).
func WithAuth(a Auth) Option { return func(o *options) { o.auth = &a } }

// ErrAuthentication is the cause of a refused CONNECT or HTTP request.
var ErrAuthentication = errors.New("pulsartest: authentication failed")

// authenticate returns the role of the given credentials. cs is the TLS state of the connection, if any.
func (a *Auth) authenticate(method string, data []byte, cs *tls.ConnectionState) (string, error) {
	switch method {
	case "":
		if a.Anonymous == "" {
			return "", fmt.Errorf("%w: no credentials and no anonymous role", ErrAuthentication)
		}
		return a.Anonymous, nil
	case "token":
		if a.TokenSecret == nil {
			return "", fmt.Errorf("%w: token authentication is not enabled", ErrAuthentication)
		}
		return verifyJWT(strings.TrimSpace(strings.TrimPrefix(string(data), "token:")), a.TokenSecret, time.Now())
	case "basic":
		user, pass, ok := strings.Cut(string(data), ":")
		want, known := a.Basic[user]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
			return "", fmt.Errorf("%w: unknown user or wrong password", ErrAuthentication)
		}
		return user, nil
	case "tls":
		if !a.TLS || cs == nil || len(cs.PeerCertificates) == 0 {
			return "", fmt.Errorf("%w: no verified client certificate", ErrAuthentication)
		}
		return cs.PeerCertificates[0].Subject.CommonName, nil
	default:
		return "", fmt.Errorf("%w: auth method %q is not supported", ErrAuthentication, method)
	}
}

// authorized reports whether role may use namespace ns.
func (a *Auth) authorized(role, ns string) bool {
	if slices.Contains(a.SuperUsers, role) {
		return true
	}
	roles, listed := a.Grants[ns]
	return !listed || slices.Contains(roles, role)
}

// verifyJWT checks an HS256 JSON Web Token and returns its subject.
func verifyJWT(tok string, key []byte, now time.Time) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("%w: malformed token", ErrAuthentication)
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err := decodeJWTPart(parts[0], &hdr); err != nil || hdr.Alg != "HS256" {
		return "", fmt.Errorf("%w: token header (want alg HS256)", ErrAuthentication)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
	if err != nil {
		return "", fmt.Errorf("%w: token signature encoding", ErrAuthentication)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return "", fmt.Errorf("%w: token signature", ErrAuthentication)
	}
	var claims struct {
		Sub string `json:"sub"`
		Exp *int64 `json:"exp"`
	}
	if err := decodeJWTPart(parts[1], &claims); err != nil || claims.Sub == "" {
		return "", fmt.Errorf("%w: token claims (want a sub)", ErrAuthentication)
	}
	if claims.Exp != nil && now.Unix() >= *claims.Exp {
		return "", fmt.Errorf("%w: token expired", ErrAuthentication)
	}
	return claims.Sub, nil
}

func decodeJWTPart(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return fmt.Errorf("jwt part: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("jwt part: %w", err)
	}
	return nil
}

// connState returns the TLS state of a TLS connection.
func (c *conn) connState() *tls.ConnectionState {
	if tc, ok := c.nc.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		return &cs
	}
	return nil
}

// mayUse checks the connection's role against the namespace of topic fq (true without WithAuth).
func (c *conn) mayUse(fq string) bool {
	a := c.b.opts.auth
	return a == nil || a.authorized(c.role, namespaceOf(fq))
}

// httpAuth wraps the admin handler with authentication and namespace authorization.
func (a *adminServer) httpAuth(next http.Handler) http.Handler {
	auth := a.b.opts.auth
	if auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, data := "", []byte(nil)
		h := r.Header.Get("Authorization")
		switch {
		case strings.HasPrefix(h, "Bearer "):
			method, data = "token", []byte(strings.TrimPrefix(h, "Bearer "))
		case strings.HasPrefix(h, "Basic "):
			dec, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
			if err != nil {
				writeReason(w, http.StatusUnauthorized, "Authentication required")
				return
			}
			method, data = "basic", dec
		case r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && auth.TLS:
			method = "tls"
		}
		role, err := auth.authenticate(method, data, r.TLS)
		if err != nil {
			writeReason(w, http.StatusUnauthorized, "Authentication required")
			return
		}
		if ns := requestNamespace(r.URL.Path); ns != "" && !auth.authorized(role, ns) {
			writeReason(w, http.StatusForbidden, "Don't have permission to administrate resources on this tenant")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestNamespace extracts tenant/namespace from the admin and lookup paths that name one.
func requestNamespace(path string) string {
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(p) >= 6 && p[0] == "lookup" && p[1] == "v2": // lookup/v2/topic/{domain}/{tenant}/{ns}/…
		return p[4] + "/" + p[5]
	case len(p) >= 5 && p[0] == "admin" && p[1] == "v2" &&
		(p[2] == "persistent" || p[2] == "non-persistent" || p[2] == "namespaces" || p[2] == "schemas"):
		return p[3] + "/" + p[4]
	}
	return ""
}
