package connector_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// lostAckReceipts starts a broker that never answers an acknowledgement, so that a client
// with AckWithResponse sees every ack fail (after its operation timeout).
func lostAckReceipts(t *testing.T) apulsar.Client {
	t.Helper()
	var drop atomic.Bool
	b, err := pulsartest.Start(t.Context(), pulsartest.WithCommandHook(func(ci pulsartest.CommandInfo) pulsartest.Verdict {
		if drop.Load() && !ci.Inbound && ci.Type == "ACK_RESPONSE" {
			return pulsartest.Drop
		}
		return pulsartest.Pass
	}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: b.URL(), OperationTimeout: time.Second, ConnectionTimeout: 5 * time.Second,
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	drop.Store(true)
	return c
}

// TestFailedAckReachesTheStageAndHealth: a broker ack that fails is returned by the stage's
// m.Ack and makes the source not ready (the source used to return nil and stay ready).
func TestFailedAckReachesTheStageAndHealth(t *testing.T) {
	t.Parallel()
	client := lostAckReceipts(t)
	topic := uniqueTopic(t, "acks")
	publishN(t, client, topic, 1)
	src, err := connector.NewSource(client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared, AckWithResponse: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "nothing delivered")
	require.True(t, src.Health().Ready)
	err = ms.received()[0].Ack(context.Background())
	require.Error(t, err, "the failed broker ack reaches m.Ack's caller")
	var se *bqpulsar.SettleError
	require.ErrorAs(t, err, &se)
	h := src.Health()
	assert.False(t, h.Ready, "and the channel's health")
	assert.Contains(t, h.Reason, "ack failing")
}

// TestFailedAckReachesTheConsumersHookAndHealth is the same input through the other front.
func TestFailedAckReachesTheConsumersHookAndHealth(t *testing.T) {
	t.Parallel()
	client := lostAckReceipts(t)
	topic := uniqueTopic(t, "acks")
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	_, err = pub.Publish(t.Context(), "urn:babel:x", nil)
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	var reported atomic.Value
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) { o.AckWithResponse = true }),
		bqpulsar.Handle("urn:babel:x", func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }),
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
			if e.Kind == bqpulsar.EventNacked && errors.Is(e.Err, bqpulsar.ErrSettle) {
				reported.Store(e.Err)
			}
		}}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return reported.Load() != nil }, "the failed ack was not reported")
	h := c.Health()
	assert.False(t, h.Ready)
	assert.Contains(t, strings.Join(h.Reasons, ";"), "ack failing")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())
}

// TestSinkWritesNoDelayForAPastDeliverAt: the contract says a delay <= 0 means no delay and
// no bq-delay; the sink wrote bq-delay: 0.
func TestSinkWritesNoDelayForAPastDeliverAt(t *testing.T) {
	t.Parallel()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	client := newClient(t, b)
	topic := uniqueTopic(t, "sink")
	got := collect(t, client, topic)
	sink, err := connector.NewSink(client, connector.SinkOptions{Producer: apulsar.ProducerOptions{Topic: topic}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	m := messaging.NewMessage([]byte("x"),
		messaging.WithMetadata(messaging.NewMetadata(connector.OutgoingMetadata{DeliverAt: time.Now().Add(-time.Hour)})))
	reactive.FromSlice(m).Subscribe(sink)
	msgs := got.wait(t, 1)
	assert.NotContains(t, msgs[0].Properties(), bqpulsar.PropDelay)
}

// TestSinkProjectsTheEncodedEnvelopeWithoutDecoding: with the babelqueue codec the runtime
// attaches the envelope the codec encoded, and the sink projects the bq-* properties from
// it; the bytes are not decoded again (here they are not even an envelope).
func TestSinkProjectsTheEncodedEnvelopeWithoutDecoding(t *testing.T) {
	t.Parallel()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	client := newClient(t, b)
	topic := uniqueTopic(t, "sink")
	got := collect(t, client, topic)
	sink, err := connector.NewSink(client, connector.SinkOptions{Producer: apulsar.ProducerOptions{Topic: topic}, ProjectEnvelope: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	env, err := envelope.Make("urn:babel:orders:created", nil)
	require.NoError(t, err)
	raw, items, err := connector.EnvelopeCodec{}.EncodeWithMetadata(env)
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	m := messaging.NewMessage([]byte("opaque"), messaging.WithMetadata(messaging.NewMetadata(items...)))
	reactive.FromSlice(m).Subscribe(sink)
	msgs := got.wait(t, 1)
	assert.Equal(t, bqpulsar.ProjectProperties(env), msgs[0].Properties())
}
