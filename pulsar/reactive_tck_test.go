package pulsar_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

type bytesMsg = messaging.Message[[]byte]

// tckBrokerOptions are the TCK timings for endpoints on the embedded broker: signals
// cross a network connection, so the defaults of in-process publishers are too short.
var tckBrokerOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 40 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	SkipStochastic:   true,
}

// publishN publishes n small payloads to topic with batching, and waits for the receipts.
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

// newTestSource creates a Source on a fresh topic holding n messages, closed at cleanup.
func newTestSource(t *testing.T, client apulsar.Client, n int, mod func(*bqpulsar.SourceOptions)) *bqpulsar.Source {
	t.Helper()
	topic := uniqueTopic(t, "src")
	if n > 0 {
		publishN(t, client, topic, n)
	}
	o := bqpulsar.SourceOptions{
		Consumer: apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "tck", Type: apulsar.Shared,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		},
		MaxInflight:   1024,
		CompleteAtEnd: true,
	}
	if mod != nil {
		mod(&o)
	}
	s, err := bqpulsar.NewSource(client, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		// The TCK never settles what it receives: Close gives up waiting at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// TestTCK_Source runs the PublisherVerification on the Source (RUNTIME.md §13.1):
// Create(n) publishes n messages and completes at their end; CreateFailed is a closed
// source.
func TestTCK_Source(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	o := tckBrokerOptions
	o.MaxElements = 1024
	o.MaxSubscribers = 1
	tck.VerifyPublisher(t, tck.PublisherFactory[bytesMsg]{
		Create: func(t *testing.T, n int64) reactive.Publisher[bytesMsg] {
			t.Helper()
			return newTestSource(t, client, int(n), nil)
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[bytesMsg] {
			t.Helper()
			s := newTestSource(t, client, 0, func(o *bqpulsar.SourceOptions) { o.CompleteAtEnd = false })
			require.NoError(t, s.Close(context.Background()))
			return s
		},
	}, o)
}
