package dlq

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Apache Pulsar's admin API answers on Jetty, which writes a header value in ISO-8859-1: a
// character up to U+00FF as one byte, any other (and CR and LF) as a space, and the other
// control characters as they are. "Peek messages" puts a message's key and its properties
// in headers, so a key with a control character (a producer's ESC, say) gives an answer that
// Go's HTTP client refuses whole ("malformed MIME header line"), and every message behind it
// on the subscription could not be looked at. The Admin therefore reads answers through a
// connection that turns those control characters into spaces too, as the broker already
// does with CR and LF, and decodes the values as ISO-8859-1: a peeked key or property keeps
// every character up to U+00FF that is not a control character; the others are spaces.
// Redrive reads messages over Pulsar's binary protocol and moves them as they are.

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
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &headSafeConn{Conn: c}, nil
	}
	if t.DialTLSContext == nil {
		// TLS under the cleaning: the transport's own TLS would sit above the dial.
		cfg := t.TLSClientConfig
		t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12}
			if cfg != nil {
				c = cfg.Clone()
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
			return &headSafeConn{Conn: tc}, nil
		}
	}
	out := *hc
	out.Transport = t
	return &out
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
