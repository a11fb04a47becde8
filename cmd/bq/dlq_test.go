package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The dlq command tests are dual-target (brokertest.Each): the same commands and assertions
// run against the embedded broker and, with PULSAR_URL and PULSAR_ADMIN_URL, against a real
// Apache Pulsar, whose state they check through the admin API.

// dlqEnv is a broker with the admin API, the connection flags for it, and the queue and
// dead-letter topic of one test (unique names: a real broker keeps other runs' topics).
type dlqEnv struct {
	tg        *brokertest.Target
	url       string // --url=…
	admin     string // --admin-url=…
	adminURL  string
	queue     string
	dlq       string
	wait      string // --wait for commands that stop when nothing more arrives
	readyLine string // what `bq subscription create` prints for the retention subscription
}

func newDLQEnv(t *testing.T, tg *brokertest.Target) *dlqEnv {
	t.Helper()
	adminURL := tg.Admin(t)
	q := tg.Topic(t, "orders")
	e := &dlqEnv{
		tg: tg, url: "--url=" + tg.URL, admin: "--admin-url=" + adminURL, adminURL: adminURL,
		queue: q, dlq: q + ".dlq", wait: "300ms",
	}
	if tg.Real() {
		e.wait = "2s" // a real broker may take longer than 300 ms to deliver the first message
	}
	e.readyLine = "subscription bq-dlq on " + e.dlq + ": ready (durable, kept from the earliest message)\n"
	return e
}

// createRetention creates the retention subscription bq-dlq on the dead-letter topic.
func (e *dlqEnv) createRetention(t *testing.T) {
	t.Helper()
	code, stdout, stderr := runBQ(t, "subscription", "create", e.url, "--topic", e.dlq, "--name", "bq-dlq")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, e.readyLine, stdout)
}

// state is what a read-only command must leave as it was: the test's topics and their
// subscriptions as the admin API shows them, and on the embedded broker its finer view.
func (e *dlqEnv) state(t *testing.T) brokerState {
	t.Helper()
	st := brokerState{Admin: brokertest.StateOf(t, e.adminURL, e.queue)}
	if b := e.tg.Broker; b != nil {
		st.Topics, st.Subs = b.Topics(), map[string]map[string]pulsartest.SubscriptionStats{}
		for _, topic := range st.Topics {
			st.Subs[topic] = b.Stats(topic).Subscriptions
		}
	}
	return st
}

func (e *dlqEnv) backlog(t *testing.T) int {
	t.Helper()
	return int(brokertest.Backlog(t, e.adminURL, e.dlq, "bq-dlq"))
}

// stored counts the messages a reader from the earliest position finds on topic.
func (e *dlqEnv) stored(t *testing.T, topic string) int {
	t.Helper()
	r, err := e.tg.Client(t).CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := r.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return n
		}
		require.NoError(t, err)
	}
}

// seedProducer returns a plain producer on topic, whose client and producer close when the
// test ends: what the seeding helpers write dead letters with.
func seedProducer(t *testing.T, url, topic string) apulsar.Producer {
	t.Helper()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: bqpulsar.NewClientLogger(nil)})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// seedDeadLetters writes two annotated copies (different URNs) and one poison copy to
// topic, as a consumer would, each in an entry of its own.
func seedDeadLetters(t *testing.T, url, topic string) {
	t.Helper()
	p := seedProducer(t, url, topic)
	for _, m := range deadLetterSeeds(t) {
		_, err := p.Send(context.Background(), m)
		require.NoError(t, err)
	}
}

// seedBatchedDeadLetters writes what seedDeadLetters writes as one batch: one entry of three
// messages.
func seedBatchedDeadLetters(t *testing.T, url, topic string) {
	t.Helper()
	p := seedProducer(t, url, topic)
	seeds := deadLetterSeeds(t)
	receipts := make(chan error, len(seeds))
	for _, m := range seeds {
		p.SendAsync(context.Background(), m, func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
			receipts <- err
		})
	}
	require.NoError(t, p.FlushWithCtx(context.Background()))
	for range seeds {
		require.NoError(t, <-receipts)
	}
}

