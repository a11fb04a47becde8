package pulsar_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus" //nolint:depguard // to observe the client's global logger, which Connect keeps silent
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// connectOpts are client options with short timeouts, so that a failed probe's leftover
// client goroutine ends soon (see waitProbesDone).
func connectOpts(url string) apulsar.ClientOptions {
	return apulsar.ClientOptions{
		URL: url, ConnectionTimeout: 2 * time.Second, OperationTimeout: 300 * time.Millisecond,
		KeepAliveInterval: time.Second, // also bounds the client's wait for a silent broker's handshake
		Logger:            plog.DefaultNopLogger(),
	}
}

// waitProbesDone waits for the client goroutines of failed probes, which retry until their
// OperationTimeout (as Connect documents), so that the leak check sees none of them.
func waitProbesDone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "pulsar.probeBroker") {
			return
		}
		if time.Now().After(deadline) {
			t.Error("a probe goroutine outlived its OperationTimeout")
			return
		}
		runtime.Gosched()
		<-time.After(20 * time.Millisecond)
	}
}

// requireConnectError checks that err is a one-line *ConnectError of kind.
func requireConnectError(t *testing.T, err error, kind bqpulsar.ConnectKind) {
	t.Helper()
	t.Cleanup(func() { waitProbesDone(t) })
	require.Error(t, err)
	var ce *bqpulsar.ConnectError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, kind, ce.Kind, "%v", err)
	require.ErrorIs(t, err, bqpulsar.ErrConnect)
	assert.NotContains(t, err.Error(), "\n", "one line")
	where := ce.URL
	if where == "" {
		where = "the service"
	}
	assert.True(t, strings.HasPrefix(err.Error(), "pulsar: connect to "+where+": "), err.Error())
}

func TestConnectEmbeddedBroker(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client, err := bqpulsar.Connect(t.Context(), connectOpts(b.URL()))
	require.NoError(t, err)
	defer client.Close()
	assert.Empty(t, b.Topics(), "the probe creates no topic")

	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders"})
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("x")})
	require.NoError(t, err)
	p.Close()
	assert.Equal(t, 1, b.Stats("orders").Messages)
}

// Connect watches the client's log through a logger of its own: every line still reaches
// opts.Logger, and a nil opts.Logger means silent, not pulsar-client-go's global logrus
// logger (which a client made without Connect writes to, as the control shows). Not
// parallel: it redirects the global logger.
func TestConnectLogsWhereItsOptionsSay(t *testing.T) {
	b := pulsartest.NewBroker(t)
	var global bytes.Buffer
	out, level := logrus.StandardLogger().Out, logrus.GetLevel()
	logrus.SetOutput(&global)
	logrus.SetLevel(logrus.InfoLevel)
	t.Cleanup(func() { logrus.SetOutput(out); logrus.SetLevel(level) })
	// use sends one message on a fresh producer of client, then closes the client.
	use := func(client apulsar.Client) {
		t.Helper()
		p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: uniqueTopic(t, "logged")})
		require.NoError(t, err)
		_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("x")})
		require.NoError(t, err)
		p.Close()
		client.Close()
	}

	core, logs := observer.New(zapcore.DebugLevel)
	opts := connectOpts(b.URL())
	opts.Logger = bqpulsar.NewClientLogger(zap.New(core))
	client, err := bqpulsar.Connect(t.Context(), opts)
	require.NoError(t, err)
	use(client)
	assert.NotZero(t, logs.FilterMessageSnippet("onnect").Len(), "the client's connection lines reached opts.Logger")
	assert.NotZero(t, logs.FilterMessageSnippet("roducer").Len(), "so did the producer's")

	opts.Logger = nil
	client, err = bqpulsar.Connect(t.Context(), opts)
	require.NoError(t, err)
	use(client)
	assert.Empty(t, global.String(), "a nil Logger is silent")

	client, err = apulsar.NewClient(opts)
	require.NoError(t, err)
	use(client)
	assert.NotEmpty(t, global.String(), "control: without Connect, a nil Logger means the global logger")
}

func TestConnectRefused(t *testing.T) {
	_, err := bqpulsar.Connect(t.Context(), connectOpts("pulsar://127.0.0.1:1"))
	requireConnectError(t, err, bqpulsar.ConnectRefused)
	assert.Equal(t, "pulsar: connect to pulsar://127.0.0.1:1: connection refused", err.Error())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
}

func TestConnectUnknownHost(t *testing.T) {
	// The verdict comes from the machine's resolver: where none answers (no network, an
	// isolated network namespace) a lookup fails with a transport error, not "no such host".
	var probe *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(t.Context(), "nosuch.invalid"); !errors.As(err, &probe) || !probe.IsNotFound {
		t.Skipf("no DNS resolver answers on this machine (a lookup of nosuch.invalid gave %v): the unknown-host verdict cannot be seen", err)
	}
	_, err := bqpulsar.Connect(t.Context(), connectOpts("pulsar://nosuch.invalid:6650"))
	requireConnectError(t, err, bqpulsar.ConnectUnknownHost)
	assert.Equal(t, `pulsar: connect to pulsar://nosuch.invalid:6650: unknown host "nosuch.invalid"`, err.Error())
	var dns *net.DNSError
	require.ErrorAs(t, err, &dns)
	assert.True(t, dns.IsNotFound)
}

