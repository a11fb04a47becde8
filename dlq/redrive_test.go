package dlq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

const (
	urnA = "urn:babel:orders:created"
	urnB = "urn:babel:orders:cancelled"
	// annotated is a dead-letter copy written by another SDK, with unknown keys and an
	// exact big integer that must survive the redrive byte for byte.
	annotatedTmpl = `{"job":"URN","trace_id":"t-1","data":{"id":9007199254740993,"amount":1.0},` +
		`"meta":{"id":"MID","queue":"orders","lang":"php","schema_version":1,"created_at":1700000000000,"tenant":"acme"},` +
		`"attempts":3,"dead_letter":{"reason":"REASON","error":"boom","exception":"RuntimeException",` +
		`"failed_at":1700000001000,"original_queue":"orders","attempts":3,"lang":"php"},"x_custom":[1,2]}`
)

func annotated(urn, id string, reason envelope.Reason) []byte {
	return []byte(strings.NewReplacer("URN", urn, "MID", id, "REASON", string(reason)).Replace(annotatedTmpl))
}

// Most tests here are dual-target (eachTarget): the same body runs against the embedded
// broker and, with PULSAR_URL and PULSAR_ADMIN_URL, against a real Apache Pulsar, and checks
// the broker through the admin API on both (backlogs, subscriptions, the topic list). The few
// that need an embedded-only fault hook, or no broker semantics at all, use embeddedFixture.

type fixture struct {
	b        *pulsartest.Broker // nil on a real broker
	client   apulsar.Client
	adminURL string
	admin    *dlq.Admin
	queue    string
	dlq      string
}

// eachTarget runs body as a parallel subtest per target (brokertest.Each), each with its
// own fixture.
func eachTarget(t *testing.T, body func(t *testing.T, f *fixture)) {
	t.Helper()
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		body(t, newFixture(t, tg))
	})
}

// embeddedFixture is the fixture of a test that runs against the embedded broker only.
func embeddedFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, brokertest.Embedded(t))
}

func newFixture(t *testing.T, tg *brokertest.Target) *fixture {
	t.Helper()
	adminURL := tg.Admin(t)
	// An HTTP client whose keep-alive connections close when the test ends: a real broker
	// keeps them open after it, and goleak would count their goroutines.
	admin, err := dlq.NewAdmin(adminURL, dlq.WithHTTPClient(brokertest.HTTPClient(t)))
	require.NoError(t, err)
	q := tg.Topic(t, "redrive")
	return &fixture{b: tg.Broker, client: tg.Client(t), adminURL: adminURL, admin: admin, queue: q, dlq: q + ".dlq"}
}

// backlog is a subscription's backlog as the admin API reports it.
func (f *fixture) backlog(t *testing.T, topic, sub string) int {
	t.Helper()
	return int(brokertest.Backlog(t, f.adminURL, topic, sub))
}

// idleOrDefault is the idle timeout of a run that also holds the default: 0
// (DefaultIdleTimeout) on the embedded broker, which delivers at once, and
// brokertest.IdleTimeout on a real one, whose first delivery can outlast the default.
func (f *fixture) idleOrDefault() time.Duration {
	if f.b != nil {
		return 0
	}
	return brokertest.IdleTimeout
}

// subscriptions are a topic's subscriptions as the admin API reports them.
func (f *fixture) subscriptions(t *testing.T, topic string) []string {
	t.Helper()
	return brokertest.Subscriptions(t, f.adminURL, topic)
}

// stored returns the messages a reader from the earliest position finds on topic, waiting a
// second for each one.
func (f *fixture) stored(t *testing.T, topic string) []apulsar.Message {
	t.Helper()
	r, err := f.client.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	var out []apulsar.Message
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		m, err := r.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		require.NoError(t, err)
		out = append(out, m)
	}
}

// ensure creates the retention subscription, as a consumer does before its first dead letter.
func (f *fixture) ensure(t *testing.T) {
	t.Helper()
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription))
}

// brokerState is what a read-only operation must leave as it was. Admin is what the admin
// API shows on either broker: the test's topics, and for each its subscriptions with their
// backlog, unacknowledged messages and consumers. Embedded adds what only the embedded broker
// tells: pending and replay counts, and the messages stored.
type brokerState struct {
	Admin    brokertest.State
	Embedded *embeddedState // nil on a real broker
}

