package pulsar_test

import (
	"context"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// uniqueTopic returns a fresh fully qualified topic name for the test.
func uniqueTopic(t *testing.T, base string) string {
	t.Helper()
	return brokertest.UniqueTopic(t, base)
}

func newClient(tb testing.TB, b *pulsartest.Broker) apulsar.Client {
	tb.Helper()
	return brokertest.NewClient(tb, b.URL())
}

// brokerAndClient starts an embedded broker whose Close must succeed at the end of the
// test, and a client of it.
func brokerAndClient(t *testing.T) (*pulsartest.Broker, apulsar.Client) {
	t.Helper()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b, newClient(t, b)
}

// earliest makes a subscription start at the beginning of the topic, so that messages
// published before the consumer subscribed are received.
func earliest(o *apulsar.ConsumerOptions) {
	o.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
}

// collector receives every message of a topic on its own subscription.
type collector struct{ *brokertest.Collector }

func collect(t *testing.T, client apulsar.Client, topic string) *collector {
	t.Helper()
	return &collector{brokertest.Collect(t, client, topic)}
}

// wait returns the first n messages, failing the test after timeout.
func (c *collector) wait(t *testing.T, n int, timeout time.Duration) []apulsar.Message {
	t.Helper()
	return c.Wait(t, n, timeout)
}

func (c *collector) count() int { return c.Count() }

// runConsumer runs c until the test ends, then closes it and checks Run's result.
func runConsumer(tb testing.TB, c *bqpulsar.Consumer) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		require.ErrorIs(tb, <-done, context.Canceled)
		require.NoError(tb, c.Close())
	})
}

// onFailure gives f the error, envelope and message of every event that reports a failure
// (the events the error hook was given before Hooks.Event took its place; see
// bqpulsar.ReportsFailure).
func onFailure(f func(err error, env *envelope.Envelope, msg apulsar.Message)) bqpulsar.ConsumerOption {
	return bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
		if bqpulsar.ReportsFailure(e) {
			f(e.Err, e.Envelope, e.Message)
		}
	}})
}

// onDeadLettered calls f each time the consumer reports a message dead-lettered.
func onDeadLettered(f func()) bqpulsar.ConsumerOption {
	return bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
		if e.Kind == bqpulsar.EventDeadLettered {
			f()
		}
	}})
}
