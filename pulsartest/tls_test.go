package pulsartest_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

func newTestPKI(t *testing.T, clientCN string) *pulsartest.TestPKI {
	t.Helper()
	p, err := pulsartest.NewTestPKI(t.TempDir(), clientCN)
	require.NoError(t, err)
	return p
}

// hs256 signs claims as a JWT with key.
func hs256(key []byte, claims string) string { return pulsartest.SignToken(key, claims) }

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
	b := pulsartest.NewBroker(t, pulsartest.WithTLS("localhost:0", pki.ServerConfig()))
	require.True(t, strings.HasPrefix(b.TLSURL(), "pulsar+ssl://localhost:"), b.TLSURL())
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{
		URL: b.TLSURL(), TLSTrustCertsFilePath: pki.CAFile, TLSValidateHostname: true,
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
	b := pulsartest.NewBroker(t, pulsartest.WithTLS("localhost:0", pki.ServerConfig()),
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

	carol := apulsar.NewAuthenticationTLS(pki.ClientCertFile, pki.ClientKeyFile)
	require.NoError(t, tryProduce(t, apulsar.ClientOptions{
		URL: b.TLSURL(), TLSTrustCertsFilePath: pki.CAFile, Authentication: carol,
	}, private))
	assert.Equal(t, 3, b.Stats(private).Messages)
}

func TestAdminOverHTTPSWithAuth(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t, "carol")
	key := []byte("k")
	b := pulsartest.NewBroker(t, pulsartest.WithAdminTLS("localhost:0", pki.ServerConfig()),
		pulsartest.WithAuth(pulsartest.Auth{TokenSecret: key, Grants: map[string][]string{"acme/private": {"alice"}}}))
	assert.Empty(t, b.AdminURL(), "HTTPS only")
	require.True(t, strings.HasPrefix(b.AdminTLSURL(), "https://localhost:"), b.AdminTLSURL())
	hc := adminHTTP(t)
	tr, ok := hc.Transport.(*http.Transport)
	require.True(t, ok)
	tr.TLSClientConfig = &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
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