func TestConnectSeveralHostsOneUp(t *testing.T) {
	b := pulsartest.NewBroker(t)
	up := strings.TrimPrefix(b.URL(), "pulsar://")
	// The probe accepts a URL of which one host answers.
	client, err := bqpulsar.Connect(t.Context(), connectOpts("pulsar://127.0.0.1:1,"+up))
	require.NoError(t, err)
	client.Close()

	_, err = bqpulsar.Connect(t.Context(), connectOpts("pulsar://127.0.0.1:1,nosuch.invalid"))
	requireConnectError(t, err, bqpulsar.ConnectRefused) // the first host's failure
}

func TestConnectInvalidURL(t *testing.T) {
	for _, url := range []string{"", "127.0.0.1:6650", "kafka://127.0.0.1:9092", "pulsar://", "pulsar://fec0::1:6650"} {
		_, err := bqpulsar.Connect(t.Context(), connectOpts(url))
		requireConnectError(t, err, bqpulsar.ConnectInvalid)
	}
}

func TestConnectAuthentication(t *testing.T) {
	b := pulsartest.NewBroker(t, pulsartest.WithAuthToken("right-token"))
	opts := connectOpts(b.URL())
	opts.ConnectionTimeout = 30 * time.Second
	opts.Authentication = apulsar.NewAuthenticationToken("wrong-token")
	start := time.Now()
	_, err := bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectAuthentication)
	assert.Contains(t, err.Error(), ": authentication failed: the broker said \"pulsartest: authentication failed\"")
	assert.NotContains(t, err.Error(), "wrong-token")
	assert.Less(t, time.Since(start), 20*time.Second, "the refusal ends the probe, not the timeout")

	opts.Authentication = apulsar.NewAuthenticationToken("right-token")
	client, err := bqpulsar.Connect(t.Context(), opts)
	require.NoError(t, err)
	client.Close()
}

// silentListener accepts TCP connections and never answers (brokertest.SilentListener).
func silentListener(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	return brokertest.SilentListener(t)
}

func TestConnectTimeout(t *testing.T) {
	addr, _ := silentListener(t)
	opts := connectOpts("pulsar://" + addr)
	opts.ConnectionTimeout = 300 * time.Millisecond
	_, err := bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), ": timeout: no answer within 300ms: the broker accepted the TCP connection")

	// A TLS handshake that never finishes is a timeout too.
	opts.URL = "pulsar+ssl://" + addr
	_, err = bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "TLS handshake with "+addr)
}

func TestConnectCanceled(t *testing.T) {
	addr, accepted := silentListener(t)
	opts := connectOpts("pulsar://" + addr)
	opts.ConnectionTimeout = time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-accepted
		cancel()
	}()
	_, err := bqpulsar.Connect(ctx, opts)
	requireConnectError(t, err, bqpulsar.ConnectCanceled)
	require.ErrorIs(t, err, context.Canceled)

	_, err = bqpulsar.Connect(ctx, opts) // already canceled: no network use at all
	requireConnectError(t, err, bqpulsar.ConnectCanceled)
}

// tlsListener serves TLS with a self-signed certificate for dnsName (and 127.0.0.1 when
// withIP) and answers nothing after the handshake; it returns the address and the
// certificate's PEM file.
func tlsListener(t *testing.T, dnsName string, withIP bool) (addr, certFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if withIP {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if tc, ok := c.(*tls.Conn); ok {
					_ = tc.Handshake()
				}
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), certFile
}

// TestConnectTLS flaked under load (fixed for that cause): the TLS handshake took longer than
// a 2 s connect timeout. The TLS cases allow 30 s; each ends at the handshake's verdict at once.
func TestConnectTLS(t *testing.T) {
	addr, certFile := tlsListener(t, "broker.example", true)

	// Every case below ends with the handshake's verdict, at once; the long timeout is
	// for a loaded machine, where a handshake has taken more than connectOpts' 2 s.
	tlsOpts := func(url string) apulsar.ClientOptions {
		o := connectOpts(url)
		o.ConnectionTimeout = 30 * time.Second
		return o
	}

	// Not trusted.
	_, err := bqpulsar.Connect(t.Context(), tlsOpts("pulsar+ssl://"+addr))
	requireConnectError(t, err, bqpulsar.ConnectTLS)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)
	assert.Contains(t, err.Error(), ": TLS: handshake with "+addr+": ")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	// Trusted: the TLS handshake passes, then the listener hangs up instead of speaking
	// Pulsar. The client's failed handshake ends the probe at once.
	opts := tlsOpts("pulsar+ssl://" + addr)
	opts.TLSTrustCertsFilePath = certFile
	_, err = bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectUnknown)
	assert.Contains(t, err.Error(), ": the broker closed the connection during the Pulsar handshake: ")

	// Trusted, but issued for another name.
	other, otherCert := tlsListener(t, "broker.example", false)
	opts.URL, opts.TLSTrustCertsFilePath = "pulsar+ssl://"+other, otherCert
	_, err = bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectTLS)
	var host x509.HostnameError
	require.ErrorAs(t, err, &host)

	// An unreadable trust file is a TLS failure before any network use.
	opts.TLSTrustCertsFilePath = filepath.Join(t.TempDir(), "missing.pem")
	_, err = bqpulsar.Connect(t.Context(), opts)
	requireConnectError(t, err, bqpulsar.ConnectTLS)
	require.ErrorIs(t, err, os.ErrNotExist)

	// A plain-text listener behind pulsar+ssl:// fails the handshake, it does not hang.
	b := pulsartest.NewBroker(t)
	_, err = bqpulsar.Connect(t.Context(), tlsOpts(strings.Replace(b.URL(), "pulsar://", "pulsar+ssl://", 1)))
	requireConnectError(t, err, bqpulsar.ConnectTLS)
}

