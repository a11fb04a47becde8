package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The tests here set environment variables (t.Setenv), so none of them is parallel. They run
// against the embedded broker: what they check is where bq takes its settings from.

// clearConnEnv empties the connection variables this process may have been started with, so
// that each test sets only the one it checks.
func clearConnEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{envURL, envToken, envTokenFile, envTrustCerts, envAllowInsecure, envAdminURL} {
		t.Setenv(name, "")
	}
}

// TestPulsarURLFromTheEnvironment: without --url, bq connects to PULSAR_URL; the message is on
// that broker. --url wins over it.
func TestPulsarURLFromTheEnvironment(t *testing.T) {
	clearConnEnv(t)
	b := pulsartest.NewBroker(t)
	t.Setenv(envURL, b.URL())
	code, _, stderr := runBQ(t, "publish", "--topic", "orders", "--urn", "urn:babel:orders:created", "--timeout", "2s")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, 1, b.Stats("orders").Messages, "published to the broker PULSAR_URL names")

	refused := "pulsar://" + brokertest.RefusedAddr(t)
	code, _, stderr = runBQ(t, "publish", "--url", refused, "--topic", "orders", "--urn", "urn:babel:orders:created", "--timeout", "2s")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, refused, "--url wins over "+envURL)
	assert.Equal(t, 1, b.Stats("orders").Messages)
}

// TestTrustCertsFromTheEnvironment: without --tls-trust-certs, bq trusts the CA file
// PULSAR_TLS_TRUST_CERTS_FILE names; without either, the broker's certificate is refused.
func TestTrustCertsFromTheEnvironment(t *testing.T) {
	clearConnEnv(t)
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	b, err := pulsartest.Start(t.Context(), pulsartest.WithTLS("localhost:0", pki.ServerConfig()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	publish := []string{"publish", "--url", b.TLSURL(), "--topic", "orders", "--urn", "urn:babel:orders:created", "--timeout", "2s"}

	code, _, stderr := runBQ(t, publish...)
	require.Equal(t, exitFail, code, "an unknown CA is refused")
	assert.Contains(t, stderr, "certificate")

	t.Setenv(envTrustCerts, pki.CAFile)
	code, _, stderr = runBQ(t, publish...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, 1, b.Stats("orders").Messages)
}

// TestAdminURLFromTheEnvironment: without --admin-url, bq dlq reads the admin API PULSAR_ADMIN_URL
// names (the default, 127.0.0.1:8080, is not this broker's); --admin-url wins over it.
func TestAdminURLFromTheEnvironment(t *testing.T) {
	clearConnEnv(t)
	e := newDLQEnv(t, brokertest.Embedded(t))
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)

	t.Setenv(envAdminURL, e.adminURL)
	code, stdout, stderr := runBQ(t, "dlq", "list", "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "3 message(s)\n"), stdout)

	refused := "http://" + brokertest.RefusedAddr(t)
	t.Setenv(envAdminURL, refused)
	code, stdout, stderr = runBQ(t, "dlq", "list", "--topic", e.dlq, e.admin)
	require.Equal(t, exitOK, code, "--admin-url wins over %s: %s", envAdminURL, stderr)
	assert.True(t, strings.HasSuffix(stdout, "3 message(s)\n"), stdout)
	code, _, stderr = runBQ(t, "dlq", "list", "--topic", e.dlq)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, strings.TrimPrefix(refused, "http://"), "the environment's URL is the one used")
}
