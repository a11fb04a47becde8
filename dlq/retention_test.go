package dlq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
)

// write sends the payloads to topic, unbatched, with the given properties.
func (f *fixture) write(t *testing.T, topic string, props map[string]string, payloads ...[]byte) {
	t.Helper()
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	for _, pl := range payloads {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: pl, Properties: props})
		require.NoError(t, err)
	}
}

func sevenDeadLetters() [][]byte {
	out := make([][]byte, 7)
	for i := range out {
		out[i] = annotated(urnA, fmt.Sprintf("id-%d", i), envelope.ReasonFailed)
	}
	return out
}

func TestRedriveThreeOfSevenLeavesFourToPeek(t *testing.T) {
	eachTarget(t, redriveThreeOfSevenLeavesFourToPeek)
}

func redriveThreeOfSevenLeavesFourToPeek(t *testing.T, f *fixture) {
	f.ensure(t)
	f.write(t, f.dlq, map[string]string{"bq-job": urnA}, sevenDeadLetters()...)

	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 3, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 3)
	left, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, left, 4, "the redriven ones are no longer listed")
	for i, m := range left {
		assert.Equal(t, fmt.Sprintf("id-%d", i+3), m.Envelope.Meta.ID)
	}
	dry, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, DryRun: true, Admin: f.admin})
	require.NoError(t, err)
	assert.Len(t, dry.Moved, 4, "list and dry run agree")
	assert.Equal(t, 4, f.backlog(t, f.dlq, dlq.DefaultSubscription))
	assert.Equal(t, []string{dlq.DefaultSubscription}, f.subscriptions(t, f.dlq), "no separate redrive subscription")
}

func TestRedriveKeepsTheRoutingURN(t *testing.T) {
	eachTarget(t, redriveKeepsTheRoutingURN)
}

func redriveKeepsTheRoutingURN(t *testing.T, f *fixture) {
	f.ensure(t)
	// Routed by its bq-job property (urnB), which won over the body's URN (urnA).
	f.write(t, f.dlq, map[string]string{"bq-job": urnB}, annotated(urnA, "id-r", envelope.ReasonFailed))
	f.write(t, f.dlq, map[string]string{"bq-job": "  "}, annotated(urnA, "id-blank", envelope.ReasonFailed))

	peeked, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, peeked, 2)
	assert.Equal(t, urnA, peeked[0].URN)
	assert.Equal(t, urnB, peeked[0].RoutingURN, "a usable bq-job property is the routing URN")
	assert.Equal(t, urnA, peeked[1].RoutingURN, "a blank bq-job is not usable: the body URN routes")

	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnB, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1, "the filter matches the routing URN")
	assert.Equal(t, 1, rep.Skipped, "the body URN alone does not match")
	rep, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, URN: urnA, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)

	got := f.receiveTarget(t, 2)
	assert.Equal(t, urnB, got[0].Properties()["bq-job"], "the handler that failed gets it again")
	assert.Contains(t, string(got[0].Payload()), `"job":"`+urnA+`"`, "the body is kept")
	assert.Equal(t, urnA, got[1].Properties()["bq-job"])
}

func TestRedriveOnAnotherSubscription(t *testing.T) {
	eachTarget(t, redriveOnAnotherSubscription)
}

func redriveOnAnotherSubscription(t *testing.T, f *fixture) {
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, "ops"))
	f.write(t, f.dlq, nil, annotated(urnA, "id-a", envelope.ReasonFailed))
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Subscription: "ops", IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	assert.Len(t, rep.Moved, 1)
	assert.Zero(t, f.backlog(t, f.dlq, "ops"))
	_, err = dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Subscription: "has space"})
	require.ErrorIs(t, err, dlq.ErrInvalidSubscriptionName)
}

// storageSize is the bytes the admin API says the topic stores.
func (f *fixture) storageSize(t *testing.T, topic string) int64 {
	t.Helper()
	st, ok := brokertest.Stats(t, f.adminURL, topic)
	require.True(t, ok, "no topic %s", topic)
	return st.StorageSize
}