type embeddedState struct {
	Topics []string
	Subs   map[string]map[string]pulsartest.SubscriptionStats
	Stored map[string]int
}

func (f *fixture) state(t *testing.T) brokerState {
	t.Helper()
	st := brokerState{Admin: brokertest.StateOf(t, f.adminURL, f.queue)}
	if f.b == nil {
		return st
	}
	es := &embeddedState{Topics: f.b.Topics(), Subs: map[string]map[string]pulsartest.SubscriptionStats{}, Stored: map[string]int{}}
	for _, topic := range es.Topics {
		ts := f.b.Stats(topic)
		es.Subs[topic], es.Stored[topic] = ts.Subscriptions, ts.Messages
	}
	st.Embedded = es
	return st
}

// seed writes two annotated copies (urnA failed, urnB unknown_urn), a poison copy and a
// raw gate-rejection copy to the dead-letter topic.
func (f *fixture) seed(t *testing.T) {
	t.Helper()
	f.ensure(t)
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.dlq, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	poison, err := envelope.PoisonCopy([]byte(`{"job":`), envelope.DeadLetterInfo{Queue: "orders", Attempts: 1})
	require.NoError(t, err)
	msgs := []*apulsar.ProducerMessage{
		{Payload: annotated(urnA, "id-a", envelope.ReasonFailed), Key: "ka", Properties: map[string]string{
			"bq-job": urnA, "bq-attempts": "3", "bq-delay": "100", "traceparent": "tp-a",
		}},
		{Payload: annotated(urnB, "id-b", envelope.ReasonUnknownURN), Properties: map[string]string{"bq-job": urnB}},
		{Payload: poison, Properties: map[string]string{"bq-attempts": "1"}},
		{Payload: []byte(`{"job":"urn:x"}`), Properties: map[string]string{"bq-schema-version": "2"}},
	}
	for _, m := range msgs {
		_, err := p.Send(t.Context(), m)
		require.NoError(t, err)
	}
}

func (f *fixture) receiveTarget(t *testing.T, n int) []apulsar.Message {
	t.Helper()
	c, err := f.client.Subscribe(apulsar.ConsumerOptions{
		Topic: f.queue, SubscriptionName: "check", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	require.NoError(t, err)
	defer c.Close()
	out := make([]apulsar.Message, 0, n)
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		m, err := c.Receive(ctx)
		cancel()
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func TestPeekIsReadOnly(t *testing.T) {
	eachTarget(t, peekIsReadOnly)
}

func peekIsReadOnly(t *testing.T, f *fixture) {
	f.seed(t)
	before := f.state(t)
	require.Equal(t, []string{f.dlq}, before.Admin.Topics, "the admin API lists the test's topic")
	first, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, first, 4)
	assert.Equal(t, dlq.KindAnnotated, first[0].Kind)
	assert.Equal(t, urnA, first[0].URN)
	assert.Equal(t, urnA, first[0].RoutingURN)
	assert.Equal(t, envelope.ReasonFailed, first[0].Reason)
	assert.Equal(t, "ka", first[0].Key)
	assert.Equal(t, "tp-a", first[0].Properties["traceparent"])
	assert.False(t, first[0].PublishTime.IsZero())
	assert.Equal(t, envelope.ReasonUnknownURN, first[1].Reason)
	assert.Equal(t, dlq.KindPoison, first[2].Kind)
	assert.Equal(t, envelope.ReasonPoison, first[2].Reason)
	assert.Equal(t, dlq.KindRaw, first[3].Kind)
	assert.Equal(t, "2", first[3].Properties["bq-schema-version"])

	again, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq, Limit: 2})
	require.NoError(t, err)
	require.Len(t, again, 2, "limit")
	assert.Equal(t, first[0].Payload, again[0].Payload, "nothing consumed")
	assert.Equal(t, before, f.state(t), "no topic, subscription, backlog or consumer changed")
	assert.Equal(t, 4, f.backlog(t, f.dlq, dlq.DefaultSubscription))
}

func TestPeekOfAMissingTopicOrSubscriptionCreatesNothing(t *testing.T) {
	eachTarget(t, peekOfAMissingTopicOrSubscriptionCreatesNothing)
}

