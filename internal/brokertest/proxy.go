package brokertest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The credentials every test proxy asks for; a Proxy's URL carries them.
const (
	ProxyUser     = "ops"
	ProxyPassword = "s3cret"
)

// Proxy is a proxy of a test, stopped when the test ends. It connects every address it is
// asked for to the same port on 127.0.0.1, so a test can name a host that is not loopback
// (which net/http's environment proxies skip) and still reach a broker of its own.
type Proxy struct {
	// URL is the proxy's URL, with ProxyUser's credentials.
	URL *url.URL
	// Used counts the connections it carried.
	Used atomic.Int64
	// Tenant holds, as a string, the X-Tenant header of the last request an HTTP proxy
	// carried.
	Tenant atomic.Value

	wg sync.WaitGroup
}

// StartHTTPProxy starts an HTTP proxy, over TLS with cfg when it is not nil: it opens CONNECT
// tunnels and forwards other requests, bytes as they are both ways, for ProxyUser's
// Proxy-Authorization only (407 otherwise).
func StartHTTPProxy(tb testing.TB, cfg *tls.Config) *Proxy {
	tb.Helper()
	p := &Proxy{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(ProxyUser+":"+ProxyPassword))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != want {
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		target, err := dialLoopback(r.Context(), r.Host)
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
		p.Used.Add(1)
		p.Tenant.Store(r.Header.Get("X-Tenant"))
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
	tb.Cleanup(func() {
		srv.Close()
		p.wg.Wait()
	})
	u, err := url.Parse(srv.URL)
	if err != nil {
		tb.Fatalf("brokertest: proxy URL: %v", err)
	}
	u.User = url.UserPassword(ProxyUser, ProxyPassword)
	p.URL = u
	return p
}

// StartSOCKS5 starts a SOCKS5 proxy (RFC 1928) that connects the address asked for, for
// ProxyUser's username and password (RFC 1929) only.
func StartSOCKS5(tb testing.TB) *Proxy {
	tb.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("brokertest: SOCKS5 listener: %v", err)
	}
	p := &Proxy{URL: &url.URL{Scheme: "socks5", Host: ln.Addr().String(), User: url.UserPassword(ProxyUser, ProxyPassword)}}
	tb.Cleanup(func() {
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
func (p *Proxy) socks(c net.Conn) {
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
	if string(user) != ProxyUser || string(password) != ProxyPassword {
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
	target, err := dialLoopback(context.Background(), net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port)))))
	if err != nil {
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer func() { _ = target.Close() }()
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	p.Used.Add(1)
	relay(c, r, target)
}

// dialLoopback connects to addr's port on 127.0.0.1.
func dialLoopback(ctx context.Context, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err //nolint:wrapcheck // a test proxy's own failure
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port)) //nolint:wrapcheck // a test proxy's own failure
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
