package pulsartest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// testPKI is a throw-away CA with a broker certificate (localhost, 127.0.0.1) and a client certificate,
// generated per test; nothing is committed.
type testPKI struct {
	caFile, clientCert, clientKey string
	server                        tls.Certificate
	pool                          *x509.CertPool
}

func newTestPKI(t *testing.T, clientCN string) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pulsartest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, hosts bool) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if hosts {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	certPEM, keyPEM := issue(2, "localhost", x509.ExtKeyUsageServerAuth, true)
	p.server, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	certPEM, keyPEM = issue(3, clientCN, x509.ExtKeyUsageClientAuth, false)
	p.clientCert, p.clientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	require.NoError(t, os.WriteFile(p.clientCert, certPEM, 0o600))
	require.NoError(t, os.WriteFile(p.clientKey, keyPEM, 0o600))
	return p
}

func (p *testPKI) serverConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.VerifyClientCertIfGiven,
		MinVersion: tls.VersionTLS12,
	}
}

// hs256 signs claims as a JWT with key.
func hs256(key []byte, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	unsigned := enc([]byte(`{"alg":"HS256"}`)) + "." + enc([]byte(claims))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc(mac.Sum(nil))
}

func tryProduce(t *testing.T, opts apulsar.ClientOptions, topic string) error {
	t.Helper()
	opts.OperationTimeout, opts.ConnectionTimeout = 3*time.Second, 3*time.Second
	opts.Logger = plog.DefaultNopLogger()
	c, err := apulsar.NewClient(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("x")})
	return err
}

func TestTLSListenerServesPulsarSSL(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t, "client")
	b := pulsartest.NewBroker(t, pulsartest.WithTLS("localhost:0", pki.serverConfig()))
	require.True(t, strings.HasPrefix(b.TLSURL(), "pulsar+ssl://localhost:"), b.TLSURL())
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{
		URL: b.TLSURL(), TLSTrustCertsFilePath: pki.caFile, TLSValidateHostname: true,
	}, "over-tls"))
	assert.Equal(t, 1, b.Stats("over-tls").Messages)
	err := tryProduce(t, apulsar.ClientOptions{URL: b.TLSURL()}, "untrusted") // the system roots do not know our CA
	require.Error(t, err)

	_, err = pulsartest.Start(t.Context(), pulsartest.WithTLS("127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12}))
	require.ErrorIs(t, err, pulsartest.ErrTLSConfig)
}

func TestAuthTokenBasicAndCertificate(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t, "carol")
	key := []byte("0123456789abcdef0123456789abcdef")
	b := pulsartest.NewBroker(t, pulsartest.WithTLS("localhost:0", pki.serverConfig()),
		pulsartest.WithAuth(pulsartest.Auth{
			TokenSecret: key, Basic: map[string]string{"bob": "secret"}, TLS: true, Anonymous: "anon",
			SuperUsers: []string{"root"},
			Grants:     map[string][]string{"acme/private": {"alice", "bob", "carol"}, "public/default": {"anon", "alice"}},
		}))
	private := "persistent://acme/private/t"
	alice := apulsar.NewAuthenticationToken(hs256(key, `{"sub":"alice"}`))
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: alice}, private))
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL()}, "open-to-anon"))

	err := tryProduce(t, apulsar.ClientOptions{URL: b.URL()}, private)
	require.Error(t, err, "anonymous is not granted acme/private")
	assert.Contains(t, err.Error(), "AuthorizationError")

	forged := apulsar.NewAuthenticationToken(hs256([]byte("another key"), `{"sub":"root"}`))
	require.Error(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: forged}, private))
	expired := apulsar.NewAuthenticationToken(hs256(key, `{"sub":"alice","exp":1}`))
	require.Error(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: expired}, private))
	root := apulsar.NewAuthenticationToken(hs256(key, `{"sub":"root"}`))
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: root}, "persistent://acme/private/u"))

	bob, err := apulsar.NewAuthenticationBasic("bob", "secret")
	require.NoError(t, err)
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: bob}, private))
	wrong, err := apulsar.NewAuthenticationBasic("bob", "guess")
	require.NoError(t, err)
	require.Error(t, tryProduce(t, apulsar.ClientOptions{URL: b.URL(), Authentication: wrong}, private))

	carol := apulsar.NewAuthenticationTLS(pki.clientCert, pki.clientKey)
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{
		URL: b.TLSURL(), TLSTrustCertsFilePath: pki.caFile, Authentication: carol,
	}, private))
	assert.Equal(t, 3, b.Stats(private).Messages)
}

func TestAdminOverHTTPSWithAuth(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t, "carol")
	key := []byte("k")
	b := pulsartest.NewBroker(t, pulsartest.WithAdminTLS("localhost:0", pki.serverConfig()),
		pulsartest.WithAuth(pulsartest.Auth{TokenSecret: key, Grants: map[string][]string{"acme/private": {"alice"}}}))
	assert.Empty(t, b.AdminURL(), "HTTPS only")
	require.True(t, strings.HasPrefix(b.AdminTLSURL(), "https://localhost:"), b.AdminTLSURL())
	hc := adminHTTP(t)
	tr, ok := hc.Transport.(*http.Transport)
	require.True(t, ok)
	tr.TLSClientConfig = &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}
	get := func(path, token string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.AdminTLSURL()+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	const topics = "/admin/v2/persistent/acme/private"
	assert.Equal(t, http.StatusUnauthorized, get(topics, ""), "no anonymous role")
	assert.Equal(t, http.StatusUnauthorized, get(topics, "not-a-jwt"))
	assert.Equal(t, http.StatusOK, get(topics, hs256(key, `{"sub":"alice"}`)))
	assert.Equal(t, http.StatusForbidden, get(topics, hs256(key, `{"sub":"mallory"}`)))
}
