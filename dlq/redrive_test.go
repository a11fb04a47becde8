package dlq_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

var topicSeq atomic.Int64

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

type fixture struct {
	b      *pulsartest.Broker
	client apulsar.Client
	admin  *dlq.Admin
	queue  string
	dlq    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	admin, err := dlq.NewAdmin(b.AdminURL())
	require.NoError(t, err)
	client, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: b.URL(), OperationTimeout: 5 * time.Second, ConnectionTimeout: 5 * time.Second,
		Logger: plog.DefaultNopLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	q := "persistent://public/default/redrive-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-") + "-" + string(rune('a'+topicSeq.Add(1)%26))
	return &fixture{b: b, client: client, admin: admin, queue: q, dlq: q + ".dlq"}
}

// ensure creates the retention subscription, as a consumer does before its first dead letter.
func (f *fixture) ensure(t *testing.T) {
	t.Helper()
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription))
}

// brokerState is what a read-only operation must leave as it was: the topics, and for
// each its subscriptions with their backlog, consumers, pending and replay counts.
type brokerState struct {
	Topics []string
	Subs   map[string]map[string]pulsartest.SubscriptionStats
	Stored map[string]int
}

func (f *fixture) state() brokerState {
	st := brokerState{Topics: f.b.Topics(), Subs: map[string]map[string]pulsartest.SubscriptionStats{}, Stored: map[string]int{}}
	for _, topic := range st.Topics {
		ts := f.b.Stats(topic)
		st.Subs[topic], st.Stored[topic] = ts.Subscriptions, ts.Messages
	}
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
	t.Parallel()
	f := newFixture(t)
	f.seed(t)
	before := f.state()
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
	assert.Equal(t, before, f.state(), "no topic, subscription, backlog or consumer changed")
	assert.Equal(t, 4, f.b.Backlog(f.dlq, dlq.DefaultSubscription))
}

func TestPeekOfAMissingTopicOrSubscriptionCreatesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.state()
	_, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	var se *dlq.SubscriptionError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, dlq.DefaultSubscription, se.Subscription)
	assert.Contains(t, se.Error(), "bq subscription create")
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	assert.Equal(t, before, f.state(), "no topic created")

	// A topic written to without the retention subscription: reported, still not created.
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.dlq})
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: annotated(urnA, "id-a", envelope.ReasonFailed)})
	require.NoError(t, err)
	p.Close()
	before = f.state()
	_, err = dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	assert.Contains(t, err.Error(), "no such subscription")
	assert.Equal(t, before, f.state(), "no subscription created")
}

func TestDryRunIsReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t)
	before := f.state()
	dry, err := dlq.Redrive(t.Context(), nil, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin})
	require.NoError(t, err)
	assert.Len(t, dry.Moved, 2)
	assert.Len(t, dry.Poison, 1)
	assert.Len(t, dry.Raw, 1)
	dry, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin, URN: urnB})
	require.NoError(t, err)
	require.Len(t, dry.Moved, 1)
	assert.Equal(t, 1, dry.Skipped)
	assert.Equal(t, before, f.state(), "a dry run publishes, acknowledges and creates nothing")
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions, "a dry run needs the admin API")
}

func TestRedriveMovesBackAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t)

	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnA, IdleTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	assert.Equal(t, 1, rep.Skipped)
	require.Len(t, rep.Poison, 1, "poison copies are reported")
	assert.Len(t, rep.Raw, 1)
	assert.Equal(t, 3, f.b.Backlog(f.dlq, dlq.DefaultSubscription), "only the moved copy was acknowledged")

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
	rep, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Reason: envelope.ReasonUnknownURN, IdleTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	assert.Equal(t, urnB, rep.Moved[0].URN)
	assert.Equal(t, 2, f.b.Backlog(f.dlq, dlq.DefaultSubscription), "poison and raw stay")
}

func TestRedriveLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t)
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 1, IdleTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Len(t, rep.Moved, 1)
	assert.Equal(t, 1, f.b.Stats(f.queue).Messages)
}

func TestRedriveFailedPublishIsNotAcked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t)
	require.NoError(t, f.b.CreateTopic(f.queue))
	// NotAllowedError: the client gives the send up without reconnecting; it never completes.
	f.b.FailNextSends(f.queue, 1, pulsartest.NotAllowedError)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	rep, err := dlq.Redrive(ctx, f.client, dlq.RedriveOptions{Topic: f.dlq, IdleTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Empty(t, rep.Moved)
	assert.Equal(t, 4, f.b.Backlog(f.dlq, dlq.DefaultSubscription), "nothing acknowledged")
}

func TestRedriveAndPeekRefuseBadOptions(t *testing.T) {
	t.Parallel()
	_, err := dlq.Redrive(t.Context(), nil, dlq.RedriveOptions{Topic: "orders.dlq"})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	f := newFixture(t)
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
	assert.Equal(t, "poison", dlq.KindPoison.String())
}
