package pulsar_test

import (
	"context"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// A zero-queue consumer has no channel to take a queued message from (its Chan panics):
// the consumer receives through Receive, for Run and Next alike.
func TestZeroQueueConsumerIsConsumed(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		for _, style := range []string{"run", "next"} {
			t.Run(style, func(t *testing.T) {
				topic := tg.Topic(t, "zero-queue-"+style)
				handled := make(chan string, 1)
				c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic),
					bqpulsar.WithSubscription("app", apulsar.Shared),
					bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) { o.EnableZeroQueueConsumer = true }),
					bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
						handled <- env.Meta.ID
						return nil
					}))
				require.NoError(t, err)
				defer func() { require.NoError(t, c.Close()) }()
				p, err := bqpulsar.NewPublisher(client, topic)
				require.NoError(t, err)
				defer func() { require.NoError(t, p.Close()) }()
				id, err := p.Publish(t.Context(), okURN, map[string]int{"n": 1})
				require.NoError(t, err)

				if style == "next" {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					d, err := c.Next(ctx)
					require.NoError(t, err)
					assert.Equal(t, id, d.Envelope().Meta.ID)
					require.NoError(t, d.Ack())
					return
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				select {
				case got := <-handled:
					assert.Equal(t, id, got)
				case <-time.After(30 * time.Second):
					t.Fatal("the zero-queue consumer's message was not handled")
				}
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
			})
		}
	})
}
