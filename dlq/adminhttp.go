package dlq

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/proxy"
)

// Apache Pulsar's admin API answers on Jetty, which writes a header value in ISO-8859-1: a
// character up to U+00FF as one byte, any other (and CR and LF) as a space, and the other
// control characters as they are. "Peek messages" puts a message's key and its properties
// in headers, so a key with a control character (a producer's ESC, say) gives an answer that
// Go's HTTP client refuses whole ("malformed MIME header line"), and every message behind it
// on the subscription could not be looked at. The Admin therefore reads answers through a
// connection that turns those control characters into spaces too, as the broker already
// does with CR and LF, and decodes the values as ISO-8859-1: a peeked key or property keeps
// every character up to U+00FF but the ASCII control characters other than TAB (the C1
// controls, U+0080 to U+009F, are kept); the others are spaces.
// Redrive reads messages over Pulsar's binary protocol and moves them as they are.
//
// That connection must carry the broker's answer as the client reads it: above TLS, and
// past any proxy. net/http does TLS above its dial, and speaks to a SOCKS proxy or opens an
// https tunnel (CONNECT) on the dialed connection, so the Admin's transport does those
// itself (safeDialer), under the cleaning; a proxy that forwards plain http answers is left
// to net/http, since the answer then comes on the dialed connection as it is.

// headerSafeClient returns hc with its transport (http.DefaultTransport when it has none)
// cloned to read through a [headSafeConn], with keep-alives off so that each connection
// carries one answer whose head is the first bytes read. A client whose transport is not
// an *http.Transport is returned as it is: its connections are its own.
func headerSafeClient(hc *http.Client) *http.Client {
	var t *http.Transport
	switch rt := hc.Transport.(type) {
	case nil:
		dt, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return hc
		}
		t = dt.Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return hc
	}
	t.DisableKeepAlives = true
	d := &safeDialer{
		dial:          t.DialContext,
		dialTLS:       t.DialTLSContext,
		tlsConfig:     t.TLSClientConfig,
		connectHeader: t.ProxyConnectHeader,
		getHeader:     t.GetProxyConnectHeader,
		onConnect:     t.OnProxyConnectResponse,
		maxHead:       t.MaxResponseHeaderBytes,
	}
	if d.dial == nil {
		d.dial = (&net.Dialer{}).DialContext
	}
	if d.maxHead <= 0 {
		d.maxHead = 10 << 20 // net/http's default
	}
	t.DialContext = d.dialPlain
	t.DialTLSContext = d.dialSecure
	out := *hc
	out.Transport = t
	if choose := t.Proxy; choose != nil {
		t.Proxy = func(r *http.Request) (*url.URL, error) {
			if proxyOf(r.Context()) != nil {
				return nil, nil //nolint:nilnil // Transport.Proxy's "no proxy": safeDialer takes this request's connection through it
			}
			return choose(r)
		}
		out.Transport = &proxyRouter{Transport: t, choose: choose}
	}
	return &out
}

// proxyKey is the context key of the proxy that safeDialer dials a request's connection
// through.
type proxyKey struct{}

func proxyOf(ctx context.Context) *url.URL {
	u, _ := ctx.Value(proxyKey{}).(*url.URL)
	return u
}

// proxyRouter asks the transport's Proxy function once per request, as net/http does, and
// hands the proxies whose protocol sits on the connection (SOCKS, and an http(s) proxy of an
// https request) to safeDialer through the request's context; the dial's context carries the
// request's values.
type proxyRouter struct {
	*http.Transport
	choose func(*http.Request) (*url.URL, error)
}

func (p *proxyRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	u, err := p.choose(r)
	if err != nil {
		return nil, err
	}
	if u != nil && (r.URL.Scheme == "https" || u.Scheme == "socks5" || u.Scheme == "socks5h") {
		r = r.WithContext(context.WithValue(r.Context(), proxyKey{}, u))
	}
	return p.Transport.RoundTrip(r) //nolint:wrapcheck // the transport's own errors, as net/http returns them
}

// safeDialer makes the connections of the Admin's transport, each read through a
// [headSafeConn] above TLS and above any proxy protocol. Its fields are the cloned
// transport's settings.
type safeDialer struct {
	dial, dialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConfig     *tls.Config
	connectHeader http.Header
	getHeader     func(ctx context.Context, proxyURL *url.URL, target string) (http.Header, error)
	onConnect     func(ctx context.Context, proxyURL *url.URL, connectReq *http.Request, connectRes *http.Response) error
	maxHead       int64
}

