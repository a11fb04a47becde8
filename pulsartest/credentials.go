package pulsartest

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
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TestPKI is a throw-away certificate authority with a broker certificate (for localhost and
// 127.0.0.1) and a client certificate, written to a directory, for tests of TLS and of TLS
// client authentication against [WithTLS] and [WithAuth]. Nothing of it is meant to outlive
// the test that made it.
type TestPKI struct {
	// CAFile is the CA certificate in PEM, for ClientOptions.TLSTrustCertsFilePath.
	CAFile string
	// ClientCertFile and ClientKeyFile are the client's certificate and key in PEM.
	ClientCertFile, ClientKeyFile string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
	// Server is the broker's certificate, signed by the CA.
	Server tls.Certificate
}

// NewTestPKI creates a [TestPKI] in dir (a test's t.TempDir()), with a client certificate
// whose common name, the role of TLS authentication, is clientCN. The certificates are valid
// from an hour ago for an hour.
func NewTestPKI(dir, clientCN string) (*TestPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pulsartest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: CA certificate: %w", err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, hosts bool) ([]byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("key: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if hosts {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate: %w", err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, fmt.Errorf("key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	p := &TestPKI{Pool: x509.NewCertPool(), CAFile: filepath.Join(dir, "ca.pem")}
	p.Pool.AddCert(ca)
	if err := os.WriteFile(p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, fmt.Errorf("pulsartest: %w", err)
	}
	certPEM, keyPEM, err := issue(2, "localhost", x509.ExtKeyUsageServerAuth, true)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: server certificate: %w", err)
	}
	if p.Server, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("pulsartest: server certificate: %w", err)
	}
	certPEM, keyPEM, err = issue(3, clientCN, x509.ExtKeyUsageClientAuth, false)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: client certificate: %w", err)
	}
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(p.ClientCertFile, certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("pulsartest: %w", err)
	}
	if err := os.WriteFile(p.ClientKeyFile, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("pulsartest: %w", err)
	}
	return p, nil
}

// ServerConfig returns the broker's TLS configuration for [WithTLS] and [WithAdminTLS]: its
// certificate, and client certificates verified against the CA when given.
func (p *TestPKI) ServerConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Server}, ClientCAs: p.Pool, ClientAuth: tls.VerifyClientCertIfGiven,
		MinVersion: tls.VersionTLS12,
	}
}

// SignToken returns a JWT (HS256) for the claims, a JSON object such as
// `{"sub":"app","exp":1999999999}`, signed with secret: what [Auth].TokenSecret accepts.
func SignToken(secret []byte, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	unsigned := enc([]byte(`{"alg":"HS256"}`)) + "." + enc([]byte(claims))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc(mac.Sum(nil))
}