func TestEnsureSubscriptionKeepsWhatIsWrittenAfterIt(t *testing.T) {
	eachTarget(t, ensureSubscriptionKeepsWhatIsWrittenAfterIt)
}

func ensureSubscriptionKeepsWhatIsWrittenAfterIt(t *testing.T, f *fixture) {
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription))
	assert.Equal(t, []string{dlq.DefaultSubscription}, f.subscriptions(t, f.dlq))
	st, ok := brokertest.Stats(t, f.adminURL, f.dlq)
	require.True(t, ok)
	assert.True(t, st.Subscriptions[dlq.DefaultSubscription].Durable)
	assert.Zero(t, st.Subscriptions[dlq.DefaultSubscription].Consumers, "the consumer that created it is gone")

	f.write(t, f.dlq, nil, sevenDeadLetters()...)
	brokertest.ForceTrim(t, f.adminURL, f.dlq)
	assert.Positive(t, f.storageSize(t, f.dlq), "the retention subscription holds every dead letter")
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	assert.Len(t, rep.Moved, 7, "all there after a trim")
	brokertest.ForceTrim(t, f.adminURL, f.dlq)
	assert.Zero(t, f.storageSize(t, f.dlq), "acknowledged dead letters are free to go")
}

func TestWithoutTheRetentionSubscriptionATrimLosesDeadLetters(t *testing.T) {
	eachTarget(t, withoutTheRetentionSubscriptionATrimLosesDeadLetters)
}

func withoutTheRetentionSubscriptionATrimLosesDeadLetters(t *testing.T, f *fixture) {
	f.write(t, f.dlq, nil, sevenDeadLetters()...) // no EnsureSubscription
	brokertest.ForceTrim(t, f.adminURL, f.dlq)
	assert.Zero(t, f.storageSize(t, f.dlq), "nothing needed them: trimmed")
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	assert.Empty(t, rep.Moved, "gone")
}

func TestEnsureSubscriptionOnAnExistingSubscriptionChangesNothing(t *testing.T) {
	eachTarget(t, ensureSubscriptionOnAnExistingSubscriptionChangesNothing)
}

func ensureSubscriptionOnAnExistingSubscriptionChangesNothing(t *testing.T, f *fixture) {
	f.ensure(t)
	f.write(t, f.dlq, nil, sevenDeadLetters()...)
	_, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 2, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	before := f.state(t)
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription))
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription, dlq.WithSubscriptionType(apulsar.Exclusive)))
	assert.Equal(t, before, f.state(t), "position, backlog and consumers as they were")
	assert.Equal(t, 5, f.backlog(t, f.dlq, dlq.DefaultSubscription))
}

func TestEnsureSubscriptionWhileAConsumerHoldsIt(t *testing.T) {
	eachTarget(t, ensureSubscriptionWhileAConsumerHoldsIt)
}

func ensureSubscriptionWhileAConsumerHoldsIt(t *testing.T, f *fixture) {
	f.write(t, f.queue, nil, []byte("a"), []byte("b"), []byte("c"))
	c, err := f.client.Subscribe(apulsar.ConsumerOptions{
		Topic: f.queue, SubscriptionName: "workers", Type: apulsar.Shared,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	require.NoError(t, err)
	defer c.Close()
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := c.Receive(ctx) // received, not acknowledged: pending on the Shared consumer
		cancel()
		require.NoError(t, err)
	}
	before := f.state(t)
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.queue, "workers"), "Shared joins and leaves")
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.queue, "workers",
		dlq.WithSubscriptionType(apulsar.Exclusive)), "ConsumerBusy: it exists")
	after := f.state(t)
	assert.Equal(t, before, after, "nothing redelivered or acknowledged")
	workers := after.Admin.Subs[f.queue]["workers"]
	assert.Equal(t, brokertest.SubscriptionStats{Backlog: 3, Unacked: 3, Consumers: 1, Durable: true}, workers)
	if f.b != nil {
		assert.Equal(t, 3, after.Embedded.Subs[f.queue]["workers"].Pending)
	}
}