// dialPlain is the transport's DialContext: a connection to addr (an http server, or a
// proxy that net/http speaks to itself).
func (d *safeDialer) dialPlain(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.route(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &headSafeConn{Conn: c}, nil
}

// dialSecure is the transport's DialTLSContext: TLS to addr, then the cleaning. The
// caller's own DialTLSContext makes the TLS when no proxy of safeDialer's is in between.
func (d *safeDialer) dialSecure(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.dialTLS != nil && proxyOf(ctx) == nil {
		c, err := d.dialTLS(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &headSafeConn{Conn: c}, nil
	}
	raw, err := d.route(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c, err := d.handshake(ctx, raw, addr)
	if err != nil {
		return nil, err
	}
	return &headSafeConn{Conn: c}, nil
}

// handshake runs TLS as a client of addr over raw with the transport's TLS settings, as
// net/http does (the server name defaults to addr's host), offering HTTP/1.1 only: the
// transport reads this connection as HTTP/1.1.
func (d *safeDialer) handshake(ctx context.Context, raw net.Conn, addr string) (net.Conn, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.tlsConfig != nil {
		c = d.tlsConfig.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = h
		}
	}
	c.NextProtos = []string{"http/1.1"}
	tc := tls.Client(raw, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("dlq: admin TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// route returns a connection to addr: through the proxy of the dial's context, or direct.
func (d *safeDialer) route(ctx context.Context, network, addr string) (net.Conn, error) {
	u := proxyOf(ctx)
	if u == nil {
		return d.dial(ctx, network, addr)
	}
	switch u.Scheme {
	case "socks5", "socks5h":
		var auth *proxy.Auth
		if u.User != nil {
			pw, _ := u.User.Password()
			auth = &proxy.Auth{User: u.User.Username(), Password: pw}
		}
		s, err := proxy.SOCKS5("tcp", proxyAddr(u), auth, dialFunc(d.dial))
		if err != nil {
			return nil, fmt.Errorf("dlq: admin proxy %s: %w", u.Redacted(), err)
		}
		cd, ok := s.(proxy.ContextDialer)
		if !ok {
			return nil, fmt.Errorf("dlq: admin proxy %s: the SOCKS5 dialer takes no context", u.Redacted())
		}
		c, err := cd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("dlq: admin proxy %s: %w", u.Redacted(), err)
		}
		return c, nil
	case "http", "https":
		return d.tunnel(ctx, network, addr, u)
	default:
		return nil, fmt.Errorf("dlq: admin proxy %s: the scheme %q is not http, https, socks5 or socks5h", u.Redacted(), u.Scheme)
	}
}

// tunnel opens a connection to addr through the http(s) proxy u with CONNECT, as net/http
// does: the transport's proxy headers, Basic authorization from u's user info, its
// OnProxyConnectResponse, and a minute at most for the proxy's answer.
func (d *safeDialer) tunnel(ctx context.Context, network, addr string, u *url.URL) (net.Conn, error) {
	paddr := proxyAddr(u)
	var c net.Conn
	var err error
	switch {
	case u.Scheme == "https" && d.dialTLS != nil:
		c, err = d.dialTLS(ctx, network, paddr)
	case u.Scheme == "https":
		if c, err = d.dial(ctx, network, paddr); err == nil {
			c, err = d.handshake(ctx, c, paddr)
		}
	default:
		c, err = d.dial(ctx, network, paddr)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: admin proxy %s: %w", u.Redacted(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	err = d.connect(ctx, c, addr, u)
	if !stop() {
		// The time ran out (or ctx ended) and c was closed under connect, which then failed
		// on it, or finished just before: the deadline is the error, as net/http reports it.
		err = ctx.Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dlq: admin proxy %s: CONNECT %s: %w", u.Redacted(), addr, err)
	}
	return c, nil
}

// connect asks the proxy on c for a tunnel to addr and reads its answer.
func (d *safeDialer) connect(ctx context.Context, c net.Conn, addr string, u *url.URL) error {
	hdr := d.connectHeader
	if d.getHeader != nil {
		var err error
		if hdr, err = d.getHeader(ctx, u, addr); err != nil {
			return err
		}
	}
	hdr = hdr.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		hdr.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: hdr}
	if err := req.Write(c); err != nil {
		return fmt.Errorf("writing the request: %w", err)
	}
	// The server behind a tunnel waits for the client's TLS hello, so the proxy's answer is
	// all there is to read; anything after it would be lost with this reader.
	br := bufio.NewReader(&io.LimitedReader{R: c, N: d.maxHead})
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	_ = resp.Body.Close()
	if d.onConnect != nil {
		if err := d.onConnect(ctx, u, req, resp); err != nil {
			return err
		}
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("the proxy answered %s", resp.Status)
	case br.Buffered() > 0:
		return errors.New("the proxy sent bytes after its answer")
	}
	return nil
}

// proxyAddr is u's host with its port, or the scheme's default port.
func proxyAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	return net.JoinHostPort(u.Hostname(), port)
}

// dialFunc is a dial function as the proxy package's dialers.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// headSafeConn reads the head of the one HTTP answer on its connection (the status line and
// the headers, up to the empty line) with every control character but HTAB, CR and LF read
// as a space, and the body as it is.
type headSafeConn struct {
	net.Conn
	inBody  bool
	lineEnd int // line feeds since the last other byte but CR
}

func (c *headSafeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.inBody {
		c.clean(p[:n])
	}
	return n, err //nolint:wrapcheck // a connection's own errors, as net/http expects them
}

func (c *headSafeConn) clean(p []byte) {
	for i, b := range p {
		switch {
		case b == '\n':
			if c.lineEnd++; c.lineEnd == 2 {
				c.inBody = true
				return
			}
		case b == '\r':
		case b < ' ' && b != '\t' || b == 0x7f:
			p[i] = ' '
			c.lineEnd = 0
		default:
			c.lineEnd = 0
		}
	}
}

// latin1 decodes a header value as the ISO-8859-1 the broker wrote it in.
func latin1(v string) string {
	ascii := true
	for i := range len(v) {
		if v[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) * 2)
	for i := range len(v) {
		b.WriteRune(rune(v[i]))
	}
	return b.String()
}
