package pulsar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/auth"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// defaultConnectTimeout bounds [Connect] when ClientOptions.ConnectionTimeout is zero.
const defaultConnectTimeout = 10 * time.Second

// ErrConnect is matched by every *[ConnectError].
var ErrConnect = errors.New("pulsar: cannot connect")

// ConnectKind names why a connection failed. The zero value is [ConnectUnknown].
type ConnectKind int

// The kinds of connection failure, as [ConnectError.Kind] reports them.
const (
	// ConnectUnknown is a failure none of the other kinds describes; the cause says more.
	ConnectUnknown ConnectKind = iota
	// ConnectInvalid: the options were refused before any network use (for example a
	// malformed service URL or an unusable authentication provider).
	ConnectInvalid
	// ConnectUnknownHost: the host name does not resolve.
	ConnectUnknownHost
	// ConnectRefused: nothing listens on the address (TCP connection refused).
	ConnectRefused
	// ConnectUnreachable: the network or host is unreachable, or the connection was reset.
	ConnectUnreachable
	// ConnectTLS: the TLS settings are unusable or the TLS handshake failed (for example an
	// untrusted certificate or a host name that does not match it).
	ConnectTLS
	// ConnectAuthentication: the broker refused the connection handshake (Pulsar's CONNECT),
	// which it does when the credentials are not accepted, or the credentials could not be
	// produced.
	ConnectAuthentication
	// ConnectTimeout: no answer within the connection timeout or the context's deadline.
	ConnectTimeout
	// ConnectCanceled: the context was canceled.
	ConnectCanceled
)

var connectKindNames = [...]string{
	ConnectUnknown:        "unknown",
	ConnectInvalid:        "invalid options",
	ConnectUnknownHost:    "unknown host",
	ConnectRefused:        "connection refused",
	ConnectUnreachable:    "unreachable",
	ConnectTLS:            "TLS",
	ConnectAuthentication: "authentication",
	ConnectTimeout:        "timeout",
	ConnectCanceled:       "canceled",
}

// String returns the kind's short name, such as "connection refused".
func (k ConnectKind) String() string {
	if k >= 0 && int(k) < len(connectKindNames) {
		return connectKindNames[k]
	}
	return "ConnectKind(" + strconv.Itoa(int(k)) + ")"
}

// ConnectError is the failure to reach a Pulsar service: returned by [Connect], and by
// [NewPublisher] and [NewConsumer] for an error of the client that says the broker could
// not be reached.
// Its message is one line naming the URL and the cause, for example
//
//	pulsar: connect to pulsar://127.0.0.1:1: connection refused
//
// It matches [ErrConnect] and unwraps to Cause, so errors.Is(err, syscall.ECONNREFUSED),
// errors.Is(err, context.DeadlineExceeded) or errors.As(err, &dnsErr) reach the cause.
type ConnectError struct {
	// URL is the service URL as given.
	URL string
	// Kind classifies the failure.
	Kind ConnectKind
	// Cause is the underlying error: a *net.OpError, *net.DNSError, TLS or x509 error,
	// a context error, or the client's own error.
	Cause error
}

// Error implements error. The URL's password, if any, is redacted.
func (e *ConnectError) Error() string {
	var b strings.Builder
	b.WriteString("pulsar: connect to ")
	if e.URL == "" {
		b.WriteString("the service") // a constructor on a client does not know its URL
	} else {
		b.WriteString(redactURL(e.URL))
	}
	b.WriteString(": ")
	b.WriteString(e.detail())
	return strings.ReplaceAll(b.String(), "\n", "; ")
}

func (e *ConnectError) detail() string {
	cause := "no cause given"
	if e.Cause != nil {
		cause = strings.TrimSpace(e.Cause.Error())
	}
	switch e.Kind {
	case ConnectRefused:
		return "connection refused"
	case ConnectCanceled:
		return "canceled"
	case ConnectUnknownHost:
		var dns *net.DNSError
		if errors.As(e.Cause, &dns) && dns.Name != "" {
			return "unknown host " + strconv.Quote(dns.Name)
		}
		return "unknown host: " + cause
	case ConnectTLS:
		return "TLS: " + cause
	case ConnectAuthentication:
		return "authentication failed: " + cause
	case ConnectTimeout:
		return "timeout: " + cause
	case ConnectUnreachable:
		return "unreachable: " + cause
	default:
		return cause
	}
}

// Unwrap returns [ErrConnect] and Cause, so that the error matches both.
func (e *ConnectError) Unwrap() []error { return matching(ErrConnect, e.Cause) }

