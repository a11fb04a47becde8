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

// dlqBroker starts a broker with the admin API and returns it with the connection flags.
func dlqBroker(t *testing.T) (b *pulsartest.Broker, url, admin string) {
	t.Helper()
	b = pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	return b, "--url=" + b.URL(), "--admin-url=" + b.AdminURL()
}

// brokerState is what a read-only command must leave as it was.
type brokerState struct {
	Topics []string
	Subs   map[string]map[string]pulsartest.SubscriptionStats
}

func stateOf(b *pulsartest.Broker) brokerState {
	st := brokerState{Topics: b.Topics(), Subs: map[string]map[string]pulsartest.SubscriptionStats{}}
	for _, topic := range st.Topics {
		st.Subs[topic] = b.Stats(topic).Subscriptions
	}
	return st
}

func TestDLQCommands(t *testing.T) {
	b, url, admin := dlqBroker(t)
	code, stdout, stderr := runBQ(t, "subscription", "create", url, "--topic", "orders.dlq", "--name", "bq-dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "subscription bq-dlq on orders.dlq: ready (durable, kept from the earliest message)\n", stdout)
	seedDeadLetters(t, b.URL())
	before := stateOf(b)

	code, stdout, stderr = runBQ(t, "dlq", "list", url, admin, "--topic", "orders.dlq")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 4, stdout)
	assert.Contains(t, lines[0], "reason=failed urn=urn:babel:orders:created attempts=3 original_queue=orders failed_at=2026-01-01T00:00:00Z error=\"gateway timeout\"")
	assert.Contains(t, lines[2], "reason=poison urn=- attempts=1 original_queue=orders")
	assert.Equal(t, "3 message(s)", lines[3])

	code, stdout, stderr = runBQ(t, "dlq", "peek", admin, "--topic", "orders.dlq", "-n", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "  bq-job: urn:babel:orders:created\n")
	assert.Contains(t, stdout, `"dead_letter": {`)
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)

	code, stdout, stderr = runBQ(t, "dlq", "redrive", admin, "--topic", "orders.dlq", "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 2, skipped 0 (filters), poison 1, raw 0\n")
	assert.Equal(t, before, stateOf(b), "list, peek and a dry run change no topic, subscription or backlog")
	assert.Equal(t, 3, b.Backlog("orders.dlq", "bq-dlq"))

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq",
		"--urn", "urn:babel:orders:cancelled", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 1, skipped 1 (filters), poison 1, raw 0\n")
	assert.Equal(t, 2, b.Backlog("orders.dlq", "bq-dlq"), "only the moved copy is acknowledged")
	assert.Equal(t, []string{"bq-dlq"}, b.Subscriptions("orders.dlq"), "no other subscription")
	assert.Equal(t, 1, b.Stats("orders").Messages)

	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", "orders.dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stdout, "cancelled", "a redriven dead letter is no longer listed")
	assert.True(t, strings.HasSuffix(stdout, "2 message(s)\n"), stdout)

	// The redriven envelope is back on orders: no dead_letter block, attempts 0.
	code, stdout, stderr = runBQ(t, "tail", url, "--topic", "orders", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "verdict: accepted urn:babel:orders:cancelled, attempts 0\n")
	assert.NotContains(t, stdout, "dead_letter")
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)

	code, _, stderr = runBQ(t, "dlq", "list")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "bq dlq list: --topic is required\n", stderr)
	code, _, stderr = runBQ(t, "dlq", "list", "--topic", "a/b")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "bq dlq list: --topic: dlq: invalid topic")
	code, _, stderr = runBQ(t, "dlq", "list", "--topic", "orders.dlq", "--subscription", "a b")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--subscription: dlq: subscription")
	code, _, stderr = runBQ(t, "dlq", "list", "--topic", "orders.dlq", "--admin-url", "pulsar://x:6650")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "the scheme must be http or https")
}

func TestDLQListOfAMissingTopicCreatesNothing(t *testing.T) {
	b, _, admin := dlqBroker(t)
	code, stdout, stderr := runBQ(t, "dlq", "list", admin, "--topic", "orders.dlq")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `bq dlq list: dlq: subscription "bq-dlq" on "orders.dlq": `)
	assert.Contains(t, stderr, "subscription not found; fix: ")
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line")
	code, _, _ = runBQ(t, "dlq", "redrive", admin, "--topic", "orders.dlq", "--dry-run")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, b.Topics(), "no topic created")
}

