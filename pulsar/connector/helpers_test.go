package connector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

type bytesMsg = messaging.Message[[]byte]

const (
	// waitLong bounds what a test waits for the broker.
	waitLong = 15 * time.Second
	// settleQuiet is how long a test waits to see that nothing more happens.
	settleQuiet = 200 * time.Millisecond
)

// tckBrokerOptions are the TCK timings for endpoints on the embedded broker: signals
// cross a network connection, so the defaults of in-process publishers are too short.
var tckBrokerOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 40 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	SkipStochastic:   true,
}

// uniqueTopic returns a fresh fully qualified topic name for the test.
func uniqueTopic(t *testing.T, base string) string {
	t.Helper()
	return brokertest.UniqueTopic(t, base)
}

func newClient(tb testing.TB, b *pulsartest.Broker) apulsar.Client {
	tb.Helper()
	return brokertest.NewClient(tb, b.URL())
}

func newConnector(t *testing.T, opts ...connector.Option) *connector.Connector {
	t.Helper()
	c, err := connector.New(opts...)
	require.NoError(t, err)
	return c
}

// publishN publishes n small payloads ("m-0" …) to topic with batching, and waits for
// the receipts.
func publishN(tb testing.TB, client apulsar.Client, topic string, n int) {
	tb.Helper()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(tb, err)
	defer p.Close()
	errs := make(chan error, n)
	for i := range n {
		p.SendAsync(context.Background(), &apulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) { errs <- err })
	}
	require.NoError(tb, p.FlushWithCtx(context.Background()))
	for range n {
		require.NoError(tb, <-errs)
	}
}

// collector receives every message of a topic on its own subscription.
type collector struct{ *brokertest.Collector }

func collect(t *testing.T, client apulsar.Client, topic string) *collector {
	t.Helper()
	return &collector{brokertest.Collect(t, client, topic)}
}

// wait returns the first n messages, failing the test after waitLong.
func (c *collector) wait(t *testing.T, n int) []apulsar.Message {
	t.Helper()
	return c.Wait(t, n, waitLong)
}

func (c *collector) count() int { return c.Count() }