// deadLetterSeeds returns the messages of seedDeadLetters.
func deadLetterSeeds(t *testing.T) []*apulsar.ProducerMessage {
	t.Helper()
	at := time.UnixMilli(1767225600000)
	var out []*apulsar.ProducerMessage
	for i, urn := range []string{"urn:babel:orders:created", "urn:babel:orders:cancelled"} {
		env, err := envelope.Make(urn, map[string]any{"order_id": 100 + i}, envelope.WithQueue("orders"))
		require.NoError(t, err)
		dead := env.ToDeadLetter(envelope.DeadLetterInfo{
			Reason: envelope.ReasonFailed, Cause: errors.New("gateway timeout"), Attempts: 3, FailedAt: at,
		})
		body, err := dead.Encode()
		require.NoError(t, err)
		out = append(out, &apulsar.ProducerMessage{Payload: body, Properties: bqpulsar.ProjectProperties(dead)})
	}
	poison, err := envelope.PoisonCopy([]byte(`{"JOB":"x"}`), envelope.DeadLetterInfo{
		Reason: envelope.ReasonPoison, Cause: errors.New("no urn"), Queue: "orders", Attempts: 1, FailedAt: at,
	})
	require.NoError(t, err)
	return append(out, &apulsar.ProducerMessage{Payload: poison})
}

// brokerState is what a read-only command must leave as it was (dlqEnv.state).
type brokerState struct {
	Admin  brokertest.State
	Topics []string                                           // embedded only
	Subs   map[string]map[string]pulsartest.SubscriptionStats // embedded only
}

func TestDLQCommands(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqCommands(t, newDLQEnv(t, tg)) })
}

func dlqCommands(t *testing.T, e *dlqEnv) {
	url, admin := e.url, e.admin
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	before := e.state(t)
	require.Equal(t, []string{e.dlq}, before.Admin.Topics, "the admin API lists the test's topic")

	code, stdout, stderr := runBQ(t, "dlq", "list", url, admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 4, stdout)
	assert.Contains(t, lines[0], "reason=failed urn=urn:babel:orders:created attempts=3 original_queue=orders failed_at=2026-01-01T00:00:00Z error=\"gateway timeout\"")
	assert.Contains(t, lines[2], "reason=poison urn=- attempts=1 original_queue=orders")
	assert.Equal(t, "3 message(s)", lines[3])

	code, stdout, stderr = runBQ(t, "dlq", "peek", admin, "--topic", e.dlq, "-n", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "  bq-job: urn:babel:orders:created\n")
	assert.Contains(t, stdout, `"dead_letter": {`)
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)

	code, stdout, stderr = runBQ(t, "dlq", "redrive", admin, "--topic", e.dlq, "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 2, skipped 0 (filters), poison 1, raw 0\n")
	assert.Equal(t, before, e.state(t), "list, peek and a dry run change no topic, subscription or backlog")
	assert.Equal(t, 3, e.backlog(t))

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", e.dlq,
		"--urn", "urn:babel:orders:cancelled", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 1, skipped 1 (filters), poison 1, raw 0\n")
	assert.Equal(t, 2, e.backlog(t), "only the moved copy is acknowledged")
	assert.Equal(t, []string{"bq-dlq"}, brokertest.Subscriptions(t, e.adminURL, e.dlq), "no other subscription")
	assert.Equal(t, 1, e.stored(t, e.queue))

	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stdout, "cancelled", "a redriven dead letter is no longer listed")
	assert.True(t, strings.HasSuffix(stdout, "2 message(s)\n"), stdout)

	// The redriven envelope is back on the queue: no dead_letter block, attempts 0. A tail
	// without --subscription reads and acknowledges nothing.
	before = e.state(t)
	code, stdout, stderr = runBQ(t, "tail", url, "--topic", e.queue, "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "verdict: accepted urn:babel:orders:cancelled, attempts 0\n")
	assert.NotContains(t, stdout, "dead_letter")
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)
	assert.Equal(t, before, e.state(t), "tail creates and acknowledges nothing")

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

