package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

var uuidLine = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestPublishAndTail(t *testing.T) {
	b := pulsartest.NewBroker(t)
	url := "--url=" + b.URL()

	code, stdout, stderr := runBQ(t, "publish", url, "--topic", "orders", "--urn", "urn:babel:orders:created",
		"--data", `{"order_id":1042}`, "--header", "traceparent=00-abc-def-01", "--header", "bq-job=spoofed",
		"--key", "customer-7", "--ordering-key", "order-1042", "--count", "2")
	require.Equal(t, exitOK, code, stderr)
	ids := strings.Fields(stdout)
	require.Len(t, ids, 2)
	for _, id := range ids {
		assert.Regexp(t, uuidLine, id)
	}

	file := filepath.Join(t.TempDir(), "data.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"order_id": 9007199254740993, "rate": 1.0}`), 0o600))
	code, _, stderr = runBQ(t, "publish", url, "--topic", "orders", "--urn", "urn:babel:orders:paid",
		"--data", "@"+file, "--queue", "billing")
	require.Equal(t, exitOK, code, stderr)

	// A reader prints everything and acks nothing; run it twice to prove it.
	for range 2 {
		code, stdout, stderr = runBQ(t, "tail", url, "--topic", "orders", "--wait", "500ms")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, 3, strings.Count(stdout, "--- "), stdout)
		assert.Contains(t, stdout, "  bq-job: urn:babel:orders:created\n", "the contract property wins over a header")
		assert.Contains(t, stdout, "  traceparent: 00-abc-def-01\n")
		assert.Equal(t, 2, strings.Count(stdout, "  key: customer-7\n  ordering key: order-1042\n"), stdout)
		assert.Contains(t, stdout, "  verdict: accepted urn:babel:orders:created, attempts 0\n")
		assert.Contains(t, stdout, `"order_id": 9007199254740993`, "data text kept exactly")
		assert.Contains(t, stdout, `"rate": 1.0`)
		assert.Contains(t, stdout, `"queue": "billing"`)
		assert.True(t, strings.HasSuffix(stdout, "3 message(s)\n"), stdout)
	}

	// With a subscription, printed messages are acked: a second run sees nothing.
	code, stdout, stderr = runBQ(t, "tail", url, "--topic", "orders", "--subscription", "ops", "-n", "3", "--wait", "2s")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "3 message(s)\n"), stdout)
	assert.Equal(t, 0, b.Backlog("orders", "ops"))
	code, stdout, stderr = runBQ(t, "tail", url, "--topic", "orders", "--subscription", "ops", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "0 message(s)\n", stdout)
}

func TestPublishErrors(t *testing.T) {
	code, _, stderr := runBQ(t, "publish", "--topic", "orders")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq publish: --topic and --urn are required\n", stderr)

	code, _, stderr = runBQ(t, "publish", "--topic", "orders", "--urn", "urn:x", "--data", "[1,2]")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq publish: data (--data) must be a JSON object, got an array at line 1, column 1 (offset 0)\n", stderr)

	code, _, stderr = runBQ(t, "publish", "--topic", "orders", "--urn", "urn:x", "--data", "@/does/not/exist")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq publish: read data from /does/not/exist: no such file or directory\n", stderr)

	code, _, stderr = runBQ(t, "publish", "--topic", "orders", "--urn", "urn:x", "--header", "novalue")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `header "novalue" is not key=value`)

	// Nothing listens on port 1: one clear line, non-zero exit (--connect-timeout is the old
	// name of --timeout).
	code, _, stderr = runBQ(t, "publish", "--url", "pulsar://127.0.0.1:1", "--connect-timeout", "300ms",
		"--topic", "orders", "--urn", "urn:x")
	assert.Equal(t, exitFail, code)
	assert.Equal(t, "bq publish: pulsar: connect to pulsar://127.0.0.1:1: connection refused\n", stderr)

	code, _, stderr = runBQ(t, "tail", "--topic", "orders", "--from", "middle")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq tail: invalid value \"middle\" for flag -from: must be earliest or latest; see `bq tail --help`\n", stderr)
}
