package pulsartest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// tlsOptions are the TLS listeners: pulsar+ssl:// and the admin subset over HTTPS.
type tlsOptions struct {
	addr      string
	cfg       *tls.Config
	adminAddr string
	adminCfg  *tls.Config
}

// WithTLS also serves pulsar+ssl:// on addr (e.g. "127.0.0.1:6651") with cfg, next to the plain listener;
// see Broker.TLSURL. cfg needs the broker's certificate; for TLS authentication (Auth.TLS) it also sets
// ClientCAs and a ClientAuth that asks for client certificates (tls.VerifyClientCertIfGiven). LOOKUP answers
// carry this URL as brokerServiceUrlTls. Default: off.
func WithTLS(addr string, cfg *tls.Config) Option {
	return func(o *options) { o.tls.addr, o.tls.cfg = addr, cfg }
}

// WithAdminTLS serves the admin REST subset over HTTPS on addr with cfg (as WithTLS), with or without the
// plain WithAdminHTTP listener; see Broker.AdminTLSURL. Default: off.
func WithAdminTLS(addr string, cfg *tls.Config) Option {
	return func(o *options) { o.tls.adminAddr, o.tls.adminCfg = addr, cfg }
}

// ErrTLSConfig is returned by Start for a TLS listener without a usable configuration.
var ErrTLSConfig = errors.New("pulsartest: TLS listener needs a tls.Config with a certificate")

func (t tlsOptions) validate() error {
	for _, c := range []struct {
		addr string
		cfg  *tls.Config
	}{{t.addr, t.cfg}, {t.adminAddr, t.adminCfg}} {
		if c.addr != "" && (c.cfg == nil || (len(c.cfg.Certificates) == 0 && c.cfg.GetCertificate == nil)) {
			return fmt.Errorf("%w (%s)", ErrTLSConfig, c.addr)
		}
	}
	return nil
}

// TLSURL returns the pulsar+ssl:// service URL of the WithTLS listener, or "" without it.
func (b *Broker) TLSURL() string { return b.tlsURL() }

func (b *Broker) tlsURL() string {
	if b.tlsLn == nil {
		return ""
	}
	return b.tlsServiceURL
}

// AdminTLSURL returns the https:// base URL of the admin subset (WithAdminTLS), or "".
func (b *Broker) AdminTLSURL() string {
	if b.admin == nil {
		return ""
	}
	return b.admin.tlsURL()
}

func (a *adminServer) tlsURL() string { return a.httpsURL }

// listenTLS opens the TLS listeners of Start; it closes what it opened on error.
func (b *Broker) listenTLS(ctx context.Context, lc *net.ListenConfig) (adminTLS net.Listener, err error) {
	o := b.opts.tls
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.addr != "" {
		ln, err := lc.Listen(ctx, "tcp", o.addr)
		if err != nil {
			return nil, fmt.Errorf("pulsartest: TLS listen %s: %w", o.addr, err)
		}
		b.tlsLn = tls.NewListener(ln, o.cfg)
		b.tlsServiceURL = "pulsar+ssl://" + advertised(o.addr, ln.Addr())
	}
	if o.adminAddr != "" {
		ln, err := lc.Listen(ctx, "tcp", o.adminAddr)
		if err != nil {
			if b.tlsLn != nil {
				_ = b.tlsLn.Close()
			}
			return nil, fmt.Errorf("pulsartest: admin TLS listen %s: %w", o.adminAddr, err)
		}
		adminTLS = tls.NewListener(ln, o.adminCfg)
	}
	return adminTLS, nil
}

// advertised is the host of the configured address (loopback for an unspecified one) with the bound port.
func advertised(configured string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(configured)
	if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	port := 0
	if a, ok := bound.(*net.TCPAddr); ok {
		port = a.Port
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// serveAdminTLS serves the admin handler on the HTTPS listener.
func (a *adminServer) serveAdminTLS(ln net.Listener) {
	a.httpsURL = "https://" + advertised(a.b.opts.tls.adminAddr, ln.Addr())
	a.tlsSrv = &http.Server{Handler: a.srv.Handler, ReadHeaderTimeout: 10 * time.Second}
	a.b.wg.Add(1)
	go func() {
		defer a.b.wg.Done()
		_ = a.tlsSrv.Serve(ln)
	}()
}

// close stops both admin servers.
func (a *adminServer) close() {
	_ = a.srv.Close()
	if a.tlsSrv != nil {
		_ = a.tlsSrv.Close()
	}
}

// closeTLSListeners closes the pulsar+ssl:// listener and, if given, an admin TLS listener not yet served.
func (b *Broker) closeTLSListeners(adminTLS net.Listener) {
	if b.tlsLn != nil {
		_ = b.tlsLn.Close()
	}
	if adminTLS != nil {
		_ = adminTLS.Close()
	}
}
