package dlq_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The credentials every test proxy below asks for.
const proxyUser, proxyPassword = "ops", "s3cret"

// TestPeekThroughAProxyReadsAKeyWithControlCharacters runs against the embedded broker only:
// it needs proxies and a CA of the test's own. The connection that cleans an answer's head
// must sit above every protocol between the Admin and the broker: TLS to the broker, TLS to
// an https proxy, a CONNECT tunnel, SOCKS5, and a TLS dialer of the caller's. With it
// anywhere below, the peek answer reaches net/http as the broker wrote it and is refused,
// and a SOCKS5 proxy's binary answers are mangled. Each proxy asks for credentials, which the
// Admin sends from the proxy URL's user info.
func TestPeekThroughAProxyReadsAKeyWithControlCharacters(t *testing.T) {
	t.Parallel()
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	tg := brokertest.Embedded(t, pulsartest.WithAdminTLS("localhost:0", pki.ServerConfig()))
	f := newFixture(t, tg)
	writeAnEscapedKey(t, f)
	trust := &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
	for _, tc := range []struct{ name, admin, way string }{
		{"https admin, the caller's TLS dialer", tg.Broker.AdminTLSURL(), "own TLS dialer"},
		{"http admin, http proxy", tg.Broker.AdminURL(), "http"},
		{"https admin, http proxy", tg.Broker.AdminTLSURL(), "http"},
		{"http admin, https proxy", tg.Broker.AdminURL(), "https"},
		{"https admin, https proxy", tg.Broker.AdminTLSURL(), "https"},
		{"http admin, SOCKS5 proxy", tg.Broker.AdminURL(), "socks5"},
		{"https admin, SOCKS5 proxy", tg.Broker.AdminTLSURL(), "socks5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *testProxy
			switch tc.way {
			case "own TLS dialer":
				p = &testProxy{}
			case "http":
				p = startHTTPProxy(t, nil)
			case "https":
				p = startHTTPProxy(t, pki.ServerConfig())
			case "socks5":
				p = startSOCKS5(t)
			}
			peekTheEscapedKey(t, f, proxiedAdmin(t, tc.admin, trust, func(tr *http.Transport) {
				if p.url != nil {
					tr.Proxy = http.ProxyURL(p.url)
					return
				}
				tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					p.used.Add(1)
					d := tls.Dialer{Config: trust}
					return d.DialContext(ctx, network, addr)
				}
			}))
			assert.Positive(t, p.used.Load(), "the connections went the configured way")
		})
	}
}