// Connect creates a client with opts and proves that it can reach the service before
// returning it, so that an unreachable broker is reported at once, with its cause, instead
// of as a vague timeout of the first CreateProducer or Subscribe.
//
// The probe, in order, bounded by ctx and by opts.ConnectionTimeout
// (10 s when zero) for the whole of it:
//
//  1. the service URL is parsed (pulsar://, pulsar+ssl://, http://, https://, several
//     comma-separated hosts);
//  2. each host is resolved and dialled over TCP, with a TLS handshake for pulsar+ssl://
//     and https:// using the same TLS settings as the client (TLSConfig, or the trust file,
//     insecure and host-name settings, client certificate and authentication certificate);
//     one host that answers is enough;
//  3. the client asks the broker for the partition metadata of a topic partition name
//     (persistent://public/default/babelqueue-connect-probe-partition-0). This performs
//     the Pulsar handshake with the credentials. Any answer of the broker, including
//     "not authorized" or "not found", proves the broker answers and accepted the
//     credentials; a broker never creates a topic or subscription for this request (it
//     auto-creates partitioned metadata only for a base topic name, never for a partition
//     name).
//
// Failures are a *[ConnectError] (its Kind says which: refused, unknown host, TLS,
// authentication, timeout, canceled…); the client is closed before Connect returns. A
// connection the client itself attempts and the broker refuses is seen through the client's
// logger, which Connect wraps (every line still reaches opts.Logger); a nil opts.Logger
// means silent here, not pulsar-client-go's global logrus logger. After a failed or
// abandoned probe, a goroutine of the client may go on retrying for up to
// opts.OperationTimeout (30 s when zero), or for opts.KeepAliveInterval (30 s when zero)
// when a listener accepted the connection and never answered, before it notices the
// client is closed.
//
// On success the client is ready, with its connection to the broker already open, and
// the caller closes it.
func Connect(ctx context.Context, opts apulsar.ClientOptions) (apulsar.Client, error) {
	serviceURL := opts.URL
	var watch *connectWatch
	fail := func(kind ConnectKind, cause error) error {
		if watch != nil {
			watch.silence()
		}
		return &ConnectError{URL: serviceURL, Kind: kind, Cause: cause}
	}
	svc, err := parseServiceURL(serviceURL)
	if err != nil {
		return nil, fail(ConnectInvalid, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(contextKind(err), err)
	}
	budget := opts.ConnectionTimeout
	if budget <= 0 {
		budget = defaultConnectTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	next := opts.Logger
	if next == nil {
		next = plog.DefaultNopLogger()
	}
	watch = newConnectWatch()
	opts.Logger = newWatchLogger(next, watch)
	client, err := apulsar.NewClient(opts)
	if err != nil {
		return nil, fail(ConnectInvalid, err)
	}
	var tlsConf *tls.Config
	if svc.tls {
		if tlsConf, err = probeTLSConfig(opts, svc.hosts[0]); err != nil {
			client.Close()
			return nil, fail(ConnectTLS, err)
		}
	}
	if kind, cause := probeHosts(pctx, ctx, svc.hosts, tlsConf, budget); cause != nil {
		client.Close()
		return nil, fail(kind, cause)
	}
	if kind, cause := probeBroker(pctx, ctx, client, watch, budget); cause != nil {
		client.Close()
		return nil, fail(kind, cause)
	}
	watch.stop()
	return client, nil
}

// probeTopic is the topic whose partition metadata Connect asks for. It is a partition
// name, so that no broker creates anything for the request.
const probeTopic = "persistent://public/default/babelqueue-connect-probe-partition-0"

// probeBroker runs the client operation of the probe and waits for its answer, for a
// refused connection seen in the client's log, or for the end of the budget.
func probeBroker(pctx, ctx context.Context, client apulsar.Client, w *connectWatch,
	budget time.Duration,
) (ConnectKind, error) {
	done := make(chan error, 1)
	go func() {
		_, err := client.TopicPartitions(probeTopic)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !isConnectionLevel(err) {
			return 0, nil // the broker answered
		}
		if f, ok := w.first(); ok {
			return f.kind, f.err
		}
		return classifyConnectError(err), err
	case f := <-w.ch:
		return f.kind, f.err
	case <-pctx.Done():
		if err := ctx.Err(); err != nil {
			return contextKind(err), err
		}
		if f, ok := w.first(); ok {
			return f.kind, f.err
		}
		return ConnectTimeout, &timeoutError{
			after: budget,
			what:  "the broker accepted the TCP connection but did not answer the Pulsar handshake or lookup",
		}
	}
}

// isConnectionLevel reports whether an error of a client request means the request never
// got an answer (no connection, closed connection, no response in time), as opposed to an
// answer of the broker.
func isConnectionLevel(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var pe *apulsar.Error
	if errors.As(err, &pe) {
		switch pe.Result() {
		case apulsar.ConnectError, apulsar.TimeoutError, apulsar.AuthenticationError:
			return true
		default:
			return false
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range clientConnectionErrors {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// clientConnectionErrors are the texts of pulsar-client-go's unexported errors for a request
// that got no answer (it has no exported sentinel for them): v0.21.0 produces the same three
// texts as v0.19.0 (internal/connection.go's waitUntilReady and errConnectionClosed,
// internal/commands.go's ErrConnectionClosed, internal/rpc_client.go's ErrRequestTimeOut).
// TestClientConnectionErrorTexts pins them against the version go.mod requires.
var clientConnectionErrors = [...]string{"connection error", "connection closed", "request timed out"}

// wrapConnectError returns err as a *[ConnectError] for serviceURL when err says the broker
// could not be reached, and err unchanged otherwise (nil stays nil, a *ConnectError is
// returned as is, and an answer of the broker such as "topic not found" is not a connection
// failure). Call it on an error of the client's CreateProducer, Subscribe or CreateReader:
// pulsar-client-go v0.21.0 (as v0.19.0) returns for an unreachable broker only an
// errors.Join of context.DeadlineExceeded and a bare "connection error", and logs the
// cause; the ConnectError names the URL, and the cause when the error carries it.
func wrapConnectError(serviceURL string, err error) error {
	if err == nil {
		return nil
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return err
	}
	if !isConnectionLevel(err) {
		return err
	}
	return &ConnectError{URL: serviceURL, Kind: classifyConnectError(err), Cause: err}
}

// classifyConnectError returns the kind of connection failure err describes, looking
// through wrapped and joined errors: a *net.DNSError is [ConnectUnknownHost],
// syscall.ECONNREFUSED [ConnectRefused], a TLS record, alert or certificate error or an
// x509 error [ConnectTLS], an *apulsar.Error with result AuthenticationError
// [ConnectAuthentication], a context deadline, a net.Error timeout or pulsar-client-go's
// "request timed out" [ConnectTimeout], context.Canceled [ConnectCanceled], an unreachable
// network or host or a reset connection [ConnectUnreachable], and anything else
// [ConnectUnknown].
func classifyConnectError(err error) ConnectKind {
	if err == nil {
		return ConnectUnknown
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return ce.Kind
	}
	if errors.Is(err, context.Canceled) {
		return ConnectCanceled
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsTimeout {
			return ConnectTimeout
		}
		return ConnectUnknownHost
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return ConnectRefused
	}
	if isTLSError(err) {
		return ConnectTLS
	}
	var pe *apulsar.Error
	if errors.As(err, &pe) {
		switch pe.Result() {
		case apulsar.AuthenticationError:
			return ConnectAuthentication
		case apulsar.TimeoutError:
			return ConnectTimeout
		case apulsar.InvalidConfiguration:
			return ConnectInvalid
		default:
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		strings.Contains(err.Error(), "request timed out") {
		return ConnectTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ConnectTimeout
	}
	for _, errno := range [...]syscall.Errno{
		syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ECONNRESET,
		syscall.ECONNABORTED, syscall.EHOSTDOWN, syscall.ENETDOWN,
	} {
		if errors.Is(err, errno) {
			return ConnectUnreachable
		}
	}
	return ConnectUnknown
}

func isTLSError(err error) bool {
	var (
		rec     tls.RecordHeaderError
		alert   tls.AlertError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	return errors.As(err, &rec) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}

func contextKind(err error) ConnectKind {
	if errors.Is(err, context.Canceled) {
		return ConnectCanceled
	}
	return ConnectTimeout
}

// timeoutError is the cause of a probe that ran out of time. It matches
// context.DeadlineExceeded and is a net.Error whose Timeout is true.
type timeoutError struct {
	after time.Duration
	what  string
}

func (e *timeoutError) Error() string      { return fmt.Sprintf("no answer within %s: %s", e.after, e.what) }
func (*timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (*timeoutError) Timeout() bool        { return true }
func (*timeoutError) Temporary() bool      { return true }

// serviceURL is the part of a service URL the probe needs.
type serviceURL struct {
	hosts []string // host:port, with the scheme's default port filled in
	tls   bool
}

// parseServiceURL splits a Pulsar service URL as pulsar-client-go does: a scheme of
// pulsar, pulsar+ssl, http or https, then one or more hosts separated by commas or
// semicolons, each with an optional port.
func parseServiceURL(s string) (serviceURL, error) {
	var out serviceURL
	if s == "" {
		return out, errors.New("the service URL is empty")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return out, fmt.Errorf("service URL %q has no scheme (want pulsar://, pulsar+ssl://, http:// or https://)", s)
	}
	var defPort string
	switch strings.ToLower(scheme) {
	case "pulsar":
		defPort = "6650"
	case "pulsar+ssl":
		defPort, out.tls = "6651", true
	case "http":
		defPort = "80"
	case "https":
		defPort, out.tls = "443", true
	default:
		return out, fmt.Errorf("service URL scheme %q is not pulsar, pulsar+ssl, http or https", scheme)
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	for _, h := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ';' }) {
		hostport, err := withPort(h, defPort)
		if err != nil {
			return out, err
		}
		out.hosts = append(out.hosts, hostport)
	}
	if len(out.hosts) == 0 {
		return out, fmt.Errorf("service URL %q names no host", s)
	}
	return out, nil
}

func withPort(h, defPort string) (string, error) {
	if host, port, err := net.SplitHostPort(h); err == nil {
		if host == "" || port == "" {
			return "", fmt.Errorf("service URL host %q is incomplete", h)
		}
		return h, nil
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return h + ":" + defPort, nil
	}
	if strings.Contains(h, ":") {
		return "", fmt.Errorf("service URL host %q is malformed (an IPv6 address needs brackets)", h)
	}
	return net.JoinHostPort(h, defPort), nil
}

// redactURL hides a password in the URL's user information, when there is one.
func redactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// probeTLSConfig builds the TLS configuration the client uses for its connections.
func probeTLSConfig(opts apulsar.ClientOptions, firstHost string) (*tls.Config, error) {
	if opts.TLSConfig != nil {
		return opts.TLSConfig.Clone(), nil
	}
	conf := &tls.Config{
		InsecureSkipVerify: opts.TLSAllowInsecureConnection, //nolint:gosec // the caller's explicit choice, as for the client
		CipherSuites:       opts.TLSCipherSuites,
		MinVersion:         opts.TLSMinVersion,
		MaxVersion:         opts.TLSMaxVersion,
	}
	if opts.TLSTrustCertsFilePath != "" {
		pem, err := os.ReadFile(opts.TLSTrustCertsFilePath)
		if err != nil {
			return nil, fmt.Errorf("trusted certificates: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("trusted certificates: no PEM certificate in %s", opts.TLSTrustCertsFilePath)
		}
	}
	if opts.TLSValidateHostname {
		host, _, _ := net.SplitHostPort(firstHost)
		conf.ServerName = host
	}
	if opts.TLSCertificateFile != "" && opts.TLSKeyFilePath != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertificateFile, opts.TLSKeyFilePath)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if p, ok := opts.Authentication.(auth.Provider); ok && p != nil {
		cert, err := p.GetTLSCertificate()
		if err != nil {
			return nil, fmt.Errorf("authentication certificate: %w", err)
		}
		if cert != nil {
			conf.Certificates = []tls.Certificate{*cert}
		}
	}
	return conf, nil
}

// probeHosts dials each host (and shakes hands over TLS when tlsConf is set) until one
// answers; it returns the first host's failure when none does.
func probeHosts(pctx, ctx context.Context, hosts []string, tlsConf *tls.Config,
	budget time.Duration,
) (ConnectKind, error) {
	var (
		firstKind ConnectKind
		firstErr  error
	)
	for _, h := range hosts {
		kind, err := probeHost(pctx, h, tlsConf)
		if err == nil {
			return 0, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return contextKind(cerr), cerr
		}
		if pctx.Err() != nil {
			kind, err = ConnectTimeout, &timeoutError{after: budget, what: err.Error()}
		}
		if firstErr == nil {
			firstKind, firstErr = kind, err
		}
	}
	return firstKind, firstErr
}

func probeHost(ctx context.Context, hostport string, tlsConf *tls.Config) (ConnectKind, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		kind := classifyConnectError(err)
		if kind == ConnectUnknown {
			kind = ConnectUnreachable
		}
		return kind, err //nolint:wrapcheck // a *net.OpError names the operation and the address already
	}
	defer func() { _ = conn.Close() }()
	if tlsConf == nil {
		return 0, nil
	}
	conf := tlsConf.Clone()
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(hostport)
	}
	tc := tls.Client(conn, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return ConnectTimeout, fmt.Errorf("TLS handshake with %s: %w", hostport, err)
		}
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the server closed the connection (is it a TLS port?): %w", err)
		}
		return ConnectTLS, fmt.Errorf("handshake with %s: %w", hostport, err)
	}
	return 0, nil
}

// failure is a connection failure the client logged.
type failure struct {
	kind ConnectKind
	err  error
}

// connectWatch collects the first connection failure the client logs while Connect probes,
// and silences the client's logger once Connect failed: the closed client's leftover
// goroutine must not write to the caller's logger after Connect returned.
type connectWatch struct {
	ch chan failure // buffered 1: the first failure

	mu     sync.Mutex
	off    bool
	got    bool
	cached failure

	logMu    sync.RWMutex // held for reading while a line is passed on
	silenced bool
}

// enter reports whether a line may be passed on; when it returns true the caller passes
// it and then calls leave.
func (w *connectWatch) enter() bool {
	w.logMu.RLock()
	if w.silenced {
		w.logMu.RUnlock()
		return false
	}
	return true
}

func (w *connectWatch) leave() { w.logMu.RUnlock() }

// silence drops every later line, after the lines being passed on are written.
func (w *connectWatch) silence() {
	w.logMu.Lock()
	w.silenced = true
	w.logMu.Unlock()
}

func newConnectWatch() *connectWatch { return &connectWatch{ch: make(chan failure, 1)} }

// report records the first failure and ends the probe with it.
func (w *connectWatch) report(f failure) { w.record(f, true) }

// remember records the first failure as the explanation of a probe that fails later, but
// does not end it: a dial the client fails can be to another host of the URL than the one
// the probe reached, and the client tries the next.
func (w *connectWatch) remember(f failure) { w.record(f, false) }

// record keeps f when it is the first failure (and the watch is on); end hands it to the
// probe as well.
func (w *connectWatch) record(f failure, end bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off || w.got {
		return
	}
	w.got, w.cached = true, f
	if end {
		w.ch <- f
	}
}

// first returns the failure reported, if any, without waiting.
func (w *connectWatch) first() (failure, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cached, w.got
}

func (w *connectWatch) stop() {
	w.mu.Lock()
	w.off = true
	w.mu.Unlock()
}

// refusalError is the broker's answer to a refused CONNECT, as the client logged it.
type refusalError struct{ message string }

func (e *refusalError) Error() string { return "the broker said " + strconv.Quote(e.message) }

// The messages pulsar-client-go logs when a connection attempt fails (connect and
// doHandshake in internal/connection.go); v0.21.0 logs the same ones as v0.19.0.
// TestClientConnectionErrorTexts pins them against the version go.mod requires.
const (
	logDialFailed      = "Failed to connect to broker"
	logTLSConfigFailed = "Failed to configure TLS"
	logAuthDataFailed  = "Failed to load auth credentials"
	logHandshakeFailed = "Failed to perform initial handshake"
	logRefusedFormat   = "Failed to establish connection with broker"
)

// noteError looks at a line logged with an error.
func (w *connectWatch) noteError(msg string, err error) {
	if err == nil {
		return
	}
	switch {
	case strings.HasPrefix(msg, logDialFailed):
		kind := classifyConnectError(err)
		if kind == ConnectUnknown {
			kind = ConnectUnreachable
		}
		w.remember(failure{kind, err})
	case strings.HasPrefix(msg, logTLSConfigFailed):
		w.report(failure{ConnectTLS, err})
	case strings.HasPrefix(msg, logAuthDataFailed):
		w.report(failure{ConnectAuthentication, fmt.Errorf("credentials: %w", err)})
	case strings.HasPrefix(msg, logHandshakeFailed):
		kind := classifyConnectError(err)
		if kind == ConnectUnknown || kind == ConnectUnreachable {
			kind, err = ConnectUnknown, fmt.Errorf("the broker closed the connection during the Pulsar handshake: %w", err)
		}
		w.report(failure{kind, err})
	default:
	}
}

// noteFormat looks at a line logged with a format.
func (w *connectWatch) noteFormat(format string, args []any) {
	if strings.HasPrefix(format, logRefusedFormat) && len(args) > 0 {
		w.report(failure{ConnectAuthentication, &refusalError{message: fmt.Sprint(args[0])}})
	}
}
