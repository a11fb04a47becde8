package connector_test

import (
	"context"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// sinkOf creates the sink of outgoing channel ch through c, as the runtime does at Start,
// with the given attributes; it is closed at cleanup.
func sinkOf(t *testing.T, c *connector.Connector, ch string, attrs map[string]string) messaging.Sink {
	t.Helper()
	s, err := c.NewSink(t.Context(), messaging.NewChannelConfig(ch, connector.Name, messaging.Outgoing, attrs, c.Attributes()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// sourceOf creates the source of incoming channel ch through c, as sinkOf does a sink.
func sourceOf(t *testing.T, c *connector.Connector, ch string, attrs map[string]string) messaging.Source {
	t.Helper()
	s, err := c.NewSource(t.Context(), messaging.NewChannelConfig(ch, connector.Name, messaging.Incoming, attrs, c.Attributes()))
	require.NoError(t, err)
	closeAtOnce(t, s) // nothing is left unsettled
	return s
}

// A client given with WithClient is the application's: the connector never closes it, so
// after Connector.Close the application's producers and consumers on it go on working, and
// it still creates new ones.
func TestConnector_NeverClosesAGivenClient(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "given")
	col := collect(t, client, topic) // the application's consumer
	app, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	defer app.Close()
	c := newConnector(t, connector.WithClient(client))
	sink := sinkOf(t, c, "out", map[string]string{connector.AttrTopic: topic})
	reactive.FromSlice(messaging.NewMessage([]byte("through the connector"))).Subscribe(sink)
	col.wait(t, 1)
	require.NoError(t, sink.Close(t.Context()))
	require.NoError(t, c.Close(t.Context()))

	_, err = app.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("from the application's producer")})
	require.NoError(t, err, "the application's producer was closed with the connector")
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err, "the given client still creates producers after Connector.Close")
	defer p.Close()
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("from a new producer")})
	require.NoError(t, err)
	var got []string
	for _, m := range col.wait(t, 3) {
		got = append(got, string(m.Payload()))
	}
	require.Equal(t, []string{"through the connector", "from the application's producer", "from a new producer"}, got,
		"the application's consumer still receives")
}

// Several WithHooks compose in the order given: every channel gets them in that order, so
// the first one's Publish (on a sink) and Delivery (on a source) functions run first.
func TestConnector_HooksComposeInTheOrderGiven(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "hooked")
	var mu sync.Mutex
	var calls []string
	record := func(call string) {
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
	}
	recorded := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	hooks := func(name string) connector.Option {
		return connector.WithHooks(bqpulsar.Hooks{
			Publish: func(context.Context, *bqpulsar.OutgoingMessage) func(apulsar.MessageID, error) {
				record("publish " + name)
				return nil
			},
			Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(bqpulsar.Event)) {
				record("delivery " + name)
				return ctx, nil
			},
		})
	}
	c := newConnector(t, connector.WithClient(client), hooks("first"), hooks("second"))
	src := sourceOf(t, c, "in", map[string]string{connector.AttrTopic: topic, connector.AttrSubscriptionName: "svc"})
	sink := sinkOf(t, c, "out", map[string]string{connector.AttrTopic: topic})

	reactive.FromSlice(messaging.NewMessage([]byte("x"))).Subscribe(sink)
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "nothing delivered")
	require.NoError(t, ms.received()[0].Ack(t.Context()))
	assert.Equal(t, []string{"publish first", "publish second", "delivery first", "delivery second"}, recorded())
}

// The consumer and producer customizers run after the attributes were applied: they see the
// attributes' values, and what they set is what the channel uses.
func TestConnector_CustomizersRunAfterTheAttributes(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "customized")
	col := collect(t, client, topic)
	var (
		sawSubscription, sawProducerName string
		sawQueueSize, sawMaxPending      int
		sawNackDelay                     time.Duration
	)
	c := newConnector(t, connector.WithClient(client),
		connector.WithConsumerCustomizer("in", func(o *apulsar.ConsumerOptions) {
			sawSubscription, sawQueueSize, sawNackDelay = o.SubscriptionName, o.ReceiverQueueSize, o.NackRedeliveryDelay
			o.SubscriptionName = "customized"
		}),
		connector.WithProducerCustomizer("out", func(o *apulsar.ProducerOptions) {
			sawProducerName, sawMaxPending = o.Name, o.MaxPendingMessages
			o.Name, o.MaxPendingMessages = "customized-producer", 7
		}))

	sourceOf(t, c, "in", map[string]string{
		connector.AttrTopic: topic, connector.AttrSubscriptionName: "svc",
		connector.AttrReceiverQueueSize: "5", connector.AttrNackRedeliveryDelay: "250ms",
	})
	assert.Equal(t, "svc", sawSubscription)
	assert.Equal(t, 5, sawQueueSize)
	assert.Equal(t, 250*time.Millisecond, sawNackDelay)
	subs := b.Subscriptions(topic)
	assert.Contains(t, subs, "customized", "the customizer's subscription name is used")
	assert.NotContains(t, subs, "svc")

	sink := sinkOf(t, c, "out", map[string]string{
		connector.AttrTopic: topic, connector.AttrProducerName: "from-attribute",
		connector.AttrMaxPendingMessages: "50", connector.AttrSendWindow: "100",
	})
	assert.Equal(t, "from-attribute", sawProducerName)
	assert.Equal(t, 50, sawMaxPending)
	s, ok := sink.(*connector.Sink)
	require.True(t, ok)
	assert.Equal(t, 7, s.Window(), "the window is clamped to the customizer's maxPendingMessages")
	reactive.FromSlice(messaging.NewMessage([]byte("x"))).Subscribe(sink)
	assert.Equal(t, "customized-producer", col.wait(t, 1)[0].ProducerName())
}