// TestAProxyRefusingTheCredentialsFailsThePeek: a proxy's refusal is the Admin's error, and
// the error does not show the password.
func TestAProxyRefusingTheCredentialsFailsThePeek(t *testing.T) {
	t.Parallel()
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	tg := brokertest.Embedded(t, pulsartest.WithAdminTLS("localhost:0", pki.ServerConfig()))
	f := newFixture(t, tg)
	f.ensure(t)
	trust := &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
	for _, tc := range []struct {
		name  string
		proxy *testProxy
		want  string
	}{
		{"CONNECT", startHTTPProxy(t, nil), "407 Proxy Authentication Required"},
		{"SOCKS5", startSOCKS5(t), "username/password authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrong := *tc.proxy.url
			wrong.User = url.UserPassword(proxyUser, "wrong-password")
			a := proxiedAdmin(t, tg.Broker.AdminTLSURL(), trust, func(tr *http.Transport) { tr.Proxy = http.ProxyURL(&wrong) })
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
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	tg := brokertest.Embedded(t, pulsartest.WithAdminTLS("localhost:0", pki.ServerConfig()))
	f := newFixture(t, tg)
	f.ensure(t)
	trust := &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
	p := startHTTPProxy(t, nil)
	peek := func(t *testing.T, configure func(*http.Transport)) error {
		t.Helper()
		a := proxiedAdmin(t, tg.Broker.AdminTLSURL(), trust, func(tr *http.Transport) {
			tr.Proxy = http.ProxyURL(p.url)
			configure(tr)
		})
		_, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: f.dlq})
		return err
	}

	var answered atomic.Int64
	require.NoError(t, peek(t, func(tr *http.Transport) {
		tr.ProxyConnectHeader = http.Header{"X-Tenant": {"fixed"}}
		tr.OnProxyConnectResponse = func(_ context.Context, u *url.URL, req *http.Request, res *http.Response) error {
			if u.Host == p.url.Host && req.Method == http.MethodConnect && res.StatusCode == http.StatusOK {
				answered.Add(1)
			}
			return nil
		}
	}))
	assert.Equal(t, "fixed", p.tenant.Load())
	assert.Positive(t, answered.Load(), "OnProxyConnectResponse saw the proxy's answer")

	require.NoError(t, peek(t, func(tr *http.Transport) {
		tr.ProxyConnectHeader = http.Header{"X-Tenant": {"fixed"}}
		tr.GetProxyConnectHeader = func(_ context.Context, _ *url.URL, target string) (http.Header, error) {
			return http.Header{"X-Tenant": {"for " + target}}, nil
		}
	}))
	admin, err := url.Parse(tg.Broker.AdminTLSURL())
	require.NoError(t, err)
	assert.Equal(t, "for "+admin.Host, p.tenant.Load())

	err = peek(t, func(tr *http.Transport) {
		tr.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error {
			return errors.New("refused by policy")
		}
	})
	require.ErrorContains(t, err, "refused by policy")

	err = peek(t, func(tr *http.Transport) { tr.Proxy = http.ProxyURL(&url.URL{Scheme: "ftp", Host: p.url.Host}) })
	require.ErrorContains(t, err, `the scheme "ftp" is not http, https, socks5 or socks5h`)
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

// testProxy is a proxy of a test: its URL, with [proxyUser]'s credentials, and how many
// connections it carried (a proxy without a URL counts a test's own dials).
type testProxy struct {
	url    *url.URL
	used   atomic.Int64
	wg     sync.WaitGroup
	tenant atomic.Value // the X-Tenant header of the last request, a string
}

// startHTTPProxy starts an HTTP proxy, over TLS with cfg when it is not nil: it opens CONNECT
// tunnels and forwards other requests, bytes as they are both ways, for the right
// Proxy-Authorization only.
func startHTTPProxy(t *testing.T, cfg *tls.Config) *testProxy {
	t.Helper()
	p := &testProxy{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+proxyPassword))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != want {
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		target, err := net.Dial("tcp", r.Host)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = target.Close()
			return
		}
		p.wg.Add(1)
		defer p.wg.Done()
		p.used.Add(1)
		p.tenant.Store(r.Header.Get("X-Tenant"))
		if r.Method == http.MethodConnect {
			_, err = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		} else {
			r.Header.Del("Proxy-Authorization")
			err = r.Write(target)
		}
		if err == nil {
			relay(c, brw.Reader, target)
		}
		_ = c.Close()
		_ = target.Close()
	}))
	if cfg != nil {
		srv.TLS = cfg
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.Close()
		p.wg.Wait()
	})
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	u.User = url.UserPassword(proxyUser, proxyPassword)
	p.url = u
	return p
}

// startSOCKS5 starts a SOCKS5 proxy (RFC 1928) that connects to the address asked for, for
// [proxyUser]'s username and password (RFC 1929) only.
func startSOCKS5(t *testing.T) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &testProxy{url: &url.URL{Scheme: "socks5", Host: ln.Addr().String(), User: url.UserPassword(proxyUser, proxyPassword)}}
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() {
				defer func() { _ = c.Close() }()
				p.socks(c)
			})
		}
	})
	return p
}

// socks serves one SOCKS5 client on c; any error ends it.
func (p *testProxy) socks(c net.Conn) {
	r := bufio.NewReader(c)
	field := func(n int) []byte { // n bytes, or nil at an error
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil
		}
		return b
	}
	short := func() []byte { // a length byte and that many bytes
		n := field(1)
		if n == nil {
			return nil
		}
		return field(int(n[0]))
	}
	if greeting := field(2); greeting == nil || greeting[0] != 5 || field(int(greeting[1])) == nil {
		return
	}
	if _, err := c.Write([]byte{5, 2}); err != nil { // username and password
		return
	}
	if ver := field(1); ver == nil || ver[0] != 1 {
		return
	}
	user, password := short(), short()
	if string(user) != proxyUser || string(password) != proxyPassword {
		_, _ = c.Write([]byte{1, 1})
		return
	}
	if _, err := c.Write([]byte{1, 0}); err != nil {
		return
	}
	req := field(4) // version, command, reserved, address type
	if req == nil || req[1] != 1 {
		return
	}
	var host string
	switch req[3] {
	case 1:
		host = net.IP(field(4)).String()
	case 3:
		host = string(short())
	case 4:
		host = net.IP(field(16)).String()
	}
	port := field(2)
	if port == nil {
		return
	}
	target, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port)))))
	if err != nil {
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer func() { _ = target.Close() }()
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	p.used.Add(1)
	relay(c, r, target)
}

// relay copies client (read through in, which may hold bytes already read) to target and
// target to client until either side ends, then closes both.
func relay(client net.Conn, in io.Reader, target net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(target, in)
		_ = target.Close()
		_ = client.Close()
	})
	_, _ = io.Copy(client, target)
	_ = client.Close()
	_ = target.Close()
	wg.Wait()
}