func TestConnectErrorRedactsPassword(t *testing.T) {
	err := &bqpulsar.ConnectError{URL: "http://user:secret@127.0.0.1:1", Kind: bqpulsar.ConnectRefused}
	assert.Equal(t, "pulsar: connect to http://user:xxxxx@127.0.0.1:1: connection refused", err.Error())
}

func TestWrapConnectError(t *testing.T) {
	const url = "pulsar://127.0.0.1:1"
	require.NoError(t, seam.WrapConnectError(url, nil))

	// What CreateProducer returns for an unreachable broker.
	bare := errors.Join(context.DeadlineExceeded, errors.New("connection error"))
	err := seam.WrapConnectError(url, bare)
	requireConnectError(t, err, bqpulsar.ConnectTimeout)
	var ce *bqpulsar.ConnectError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, url, ce.URL)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "pulsar: connect to pulsar://127.0.0.1:1: timeout: context deadline exceeded; connection error", err.Error())

	// An answer of the broker is not a connection failure.
	answer := errors.New("server error: TopicNotFound: no such topic")
	assert.Same(t, answer, seam.WrapConnectError(url, answer))

	// A ConnectError stays as it is.
	assert.Same(t, err, seam.WrapConnectError("other", err))

	// A real client against a closed port.
	client, err := apulsar.NewClient(connectOpts(url))
	require.NoError(t, err)
	defer client.Close()
	_, err = client.CreateProducer(apulsar.ProducerOptions{Topic: "orders"})
	require.Error(t, err)
	requireConnectError(t, seam.WrapConnectError(url, err), bqpulsar.ConnectTimeout)
}

func TestClassifyConnectError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bqpulsar.ConnectKind
	}{
		{nil, bqpulsar.ConnectUnknown},
		{errors.New("boom"), bqpulsar.ConnectUnknown},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, bqpulsar.ConnectRefused},
		{&net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH}, bqpulsar.ConnectUnreachable},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, bqpulsar.ConnectUnreachable},
		{&net.DNSError{Name: "x.invalid", IsNotFound: true}, bqpulsar.ConnectUnknownHost},
		{&net.DNSError{Name: "x", IsTimeout: true}, bqpulsar.ConnectTimeout},
		{x509.UnknownAuthorityError{}, bqpulsar.ConnectTLS},
		{tls.AlertError(40), bqpulsar.ConnectTLS},
		{context.Canceled, bqpulsar.ConnectCanceled},
		{errors.Join(context.DeadlineExceeded, errors.New("connection error")), bqpulsar.ConnectTimeout},
		{errors.New("request timed out"), bqpulsar.ConnectTimeout},
		{&bqpulsar.ConnectError{Kind: bqpulsar.ConnectTLS}, bqpulsar.ConnectTLS},
	} {
		assert.Equal(t, tc.want, bqpulsar.ClassifyConnectError(tc.err), "%v", tc.err)
	}
}

func TestConnectKindString(t *testing.T) {
	assert.Equal(t, "connection refused", bqpulsar.ConnectRefused.String())
	assert.Equal(t, "authentication", bqpulsar.ConnectAuthentication.String())
	assert.Equal(t, "ConnectKind(99)", bqpulsar.ConnectKind(99).String())
}

func ExampleConnect() {
	ctx := context.Background()
	b, err := pulsartest.Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = b.Close() }()

	client, err := bqpulsar.Connect(ctx, apulsar.ClientOptions{URL: b.URL(), Logger: plog.DefaultNopLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	fmt.Println("connected")

	// Nothing listens on port 1: one line with the URL and the cause, at once.
	_, err = bqpulsar.Connect(ctx, apulsar.ClientOptions{URL: "pulsar://127.0.0.1:1", Logger: plog.DefaultNopLogger()})
	fmt.Println(err)
	fmt.Println(errors.Is(err, syscall.ECONNREFUSED))
	// Output:
	// connected
	// pulsar: connect to pulsar://127.0.0.1:1: connection refused
	// true
}
