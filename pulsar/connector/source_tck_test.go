package connector_test

import (
	"context"
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
			s := newTestSource(t, client, 0, func(o *connector.SourceOptions) { o.CompleteAtEnd = false })
			require.NoError(t, s.Close(context.Background()))
			return s
		},
	}, o)
}
