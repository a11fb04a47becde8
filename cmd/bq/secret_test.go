package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// Sentinel tokens: neither may appear in any output of bq.
const (
	envSentinel  = "SENTINEL-ENV-TOKEN-3f9c1a"
	fileSentinel = "SENTINEL-FILE-TOKEN-8d2e7b"
)

// everyOutput is an invocation of every command for help, usage errors, bad values and
// connection failures.
func everyOutput(url string) [][]string {
	var cases [][]string
	commands := [][]string{
		{"publish", "--topic", "orders", "--urn", "urn:x"},
		{"tail", "--topic", "orders"},
		{"dlq", "list", "--topic", "orders.dlq"},
		{"dlq", "peek", "--topic", "orders.dlq"},
		{"dlq", "redrive", "--topic", "orders.dlq"},
	}
	for _, c := range commands {
		name := c[:1]
		if c[0] == "dlq" {
			name = c[:2]
		}
		cases = append(cases,
			append(append([]string{}, name...), "-h"),
			append(append([]string{}, name...), "--help"),
			append(append([]string{}, name...), "--bogus"),
			append(append([]string{}, name...), "--timeout", "-1s"),
			append(append([]string{}, name...), "extra-argument"),
			name, // missing --topic
			append(append([]string{}, c...), "--url", "pulsar://127.0.0.1:1", "-v"),
			append(append([]string{}, c...), "--url", "pulsar://nosuch.invalid", "-v"),
			append(append([]string{}, c...), "--url", url, "--timeout", "2s", "--wait", "100ms", "-v"),
		)
	}
	return append(cases,
		[]string{}, []string{"help"}, []string{"--bogus"}, []string{"nosuchcmd"}, []string{"version"},
		[]string{"dlq"}, []string{"dlq", "--help"}, []string{"dlq", "nosuch"},
		[]string{"conformance", "-h"}, []string{"conformance", "--bogus"}, []string{"broker", "-h"},
		[]string{"broker", "--bogus"},
	)
}

func assertNoSentinel(t *testing.T, url string) {
	t.Helper()
	for _, args := range everyOutput(url) {
		_, stdout, stderr := runBQ(t, args...)
		for _, s := range []string{envSentinel, fileSentinel} {
			assert.NotContains(t, stdout, s, "%v", args)
			assert.NotContains(t, stderr, s, "%v", args)
		}
	}
}

func TestNoOutputShowsTheToken(t *testing.T) {
	// The broker refuses both tokens, so the connection cases end with an authentication
	// failure, the error most likely to echo credentials.
	b := pulsartest.NewBroker(t, pulsartest.WithAuthToken("the-right-one"))
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(fileSentinel+"\n"), 0o600))
	t.Setenv("PULSAR_ADMIN_URL", "http://127.0.0.1:1") // dlq list and peek: refused, whatever listens on 8080

	t.Run("env", func(t *testing.T) {
		t.Setenv(envToken, envSentinel)
		t.Setenv(envTokenFile, "")
		assertNoSentinel(t, b.URL())
	})
	t.Run("env file", func(t *testing.T) {
		t.Setenv(envToken, "")
		t.Setenv(envTokenFile, file)
		assertNoSentinel(t, b.URL())
	})
	t.Run("both", func(t *testing.T) {
		t.Setenv(envToken, envSentinel)
		t.Setenv(envTokenFile, file)
		assertNoSentinel(t, b.URL())
	})
}

func TestTokenSources(t *testing.T) {
	b := pulsartest.NewBroker(t, pulsartest.WithAuthToken(fileSentinel))
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("  "+fileSentinel+"\n"), 0o600))
	tail := []string{"tail", "--url", b.URL(), "--topic", "orders", "--wait", "100ms"}
	accepted := func(args ...string) bool {
		code, _, stderr := runBQ(t, append(append([]string{}, tail...), args...)...)
		if code != exitOK {
			assert.Contains(t, stderr, "authentication failed", "%v", args)
		}
		return code == exitOK
	}

	t.Setenv(envToken, "")
	t.Setenv(envTokenFile, "")
	assert.False(t, accepted(), "no token")
	assert.True(t, accepted("--token-file", file), "--token-file, trimmed")
	assert.True(t, accepted("--token", fileSentinel))

	t.Setenv(envTokenFile, file)
	assert.True(t, accepted(), envTokenFile)
	t.Setenv(envToken, "wrong")
	assert.False(t, accepted(), envToken+" wins over "+envTokenFile)
	assert.True(t, accepted("--token-file", file), "a flag wins over the environment")

	// The help names the variables, never their values.
	code, _, stderr := runBQ(t, "tail", "-h")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stderr, envToken)
	assert.Contains(t, stderr, envTokenFile)
	assert.NotContains(t, stderr, "wrong")
}
