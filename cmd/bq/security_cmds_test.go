package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestPublishAndTailOverTLSWithATokenFile: bq's TLS and token pass-through end to end, on a
// broker that requires both; a wrong token is one line naming the cause, and the token
// itself is printed nowhere.
func TestPublishAndTailOverTLSWithATokenFile(t *testing.T) {
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "ops")
	require.NoError(t, err)
	secret := []byte("0123456789abcdef0123456789abcdef")
	b, err := pulsartest.Start(t.Context(),
		pulsartest.WithTLS("localhost:0", pki.ServerConfig()),
		pulsartest.WithAuth(pulsartest.Auth{TokenSecret: secret}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	token := pulsartest.SignToken(secret, `{"sub":"ops"}`)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	conn := []string{"--url=" + b.TLSURL(), "--tls-trust-certs", pki.CAFile, "--token-file", tokenFile}

	code, stdout, stderr := runBQ(t, append([]string{
		"publish", "--topic", "orders", "--urn", "urn:babel:orders:created",
		"--data", `{"order_id":7}`,
	}, conn...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, uuidLine, strings.TrimSpace(stdout))

	code, stdout, stderr = runBQ(t, append([]string{"tail", "--topic", "orders", "--wait", "500ms"}, conn...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "verdict: accepted urn:babel:orders:created")
	assert.NotContains(t, stdout+stderr, token)

	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte(pulsartest.SignToken([]byte("another secret, another secret!!"), `{"sub":"ops"}`)), 0o600))
	code, stdout, stderr = runBQ(t, "publish", "--topic", "orders", "--urn", "urn:babel:x", "--url="+b.TLSURL(),
		"--tls-trust-certs", pki.CAFile, "--token-file", wrong, "--timeout", "2s")
	assert.NotEqual(t, exitOK, code)
	assert.Empty(t, stdout)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	assert.Contains(t, stderr, "authentication")
}
