package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTestCerts writes a throw-away CA and a broker certificate for 127.0.0.1 (generated per test, never
// committed) and returns the CA, certificate and key files.
func writeTestCerts(t *testing.T) (string, string, string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bq test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("broker.pem", "CERTIFICATE", der), write("broker-key.pem", "EC PRIVATE KEY", keyDER)
}

func signHS256(key []byte, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	unsigned := enc([]byte(`{"alg":"HS256"}`)) + "." + enc([]byte(claims))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc(mac.Sum(nil))
}

// bq broker with TLS and token authentication serves pulsar+ssl:// to a client with a valid token and
// refuses one without.
func TestBrokerCommandTLSAndToken(t *testing.T) {
	ca, cert, key := writeTestCerts(t)
	secret := filepath.Join(t.TempDir(), "secret.key")
	require.NoError(t, os.WriteFile(secret, []byte("0123456789abcdef"), 0o600))
	b := startBrokerCommand(t,
		"-addr", "127.0.0.1:0", "-tls-addr", "127.0.0.1:0", "-tls-cert-file", cert, "-tls-key-file", key,
		"-auth-token-secret-file", secret)
	tlsURL := b.url(t, "pulsar+ssl://")

	produce := func(auth apulsar.Authentication) error {
		c, err := apulsar.NewClient(apulsar.ClientOptions{
			URL: tlsURL, TLSTrustCertsFilePath: ca, Authentication: auth, Logger: plog.DefaultNopLogger(),
			OperationTimeout: 3 * time.Second, ConnectionTimeout: 3 * time.Second,
		})
		if err != nil {
			return err
		}
		defer c.Close()
		p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: "secure"})
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("x")})
		return err
	}
	require.NoError(t, produce(apulsar.NewAuthenticationToken(signHS256([]byte("0123456789abcdef"), `{"sub":"app"}`))))
	require.Error(t, produce(nil), "no anonymous role: a client without a token is refused")
	b.stop()
}

func TestBrokerCommandSecurityFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-tls-addr", "127.0.0.1:0"},
		{"-grant", "public/default=app"},
		{"-auth-basic", "nopassword"},
		{"-auth-tls", "-grant", "no-slash=app"},
		{"-key-shared-selector", "random"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, runBroker(t.Context(), args, &out, &errOut), "%v", args)
		assert.NotEmpty(t, errOut.String(), "%v", args)
	}
}
