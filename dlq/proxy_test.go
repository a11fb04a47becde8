package dlq_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestPeekThroughAProxyReadsAKeyWithControlCharacters runs against the embedded broker only:
// it needs proxies and a CA of the test's own. The connection that cleans an answer's head
// must sit above every protocol between the Admin and the broker: TLS to the broker, TLS to
// an https proxy, a CONNECT tunnel, SOCKS5, and a TLS dialer of the caller's. With it
// anywhere below, the peek answer reaches net/http as the broker wrote it and is refused,
// and a SOCKS5 proxy's binary answers are mangled. Each proxy asks for credentials, which the
// Admin sends from the proxy URL's user info. The caller's TLS dialer makes the TLS to the
// broker, or to an https proxy; the tunnel to an http proxy is plain even with it, and the
// TLS to the broker runs inside the tunnel, as net/http's own.
func TestPeekThroughAProxyReadsAKeyWithControlCharacters(t *testing.T) {
	t.Parallel()
	f, pki := tlsAdminFixture(t)
	writeAnEscapedKey(t, f)
	trust := pki.trust()
	for _, tc := range []struct {
		name, admin, way string
		ownTLS           bool // the transport has a TLS dialer of the caller's
	}{
		{"https admin, the caller's TLS dialer", f.b.AdminTLSURL(), "", true},
		{"http admin, http proxy", f.b.AdminURL(), "http", false},
		{"https admin, http proxy", f.b.AdminTLSURL(), "http", false},
		{"https admin, http proxy, the caller's TLS dialer", f.b.AdminTLSURL(), "http", true},
		{"http admin, https proxy", f.b.AdminURL(), "https", false},
		{"https admin, https proxy", f.b.AdminTLSURL(), "https", false},
		{"https admin, https proxy, the caller's TLS dialer", f.b.AdminTLSURL(), "https", true},
		{"http admin, SOCKS5 proxy", f.b.AdminURL(), "socks5", false},
		{"https admin, SOCKS5 proxy", f.b.AdminTLSURL(), "socks5", false},
		{"http admin, SOCKS5 proxy resolving names", f.b.AdminURL(), "socks5h", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *brokertest.Proxy
			switch tc.way {
			case "http":
				p = brokertest.StartHTTPProxy(t, nil)
			case "https":
				p = brokertest.StartHTTPProxy(t, pki.ServerConfig())
			case "socks5", "socks5h":
				p = brokertest.StartSOCKS5(t)
				p.URL.Scheme = tc.way
			}
			var dialedTLS atomic.Int64
			peekTheEscapedKey(t, f, proxiedAdmin(t, tc.admin, trust, func(tr *http.Transport) {
				if p != nil {
					tr.Proxy = http.ProxyURL(p.URL)
				}
				if tc.ownTLS {
					tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
						dialedTLS.Add(1)
						d := tls.Dialer{Config: trust}
						return d.DialContext(ctx, network, addr)
					}
				}
			}))
			if p != nil {
				assert.Positive(t, p.Used.Load(), "the connections went through the proxy")
			}
			if tc.ownTLS && tc.way != "http" {
				assert.Positive(t, dialedTLS.Load(), "the caller's TLS dialer made the TLS")
			}
		})
	}
}

// TestTheAdminDialsWithTheTransportsDialer: the Admin's own connections go through the
// transport's DialContext, and a transport without one dials as net/http does.
func TestTheAdminDialsWithTheTransportsDialer(t *testing.T) {
	t.Parallel()
	f := embeddedFixture(t)
	f.ensure(t)
	var dialed atomic.Int64
	for name, dial := range map[string]func(context.Context, string, string) (net.Conn, error){
		"the transport's": func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialed.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		"none": nil,
	} {
		a := proxiedAdmin(t, f.adminURL, nil, func(tr *http.Transport) { tr.DialContext = dial })
		_, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: f.dlq})
		require.NoError(t, err, name)
	}
	assert.Positive(t, dialed.Load(), "the transport's DialContext made the connections")
}