// TestDLQPeekRawPrintsThePayloadAsItIs: bq dlq peek escapes a dead letter's payload, and with
// --raw prints its bytes as they are, control characters and invalid UTF-8 included. (The
// hostile key and properties of sendHostile are left out: the embedded broker's admin API
// would put them in HTTP headers as they are, which an HTTP client refuses to read.)
func TestDLQPeekRawPrintsThePayloadAsItIs(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqPeekRawPrintsThePayloadAsItIs(t, newDLQEnv(t, tg)) })
}

func dlqPeekRawPrintsThePayloadAsItIs(t *testing.T, e *dlqEnv) {
	e.createRetention(t)
	payload := "not json " + csi + osc + "\xff"
	_, err := seedProducer(t, e.tg.URL, e.dlq).Send(context.Background(), &apulsar.ProducerMessage{Payload: []byte(payload)})
	require.NoError(t, err)

	code, stdout, stderr := runBQ(t, "dlq", "peek", e.admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assertNoControl(t, stdout)
	assert.Contains(t, stdout, fmt.Sprintf("\n  %q\n", payload), "escaped by default")

	code, stdout, stderr = runBQ(t, "dlq", "peek", e.admin, "--topic", e.dlq, "--raw")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "\n  "+payload+"\n", "--raw: the payload's bytes")
	assert.True(t, strings.HasSuffix(stdout, "1 message(s)\n"), stdout)
}

func TestDLQListOfAMissingTopicCreatesNothing(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqListOfAMissingTopicCreatesNothing(t, newDLQEnv(t, tg)) })
}

func dlqListOfAMissingTopicCreatesNothing(t *testing.T, e *dlqEnv) {
	code, stdout, stderr := runBQ(t, "dlq", "list", e.admin, "--topic", e.dlq)
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, fmt.Sprintf(`bq dlq list: dlq: subscription "bq-dlq" on %q: `, e.dlq))
	assert.Contains(t, stderr, "subscription not found; fix: ")
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line")
	code, _, _ = runBQ(t, "dlq", "redrive", e.admin, "--topic", e.dlq, "--dry-run")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, e.state(t).Admin.Topics, "no topic created")
	if b := e.tg.Broker; b != nil {
		assert.Empty(t, b.Topics(), "no topic created")
	}
}

func TestDLQRedriveThreeOfSevenThenListShowsFour(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		dlqRedriveThreeOfSevenThenListShowsFour(t, newDLQEnv(t, tg))
	})
}

func dlqRedriveThreeOfSevenThenListShowsFour(t *testing.T, e *dlqEnv) {
	url, admin := e.url, e.admin
	e.createRetention(t)
	for range 3 {
		seedDeadLetters(t, e.tg.URL, e.dlq) // 6 annotated, 3 poison
	}
	code, stdout, stderr := runBQ(t, "dlq", "redrive", admin, "--topic", e.dlq, "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "would move 6, skipped 0 (filters), poison 3, raw 0\n")
	code, stdout, stderr = runBQ(t, "dlq", "purge", url, "--topic", e.dlq, "--reason", "poison", "-n", "2", "--yes", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "purged 2, skipped ")
	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "7 message(s)\n"), stdout)

	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", e.dlq, "-n", "3", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 3, ")
	code, stdout, stderr = runBQ(t, "dlq", "list", admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasSuffix(stdout, "4 message(s)\n"), stdout)
}

func TestDLQRedriveKeepsTheRoutingURN(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqRedriveKeepsTheRoutingURN(t, newDLQEnv(t, tg)) })
}

