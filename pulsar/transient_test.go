package pulsar_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestCreateThroughUnload: a consumer or publisher created while its topic is being
// unloaded is created, not refused. Apache Pulsar answers a SUBSCRIBE or PRODUCER for a
// topic in the middle of an unload with ServiceNotReady "Topic is temporarily unavailable",
// which pulsar-client-go v0.21.0 (as v0.19.0) returns from Subscribe and CreateProducer at
// once. It was the cause of a chaos run's failure (a restart of the consumer fell into an
// unload); on the embedded broker the same answer comes from FailNextAttaches, on Apache
// Pulsar from unloads in a loop. An answer that is not temporary is returned at once.
func TestCreateThroughUnload(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		topic := tg.Topic(t, "through-unload")
		newConsumer := func() (*bqpulsar.Consumer, error) {
			return bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("app", apulsar.Shared),
				bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }))
		}
		seed, err := bqpulsar.NewPublisher(client, topic) // the topic exists from here on
		require.NoError(t, err)
		require.NoError(t, seed.Close())

		// On the embedded broker three refusals; on Apache Pulsar rounds until 30 unloads
		// have been answered (each makes the topic unavailable for a moment).
		rounds, more := 3, func() bool { return false }
		if b := tg.Broker; b != nil {
			b.FailNextAttaches(topic, 3, pulsartest.ServiceNotReady)
		} else {
			rounds = 1
			var unloads atomic.Int64
			more = func() bool { return unloads.Load() < 30 }
			admin := tg.Admin(t)
			hc, unload := brokertest.HTTPClient(t), brokertest.TopicURL(admin, topic)+"/unload"
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			// An unload 250 ms after the previous one was answered, until the rounds are
			// done. With a 100 ms ticker, a CI run beside three others failed: the answers
			// took longer than the tick, so each unload followed the previous answer at once,
			// and NewConsumer met ServiceNotReady for the whole 30 s it asks for.
			go func() {
				defer wg.Done()
				gap := time.NewTimer(0)
				defer gap.Stop()
				for ctx.Err() == nil {
					select {
					case <-ctx.Done():
						return
					case <-gap.C:
					}
					req, err := http.NewRequestWithContext(ctx, http.MethodPut, unload, http.NoBody)
					if err != nil {
						return
					}
					if resp, err := hc.Do(req); err == nil {
						_ = resp.Body.Close()
						if resp.StatusCode < 300 {
							unloads.Add(1)
						}
					}
					gap.Reset(250 * time.Millisecond)
				}
			}()
			t.Cleanup(func() { stop(); wg.Wait() })
		}
		for i := 0; i < rounds || more(); i++ {
			c, err := newConsumer()
			require.NoError(t, err, "consumer %d", i)
			require.NoError(t, c.Close())
			p, err := bqpulsar.NewPublisher(client, topic)
			require.NoError(t, err, "publisher %d", i)
			require.NoError(t, p.Close())
		}
		if b := tg.Broker; b != nil {
			// Not temporary: returned at once, so the one injected refusal is what the first
			// call meets and the second call succeeds.
			b.FailNextAttaches(topic, 1, pulsartest.AuthorizationError)
			_, err := newConsumer()
			require.ErrorContains(t, err, "AuthorizationError")
			c, err := newConsumer()
			require.NoError(t, err)
			require.NoError(t, c.Close())
			b.FailNextAttaches(topic, 1, pulsartest.AuthorizationError)
			_, err = bqpulsar.NewPublisher(client, topic)
			require.ErrorContains(t, err, "AuthorizationError")
		}
	})
}