func TestDLQRedriveThreeOfSevenThenListShowsFour(t *testing.T) {
	b, url, admin := dlqBroker(t)
	code, _, stderr := runBQ(t, "subscription", "create", url, "--topic", "orders.dlq", "--name", "bq-dlq")
	require.Equal(t, exitOK, code, stderr)
	for range 3 {
		seedDeadLetters(t, b.URL()) // 6 annotated, 3 poison
	}
	code, stdout, stderr := runBQ(t, "dlq", "redrive", admin, "--topic", "orders.dlq", "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 6, skipped 0 (filters), poison 3, raw 0\n")
	code, stdout, stderr = runBQ(t, "dlq", "purge", url, "--topic", "orders.dlq", "--reason", "poison", "-n", "2", "--yes", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "purged 2, skipped ")
	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", "orders.dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "7 message(s)\n"), stdout)

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq", "-n", "3", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 3, ")
	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", "orders.dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "4 message(s)\n"), stdout)
}

func TestDLQRedriveKeepsTheRoutingURN(t *testing.T) {
	b, url, admin := dlqBroker(t)
	code, _, stderr := runBQ(t, "subscription", "create", url, "--topic", "orders.dlq", "--name", "bq-dlq")
	require.Equal(t, exitOK, code, stderr)
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: b.URL(), Logger: bqpulsar.NewClientLogger(nil)})
	require.NoError(t, err)
	defer client.Close()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1}, envelope.WithQueue("orders"))
	require.NoError(t, err)
	dead := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonFailed, Cause: errors.New("boom"), Attempts: 3})
	payload, err := dead.Encode()
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(dead)
	props["bq-job"] = "urn:babel:orders:legacy-created" // the routing decision, kept by the consumer
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders.dlq"})
	require.NoError(t, err)
	_, err = p.Send(context.Background(), &apulsar.ProducerMessage{Payload: payload, Properties: props})
	require.NoError(t, err)
	p.Close()

	code, stdout, stderr := runBQ(t, "dlq", "list", admin, "--topic", "orders.dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "urn=urn:babel:orders:legacy-created body_urn=urn:babel:orders:created ")
	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq", "--urn", "urn:babel:orders:created", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 0, skipped 1 (filters)", "the filter is on the routing URN")
	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", "orders.dlq", "--urn", "urn:babel:orders:legacy-created", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 1, ")

	c, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: "orders", SubscriptionName: "check", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := c.Receive(ctx)
	require.NoError(t, err)
	assert.Equal(t, "urn:babel:orders:legacy-created", m.Properties()["bq-job"], "the same handler gets it again")
	assert.Equal(t, "0", m.Properties()["bq-attempts"])
}

func TestDLQPurgeNeedsConfirmation(t *testing.T) {
	b, url, _ := dlqBroker(t)
	code, _, stderr := runBQ(t, "subscription", "create", url, "--topic", "orders.dlq", "--name", "bq-dlq")
	require.Equal(t, exitOK, code, stderr)
	seedDeadLetters(t, b.URL())
	code, stdout, stderr := runBQ(t, "dlq", "purge", url, "--topic", "orders.dlq")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "add --yes to confirm")
	assert.Equal(t, 3, b.Backlog("orders.dlq", "bq-dlq"))
	code, stdout, stderr = runBQ(t, "dlq", "purge", url, "--topic", "orders.dlq", "--yes", "--wait", "300ms")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "purged 3, skipped 0 (filters)\n")
	assert.Zero(t, b.Backlog("orders.dlq", "bq-dlq"))
	assert.Equal(t, []string{"bq-dlq"}, b.Subscriptions("orders.dlq"), "the subscription stays")
}

func TestSubscriptionCreate(t *testing.T) {
	b, url, _ := dlqBroker(t)
	require.NoError(t, b.CreatePartitionedTopic("orders", 2))
	code, stdout, stderr := runBQ(t, "subscription", "create", url, "--topic", "orders", "--name", "workers", "--type", "key_shared")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "ready")
	assert.Equal(t, []string{"workers"}, b.Subscriptions("orders-partition-0"))
	assert.Equal(t, []string{"workers"}, b.Subscriptions("orders-partition-1"))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"subscription", "create", "--name", "x"}, "bq subscription create: --topic is required\n"},
		{[]string{"subscription", "create", "--topic", "t"}, "bq subscription create: --name is required\n"},
		{[]string{"subscription", "create", "--topic", "t", "--name", "a b"}, "bq subscription create: --name: dlq: subscription \"a b\": the name has white space or a control character: dlq: invalid subscription name\n"},
		{[]string{"subscription", "create", "--topic", "a/b", "--name", "x"}, "bq subscription create: --topic: dlq: invalid topic \"a/b\": a topic is name or tenant/namespace/name\n"},
		{[]string{"subscription", "create", "--topic", "t", "--name", "x", "--type", "bogus"}, "invalid value \"bogus\" for flag -type"},
		{[]string{"subscription", "delete"}, `unknown subcommand "delete"`},
	} {
		code, _, stderr := runBQ(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %v", tc.args)
	}
	code, _, _ = runBQ(t, "subscription")
	assert.Equal(t, exitUsage, code)
	code, stdout, _ = runBQ(t, "subscription", "--help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "bq subscription create --topic TOPIC --name NAME")
}