func peekOfAMissingTopicOrSubscriptionCreatesNothing(t *testing.T, f *fixture) {
	before := f.state(t)
	_, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	var se *dlq.SubscriptionError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, dlq.DefaultSubscription, se.Subscription)
	assert.Contains(t, se.Error(), "bq subscription create")
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	assert.Equal(t, before, f.state(t), "no topic created")
	assert.Empty(t, before.Admin.Topics)

	// A topic written to without the retention subscription: reported, still not created.
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.dlq})
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: annotated(urnA, "id-a", envelope.ReasonFailed)})
	require.NoError(t, err)
	p.Close()
	before = f.state(t)
	_, err = dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	assert.Contains(t, err.Error(), "no such subscription")
	assert.Equal(t, before, f.state(t), "no subscription created")
}

func TestDryRunIsReadOnly(t *testing.T) {
	eachTarget(t, dryRunIsReadOnly)
}

func dryRunIsReadOnly(t *testing.T, f *fixture) {
	f.seed(t)
	before := f.state(t)
	require.Equal(t, []string{f.dlq}, before.Admin.Topics, "the admin API lists the test's topic")
	dry, err := dlq.Redrive(t.Context(), nil, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin})
	require.NoError(t, err)
	assert.Len(t, dry.Moved, 2)
	assert.Len(t, dry.Poison, 1)
	assert.Len(t, dry.Raw, 1)
	dry, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin, URN: urnB})
	require.NoError(t, err)
	require.Len(t, dry.Moved, 1)
	assert.Equal(t, 1, dry.Skipped)
	assert.Equal(t, before, f.state(t), "a dry run publishes, acknowledges and creates nothing")
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions, "a dry run needs the admin API")
}

func TestRedriveMovesBackAndKeepsTheRest(t *testing.T) {
	eachTarget(t, redriveMovesBackAndKeepsTheRest)
}

func redriveMovesBackAndKeepsTheRest(t *testing.T, f *fixture) {
	f.seed(t)

	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnA, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	assert.Equal(t, 1, rep.Skipped)
	require.Len(t, rep.Poison, 1, "poison copies are reported")
	assert.Len(t, rep.Raw, 1)
	assert.Equal(t, 3, f.backlog(t, f.dlq, dlq.DefaultSubscription), "only the moved copy was acknowledged")

	got := f.receiveTarget(t, 1)[0]
	want := strings.Replace(string(annotated(urnA, "id-a", envelope.ReasonFailed)), `"attempts":3,"dead_letter":{"reason":"failed","error":"boom","exception":"RuntimeException","failed_at":1700000001000,"original_queue":"orders","attempts":3,"lang":"php"}`, `"attempts":0`, 1)
	assert.Equal(t, want, string(got.Payload()), "block removed, attempts 0, everything else byte for byte")
	env, err := envelope.Classify(got.Payload())
	require.NoError(t, err)
	assert.Nil(t, env.DeadLetter)
	assert.Equal(t, map[string]string{
		"bq-job": urnA, "bq-trace-id": "t-1", "bq-message-id": "id-a", "bq-schema-version": "1",
		"bq-source-lang": "php", "bq-attempts": "0", "traceparent": "tp-a",
	}, got.Properties())
	assert.Equal(t, "ka", got.Key())

	// A second run sees what the first left: the unknown_urn copy moves now (reason filter).
	rep, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Reason: envelope.ReasonUnknownURN, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	assert.Equal(t, urnB, rep.Moved[0].URN)
	assert.Equal(t, 2, f.backlog(t, f.dlq, dlq.DefaultSubscription), "poison and raw stay")
}

func TestRedriveLimit(t *testing.T) {
	eachTarget(t, redriveLimit)
}

func redriveLimit(t *testing.T, f *fixture) {
	f.seed(t)
	dry, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 1, DryRun: true, Admin: f.admin})
	require.NoError(t, err)
	assert.Len(t, dry.Moved, 1, "a dry run reports no more than the limit")
	// The limit counts messages moved, not messages read: the first one read (urnA's) does
	// not match, and the run goes on to the one that does.
	dry, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnB, Limit: 1, DryRun: true, Admin: f.admin})
	require.NoError(t, err)
	require.Len(t, dry.Moved, 1, "a dry run's limit counts what it would move")
	assert.Equal(t, urnB, dry.Moved[0].RoutingURN)
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnB, Limit: 1, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1, "a skipped message does not count")
	assert.Equal(t, urnB, rep.Moved[0].RoutingURN)
	rep, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 1, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	assert.Len(t, rep.Moved, 1)
	assert.Len(t, f.stored(t, f.queue), 2)
}

