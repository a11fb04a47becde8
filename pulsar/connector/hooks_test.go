package connector_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// The connector's endpoints take the same seams as the Publisher and the Consumer: a sink's
// publish hooks see every message before it is sent (and may add a property) and get the
// send's outcome; a source's delivery hooks open each delivery and get its settlement.
func TestSinkAndSourceRunTheirHooks(t *testing.T) {
	t.Parallel()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	client := newClient(t, b)
	topic := uniqueTopic(t, "hooks")

	var done atomic.Int32
	hook := func(_ context.Context, m *bqpulsar.OutgoingMessage) func(apulsar.MessageID, error) {
		m.Message.Properties["x-hooked"] = m.Topic
		return func(_ apulsar.MessageID, err error) {
			if err == nil {
				done.Add(1)
			}
		}
	}
	sink, err := connector.NewSink(client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic}, Hooks: []bqpulsar.Hooks{{Publish: hook}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	reactive.FromSlice(messaging.NewMessage([]byte("x"))).Subscribe(sink)

	var settled atomic.Value
	src, err := connector.NewSource(client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared},
		Hooks: []bqpulsar.Hooks{{Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(bqpulsar.Event)) {
			return ctx, func(s bqpulsar.Event) { settled.Store(s.Kind) }
		}}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "nothing delivered")
	md, ok := messaging.MetadataOf[connector.IncomingMetadata](ms.received()[0].Metadata())
	require.True(t, ok)
	assert.Equal(t, topic, md.Properties["x-hooked"], "the publish hook's property was sent")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return done.Load() == 1 }, "the publish hook's done was not called")
	require.NoError(t, ms.received()[0].Ack(context.Background()))
	assert.Equal(t, bqpulsar.EventAcked, settled.Load())
}