func TestEnsureSubscriptionOnAPartitionedTopic(t *testing.T) {
	eachTarget(t, ensureSubscriptionOnAPartitionedTopic)
}

func ensureSubscriptionOnAPartitionedTopic(t *testing.T, f *fixture) {
	brokertest.CreatePartitioned(t, f.adminURL, f.dlq, 3)
	require.NoError(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, dlq.DefaultSubscription))
	for i := range 3 {
		assert.Equal(t, []string{dlq.DefaultSubscription}, f.subscriptions(t, fmt.Sprintf("%s-partition-%d", f.dlq, i)))
	}
	f.write(t, f.dlq, nil, sevenDeadLetters()...)
	before := f.state(t)
	msgs, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	assert.Len(t, msgs, 7, "every partition")
	assert.Equal(t, before, f.state(t))
	rep, err := dlq.Redrive(t.Context(), f.client, dlq.RedriveOptions{Topic: f.dlq, Limit: 3, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 3)
	msgs, err = dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	assert.Len(t, msgs, 4)
}

func TestEnsureSubscriptionRefusesBadArguments(t *testing.T) {
	eachTarget(t, ensureSubscriptionRefusesBadArguments)
}

func ensureSubscriptionRefusesBadArguments(t *testing.T, f *fixture) {
	for _, name := range []string{"", "a b", "tab\there", "nl\n", string([]byte{0xff}), string(make([]byte, 257)), strings.Repeat("a", 257)} {
		err := dlq.EnsureSubscription(t.Context(), f.client, f.dlq, name)
		require.ErrorIs(t, err, dlq.ErrInvalidSubscriptionName, "%q", name)
		require.ErrorIs(t, err, dlq.ErrSubscription)
	}
	require.ErrorIs(t, dlq.EnsureSubscription(t.Context(), f.client, "a/b", "s"), dlq.ErrInvalidTopic)
	require.ErrorIs(t, dlq.EnsureSubscription(t.Context(), nil, f.dlq, "s"), dlq.ErrInvalidOptions)
	require.ErrorIs(t, dlq.EnsureSubscription(t.Context(), f.client, f.dlq, "s", dlq.WithSubscriptionType(42)), dlq.ErrInvalidOptions)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, dlq.EnsureSubscription(ctx, f.client, f.dlq, "s"), context.Canceled)
	assert.Empty(t, brokertest.Topics(t, f.adminURL, f.queue), "nothing created")
	if f.b != nil {
		assert.Empty(t, f.b.Topics(), "nothing created")
	}
}

func TestPurge(t *testing.T) {
	eachTarget(t, purge)
}