func TestRedriveToATarget(t *testing.T) {
	eachTarget(t, redriveToATarget)
}

// redriveToATarget: RedriveOptions.Target wins over the topic the dead-letter topic's name
// implies, and is required of a dead-letter topic without the ".dlq" suffix.
func redriveToATarget(t *testing.T, f *fixture) {
	f.seed(t)
	target := f.queue + "-v2"
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Target: target, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 2)
	assert.Len(t, f.stored(t, target), 2, "moved to the target")
	assert.Empty(t, f.stored(t, f.queue), "not to the topic the name implies")

	dead := f.queue + "-dead"
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, dead, dlq.DefaultSubscription))
	f.write(t, dead, map[string]string{"bq-job": urnA}, annotated(urnA, "id-d", envelope.ReasonFailed))
	rep, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: dead, Target: f.queue, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	stored := f.stored(t, f.queue)
	require.Len(t, stored, 1)
	assert.Equal(t, urnA, stored[0].Properties()["bq-job"])
}

// TestRedriveFailedPublishIsNotAcked runs against the embedded broker only: it needs a fault
// hook (FailNextSends) that a real broker does not have.
func TestRedriveFailedPublishIsNotAcked(t *testing.T) {
	t.Parallel()
	f := embeddedFixture(t)
	f.seed(t)
	require.NoError(t, f.b.CreateTopic(f.queue))
	// NotAllowedError: the client gives the send up without reconnecting; it never completes.
	f.b.FailNextSends(f.queue, 1, pulsartest.NotAllowedError)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	rep, err := dlq.Redrive(ctx, f.client, dlq.RedriveOptions{Topic: f.dlq, IdleTimeout: brokertest.IdleTimeout})
	require.Error(t, err)
	assert.Empty(t, rep.Moved)
	assert.Equal(t, 4, f.backlog(t, f.dlq, dlq.DefaultSubscription), "nothing acknowledged")
}

// TestRedriveAndPeekRefuseBadOptions runs against the embedded broker only: every call fails
// before it reaches a broker.
func TestRedriveAndPeekRefuseBadOptions(t *testing.T) {
	t.Parallel()
	_, err := dlq.Redrive(t.Context(), nil, dlq.RedriveOptions{Topic: "orders.dlq"})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	f := embeddedFixture(t)
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: "orders-dead"})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions, "no .dlq suffix and no target")
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: "a/b"})
	require.ErrorIs(t, err, dlq.ErrInvalidTopic)
	_, err = dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	_, err = dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: "orders.dlq", Subscription: " "})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: "orders.dlq", Limit: -1})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
}

// TestKindNames: each kind has its name, and the zero Kind is none of them, so that a
// Message that was never classified does not pass for one.
func TestKindNames(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "annotated", dlq.KindAnnotated.String())
	assert.Equal(t, "poison", dlq.KindPoison.String())
	assert.Equal(t, "raw", dlq.KindRaw.String())
	assert.Equal(t, "Kind(0)", dlq.Message{}.Kind.String())
}

func TestRedriveReportsProgress(t *testing.T) {
	eachTarget(t, redriveReportsProgress)
}

// redriveReportsProgress: Progress sees every message a run reads, in order, and whether
// it moved, in a dry run and in a real one alike.
func redriveReportsProgress(t *testing.T, f *fixture) {
	f.seed(t)
	type step struct {
		kind  dlq.Kind
		moved bool
	}
	want := []step{{dlq.KindAnnotated, true}, {dlq.KindAnnotated, false}, {dlq.KindPoison, false}, {dlq.KindRaw, false}}
	for _, dry := range []bool{true, false} {
		var got []step
		_, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{
			Topic: f.dlq, URN: urnA, DryRun: dry, Admin: f.admin, IdleTimeout: 300 * time.Millisecond,
			Progress: func(m dlq.Message, moved bool) { got = append(got, step{m.Kind, moved}) },
		})
		require.NoError(t, err)
		assert.Equal(t, want, got, "dry run %v", dry)
	}
}