// TestAProxyRefusingTheCredentialsFailsThePeek: a proxy's refusal is the Admin's error, and
// the error does not show the password.
func TestAProxyRefusingTheCredentialsFailsThePeek(t *testing.T) {
	t.Parallel()
	f, pki := tlsAdminFixture(t)
	f.ensure(t)
	trust := pki.trust()
	for _, tc := range []struct {
		name  string
		proxy *brokertest.Proxy
		want  string
	}{
		{"CONNECT", brokertest.StartHTTPProxy(t, nil), "407 Proxy Authentication Required"},
		{"SOCKS5", brokertest.StartSOCKS5(t), "username/password authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrong := *tc.proxy.URL
			wrong.User = url.UserPassword(brokertest.ProxyUser, "wrong-password")
			a := proxiedAdmin(t, f.b.AdminTLSURL(), trust, func(tr *http.Transport) { tr.Proxy = http.ProxyURL(&wrong) })
			_, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: f.dlq})
			require.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "wrong-password")
		})
	}
}

// TestATunnelTakesTheTransportsProxySettings: the CONNECT the Admin sends itself carries the
// transport's proxy headers (GetProxyConnectHeader before ProxyConnectHeader) and shows the
// proxy's answer to OnProxyConnectResponse, as net/http's own would; a proxy scheme it
// cannot speak is an error that names it.
func TestATunnelTakesTheTransportsProxySettings(t *testing.T) {
	t.Parallel()
	f, pki := tlsAdminFixture(t)
	f.ensure(t)
	trust := pki.trust()
	p := brokertest.StartHTTPProxy(t, nil)
	peek := func(t *testing.T, configure func(*http.Transport)) error {
		t.Helper()
		a := proxiedAdmin(t, f.b.AdminTLSURL(), trust, func(tr *http.Transport) {
			tr.Proxy = http.ProxyURL(p.URL)
			configure(tr)
		})
		_, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: f.dlq})
		return err
	}

	var answered atomic.Int64
	require.NoError(t, peek(t, func(tr *http.Transport) {
		tr.ProxyConnectHeader = http.Header{"X-Tenant": {"fixed"}}
		tr.OnProxyConnectResponse = func(_ context.Context, u *url.URL, req *http.Request, res *http.Response) error {
			if u.Host == p.URL.Host && req.Method == http.MethodConnect && res.StatusCode == http.StatusOK {
				answered.Add(1)
			}
			return nil
		}
	}))
	assert.Equal(t, "fixed", p.Tenant.Load())
	assert.Positive(t, answered.Load(), "OnProxyConnectResponse saw the proxy's answer")

	require.NoError(t, peek(t, func(tr *http.Transport) {
		tr.ProxyConnectHeader = http.Header{"X-Tenant": {"fixed"}}
		tr.GetProxyConnectHeader = func(_ context.Context, _ *url.URL, target string) (http.Header, error) {
			return http.Header{"X-Tenant": {"for " + target}}, nil
		}
	}))
	admin, err := url.Parse(f.b.AdminTLSURL())
	require.NoError(t, err)
	assert.Equal(t, "for "+admin.Host, p.Tenant.Load())

	err = peek(t, func(tr *http.Transport) {
		tr.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error {
			return errors.New("refused by policy")
		}
	})
	require.ErrorContains(t, err, "refused by policy")

	err = peek(t, func(tr *http.Transport) { tr.Proxy = http.ProxyURL(&url.URL{Scheme: "ftp", Host: p.URL.Host}) })
	require.ErrorContains(t, err, `the scheme "ftp" is not http, https, socks5 or socks5h`)
}

// testPKI is the CA and the broker certificate of a fixture's HTTPS admin API.
type testPKI struct{ *pulsartest.TestPKI }

// trust returns a TLS configuration that trusts the CA.
func (p testPKI) trust() *tls.Config {
	return &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
}

// tlsAdminFixture is a fixture on an embedded broker whose admin API also answers over
// HTTPS (f.b.AdminTLSURL), with a CA of the test's own.
func tlsAdminFixture(t *testing.T) (*fixture, testPKI) {
	t.Helper()
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	tg := brokertest.Embedded(t, pulsartest.WithAdminTLS("localhost:0", pki.ServerConfig()))
	return newFixture(t, tg), testPKI{pki}
}

// proxiedAdmin is an Admin of adminURL whose transport trusts trust and is then configured.
func proxiedAdmin(t *testing.T, adminURL string, trust *tls.Config, configure func(*http.Transport)) *dlq.Admin {
	t.Helper()
	base, ok := brokertest.HTTPClient(t).Transport.(*http.Transport)
	require.True(t, ok)
	tr := base.Clone()
	tr.TLSClientConfig = trust.Clone() // its own: cloning a transport sets NextProtos on it
	configure(tr)
	a, err := dlq.NewAdmin(adminURL, dlq.WithHTTPClient(&http.Client{Transport: tr}))
	require.NoError(t, err)
	return a
}
