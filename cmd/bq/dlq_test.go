package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// seedDeadLetters writes two annotated copies (different URNs) and one poison copy to
// orders.dlq, as a consumer would.
func seedDeadLetters(t *testing.T, url string) {
	t.Helper()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: bqpulsar.NewClientLogger(nil)})
	require.NoError(t, err)
	defer client.Close()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders.dlq"})
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	at := time.UnixMilli(1767225600000)
	for i, urn := range []string{"urn:babel:orders:created", "urn:babel:orders:cancelled"} {
		env, err := envelope.Make(urn, map[string]any{"order_id": 100 + i}, envelope.WithQueue("orders"))
		require.NoError(t, err)
		dead := env.ToDeadLetter(envelope.DeadLetterInfo{
			Reason: envelope.ReasonFailed, Cause: errors.New("gateway timeout"), Attempts: 3, FailedAt: at,
		})
		body, err := dead.Encode()
		require.NoError(t, err)
		props := bqpulsar.ProjectProperties(dead)
		_, err = p.Send(ctx, &apulsar.ProducerMessage{Payload: body, Properties: props})
		require.NoError(t, err)
	}
	poison, err := envelope.PoisonCopy([]byte(`{"JOB":"x"}`), envelope.DeadLetterInfo{
		Reason: envelope.ReasonPoison, Cause: errors.New("no urn"), Queue: "orders", Attempts: 1, FailedAt: at,
	})
	require.NoError(t, err)
	_, err = p.Send(ctx, &apulsar.ProducerMessage{Payload: poison})
	require.NoError(t, err)
}

func TestDLQCommands(t *testing.T) {
	b := pulsartest.NewBroker(t)
	url := "--url=" + b.URL()
	seedDeadLetters(t, b.URL())

	code, stdout, stderr := runBQ(t, "dlq", "list", url, "--topic", "orders.dlq", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 4, stdout)
	assert.Contains(t, lines[0], "reason=failed urn=urn:babel:orders:created attempts=3 original_queue=orders failed_at=2026-01-01T00:00:00Z error=\"gateway timeout\"")
	assert.Contains(t, lines[2], "reason=poison urn=- attempts=1 original_queue=orders")
	assert.Equal(t, "3 message(s)", lines[3])

	code, stdout, stderr = runBQ(t, "dlq", "peek", url, "--topic", "orders.dlq", "-n", "1", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "  bq-job: urn:babel:orders:created\n")
	assert.Contains(t, stdout, `"dead_letter": {`)
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq", "--dry-run", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 2, skipped 0 (filters), poison 1, raw 0\n")
	assert.Equal(t, 3, b.Backlog("orders.dlq", "bq-redrive"), "a dry run acknowledges nothing")
	assert.Zero(t, b.Stats("orders").Messages, "a dry run publishes nothing")

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq",
		"--urn", "urn:babel:orders:cancelled", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 1, skipped 1 (filters), poison 1, raw 0\n")
	assert.Equal(t, 2, b.Backlog("orders.dlq", "bq-redrive"), "only the moved copy is acknowledged")
	assert.Equal(t, 1, b.Stats("orders").Messages)

	// The redriven envelope is back on orders: no dead_letter block, attempts 0.
	code, stdout, stderr = runBQ(t, "tail", url, "--topic", "orders", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "verdict: accepted urn:babel:orders:cancelled, attempts 0\n")
	assert.NotContains(t, stdout, "dead_letter")
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)

	code, _, stderr = runBQ(t, "dlq", "list")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq dlq list: --topic is required\n", stderr)
	code, _, stderr = runBQ(t, "dlq", "purge")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown subcommand "purge"`)
}