func dlqRedriveKeepsTheRoutingURN(t *testing.T, e *dlqEnv) {
	url, admin := e.url, e.admin
	e.createRetention(t)
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: e.tg.URL, Logger: bqpulsar.NewClientLogger(nil)})
	require.NoError(t, err)
	defer client.Close()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1}, envelope.WithQueue("orders"))
	require.NoError(t, err)
	dead := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonFailed, Cause: errors.New("boom"), Attempts: 3})
	payload, err := dead.Encode()
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(dead)
	props["bq-job"] = "urn:babel:orders:legacy-created" // the routing decision, kept by the consumer
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: e.dlq})
	require.NoError(t, err)
	_, err = p.Send(context.Background(), &apulsar.ProducerMessage{Payload: payload, Properties: props})
	require.NoError(t, err)
	p.Close()

	code, stdout, stderr := runBQ(t, "dlq", "list", admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "urn=urn:babel:orders:legacy-created body_urn=urn:babel:orders:created ")
	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", e.dlq, "--urn", "urn:babel:orders:created", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 0, skipped 1 (filters)", "the filter is on the routing URN")
	code, stdout, stderr = runBQ(t, "dlq", "redrive", url, "--topic", e.dlq, "--urn", "urn:babel:orders:legacy-created", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "moved 1, ")

	c, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: e.queue, SubscriptionName: "check", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
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
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { dlqPurgeNeedsConfirmation(t, newDLQEnv(t, tg)) })
}

func dlqPurgeNeedsConfirmation(t *testing.T, e *dlqEnv) {
	url := e.url
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	code, stdout, stderr := runBQ(t, "dlq", "purge", url, "--topic", e.dlq)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "add --yes to confirm")
	assert.Equal(t, 3, e.backlog(t))
	code, stdout, stderr = runBQ(t, "dlq", "purge", url, "--topic", e.dlq, "--yes", "--wait", e.wait)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "purged 3, skipped 0 (filters)\n")
	assert.Zero(t, e.backlog(t))
	assert.Equal(t, []string{"bq-dlq"}, brokertest.Subscriptions(t, e.adminURL, e.dlq), "the subscription stays")
}

func TestSubscriptionCreate(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { subscriptionCreate(t, newDLQEnv(t, tg)) })
	subscriptionCreateRefusesBadArguments(t)
}

func subscriptionCreate(t *testing.T, e *dlqEnv) {
	brokertest.CreatePartitioned(t, e.adminURL, e.queue, 2)
	code, stdout, stderr := runBQ(t, "subscription", "create", e.url, "--topic", e.queue, "--name", "workers", "--type", "key_shared")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "ready")
	assert.Equal(t, []string{"workers"}, brokertest.Subscriptions(t, e.adminURL, e.queue+"-partition-0"))
	assert.Equal(t, []string{"workers"}, brokertest.Subscriptions(t, e.adminURL, e.queue+"-partition-1"))
}

// subscriptionCreateRefusesBadArguments: every case fails before it connects.
func subscriptionCreateRefusesBadArguments(t *testing.T) {
	t.Helper()

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
	code, _, _ := runBQ(t, "subscription")
	assert.Equal(t, exitUsage, code)
	code, stdout, _ := runBQ(t, "subscription", "--help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "bq subscription create --topic TOPIC --name NAME")
}

// TestDLQReadLeavesNoConnections: list and a dry run close their admin connections when they
// end. The broker would keep them open, with two goroutines each of the process: a real broker
// outlives the command, so goleak failed this package against one. Not parallel: goleak sees
// every goroutine of the process.
func TestDLQReadLeavesNoConnections(t *testing.T) {
	e := newDLQEnv(t, brokertest.Embedded(t)) // the embedded broker, like a real one, keeps idle connections open
	e.createRetention(t)
	seedDeadLetters(t, e.tg.URL, e.dlq)
	before := goleak.IgnoreCurrent()
	code, _, stderr := runBQ(t, "dlq", "list", e.admin, "--topic", e.dlq)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBQ(t, "dlq", "redrive", e.admin, "--topic", e.dlq, "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, goleak.Find(leaktest.Options(before)...))
}