func purge(t *testing.T, f *fixture) {
	f.seed(t)
	rep, err := dlq.Purge(t.Context(), f.client, dlq.PurgeOptions{Topic: f.dlq, URN: urnB, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1, "only the message routed to the URN")
	assert.Equal(t, "id-b", rep.Purged[0].Envelope.Meta.ID)
	assert.Equal(t, 3, rep.Skipped)
	rep, err = dlq.Purge(t.Context(), f.client, dlq.PurgeOptions{Topic: f.dlq, Reason: envelope.ReasonPoison, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1)
	assert.Equal(t, dlq.KindPoison, rep.Purged[0].Kind)
	assert.Equal(t, 2, rep.Skipped)
	rep, err = dlq.Purge(t.Context(), f.client, dlq.PurgeOptions{Topic: f.dlq, Limit: 1, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	assert.Len(t, rep.Purged, 1, "the limit")
	rep, err = dlq.Purge(t.Context(), f.client, dlq.PurgeOptions{Topic: f.dlq, IdleTimeout: f.idleOrDefault()})
	require.NoError(t, err)
	assert.Len(t, rep.Purged, 1, "without filters: everything left")
	left, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Equal(t, []string{dlq.DefaultSubscription}, f.subscriptions(t, f.dlq), "the subscription stays")
	_, err = dlq.Purge(t.Context(), nil, dlq.PurgeOptions{Topic: f.dlq})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	_, err = dlq.Purge(t.Context(), f.client, dlq.PurgeOptions{Topic: f.dlq, Limit: -1})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
}

func TestConfigSubscription(t *testing.T) {
	t.Parallel()
	cfg := dlq.Config{Subscription: "keep", Queues: map[string]dlq.QueueConfig{"metrics": {Subscription: "m-keep"}}}
	require.NoError(t, cfg.Validate())
	for topic, want := range map[string]string{
		"persistent://acme/shop/orders":              "keep",
		"persistent://acme/shop/metrics-partition-1": "m-keep",
	} {
		got, err := cfg.SubscriptionFor(topic)
		require.NoError(t, err)
		assert.Equal(t, want, got, topic)
	}
	got, err := dlq.Config{}.SubscriptionFor("orders")
	require.NoError(t, err)
	assert.Equal(t, dlq.DefaultSubscription, got)
	_, err = cfg.SubscriptionFor("a/b")
	require.ErrorIs(t, err, dlq.ErrInvalidTopic)
	require.ErrorIs(t, dlq.Config{Subscription: "a b"}.Validate(), dlq.ErrInvalidSubscriptionName)
	err = dlq.Config{Queues: map[string]dlq.QueueConfig{"orders": {Subscription: "\x00"}}}.Validate()
	require.ErrorIs(t, err, dlq.ErrInvalidSubscriptionName)
	assert.Contains(t, err.Error(), `dlq: queue "orders"`)
}

func TestNewAdminRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8080", "pulsar://h:6650", "http://", "http://h:8080/?x=1", "http://u:p@h:8080", "http://h/#f", "http://%zz"} {
		_, err := dlq.NewAdmin(u)
		require.ErrorIs(t, err, dlq.ErrInvalidOptions, "%q", u)
	}
	_, err := dlq.NewAdmin("http://h:8080", dlq.WithHTTPClient(nil))
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
	_, err = dlq.Peek(t.Context(), nil, dlq.PeekOptions{Topic: "orders.dlq"})
	require.ErrorIs(t, err, dlq.ErrInvalidOptions)
}

func TestPeekSplitsBatches(t *testing.T) {
	eachTarget(t, peekSplitsBatches)
}

func peekSplitsBatches(t *testing.T, f *fixture) {
	f.ensure(t)
	p, err := f.client.CreateProducer(apulsar.ProducerOptions{
		Topic: f.dlq, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Minute,
	})
	require.NoError(t, err)
	defer p.Close()
	done := make(chan error, 3)
	for i := range 3 {
		p.SendAsync(t.Context(), &apulsar.ProducerMessage{
			Payload: annotated(urnA, fmt.Sprintf("id-%d", i), envelope.ReasonFailed), Key: fmt.Sprintf("k%d", i),
			Properties: map[string]string{"bq-job": urnA, "n": fmt.Sprint(i)},
		}, func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) { done <- err })
	}
	require.NoError(t, p.FlushWithCtx(t.Context()))
	for range 3 {
		require.NoError(t, <-done)
	}
	if f.b != nil { // only the embedded broker tells how many entries it stores
		assert.Equal(t, 1, f.b.Stats(f.dlq).Entries, "one batch entry")
	}
	msgs, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq})
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		assert.Equal(t, fmt.Sprintf("id-%d", i), m.Envelope.Meta.ID)
		assert.Equal(t, fmt.Sprintf("k%d", i), m.Key)
		assert.Equal(t, fmt.Sprint(i), m.Properties["n"])
		assert.Equal(t, dlq.KindAnnotated, m.Kind)
	}
	two, err := dlq.Peek(t.Context(), f.admin, dlq.PeekOptions{Topic: f.dlq, Limit: 2})
	require.NoError(t, err)
	assert.Len(t, two, 2, "the limit cuts a batch")
}
