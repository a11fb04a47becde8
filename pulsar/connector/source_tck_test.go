package connector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// newTestSource creates a Source on a fresh topic holding n messages, closed at cleanup.
func newTestSource(t *testing.T, client apulsar.Client, n int, mod func(*connector.SourceOptions)) *connector.Source {
	t.Helper()
	topic := uniqueTopic(t, "src")
	if n > 0 {
		publishN(t, client, topic, n)
	}
	o := connector.SourceOptions{
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
	s, err := connector.NewSource(client, o)
	require.NoError(t, err)
	closeAtOnce(t, s) // the TCK never settles what it receives
	return s
}

// closeAtOnce closes s when the test ends, giving up at once on what is left unsettled.
func closeAtOnce(t *testing.T, s interface{ Close(context.Context) error }) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = s.Close(ctx)
	})
}

// TestTCK_Source runs the PublisherVerification on the Source (RUNTIME.md §13.1):
// Create(n) publishes n messages and completes at their end; CreateFailed is a closed
// source.
func TestTCK_Source(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	o := tckBrokerOptions
	o.MaxSubscribers = 1
	o.SkipStochastic = false
	tck.VerifyPublisher(t, tck.PublisherFactory[bytesMsg]{
		Create: func(t *testing.T, n int64) reactive.Publisher[bytesMsg] {
			t.Helper()
			if n <= eagerElements {
				return newTestSource(t, client, int(n), nil)
			}
			return lazySource(t, client)
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[bytesMsg] {
			t.Helper()
			s := newTestSource(t, client, 0, func(o *connector.SourceOptions) { o.CompleteAtEnd = false })
			require.NoError(t, s.Close(context.Background()))
			return s
		},
	}, o)
}

// eagerElements is the most a TCK publisher is created with by publishing everything first;
// a larger (up to unbounded) element count gets a lazySource.
const eagerElements = 1024

// lazySource is a Source over a topic that a producer keeps filling while the test runs, a
// little ahead of what the source received, so that the "unbounded" TCK publishers (the
// MaxInt64 demand tests) have elements without a backlog of 2^63 messages. It never
// completes.
func lazySource(t *testing.T, client apulsar.Client) *connector.Source {
	t.Helper()
	topic := uniqueTopic(t, "lazy")
	s := newTestSource(t, client, 0, func(o *connector.SourceOptions) {
		o.Consumer.Topic = topic
		o.CompleteAtEnd = false
	})
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if s.InFlight() > 256 {
				select { // far enough ahead of the subscriber: wait for it
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
				continue
			}
			p.SendAsync(ctx, &apulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}, func(apulsar.MessageID, *apulsar.ProducerMessage, error) {})
			if i%64 == 63 {
				_ = p.FlushWithCtx(ctx)
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		p.Close()
	})
	return s
}
