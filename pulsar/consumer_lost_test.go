package pulsar_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestAConsumerTheClientGaveUpSubscribesAgain: since v0.20.0, pulsar-client-go closes a
// consumer whose reconnection the broker answers with ConsumerBusy (and other errors it deems
// final) instead of trying again. A consumer that NewConsumer subscribed notices it (an
// EventError matching ErrConsumerLost, Health not ready), subscribes again once the
// subscription is free, and goes on handling messages: with one topic, whose Receive the
// close ends, and with two, where the client closes only the lost topic's consumer and
// nothing else would notice.
//
// The reconnection meets ConsumerBusy because another consumer holds the Exclusive
// subscription when it comes: on the embedded broker an armed SUBSCRIBE fault gives that
// answer once after an unload; on Apache Pulsar a second consumer subscribes in the gap of an
// unload, and keeps the subscription until the first one has been given up.
func TestAConsumerTheClientGaveUpSubscribesAgain(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		for _, topics := range []int{1, 2} {
			name := map[int]string{1: "one-topic", 2: "two-topics"}[topics]
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				var names []string
				for i := range topics {
					names = append(names, tg.Topic(t, "lost-"+name+"-"+string(rune('a'+i))))
				}
				lossy := names[len(names)-1] // the topic whose consumer the client gives up
				var mu sync.Mutex
				var lost []error
				handled := make(chan string, 4)
				opts := []bqpulsar.ConsumerOption{
					bqpulsar.WithSubscription("app", apulsar.Exclusive),
					bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
						handled <- env.Meta.ID
						return nil
					}),
					bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
						if e.Kind == bqpulsar.EventError && errors.Is(e.Err, bqpulsar.ErrConsumerLost) {
							mu.Lock()
							lost = append(lost, e.Err)
							mu.Unlock()
						}
					}}),
				}
				for _, n := range names {
					opts = append(opts, bqpulsar.WithTopic(n))
				}
				c, err := bqpulsar.NewConsumer(client, opts...)
				require.NoError(t, err)
				runConsumer(t, c)

				if tg.Real() {
					holdTheSubscriptionThroughAnUnload(t, client, tg.Admin(t), lossy)
				} else {
					tg.Broker.FailNextAttaches(lossy, 1, pulsartest.ConsumerBusy)
					tg.Broker.UnloadTopic(lossy)
				}
				testwait.Eventually(t, brokertest.WaitLong, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(lost) > 0
				}, "the consumer reports that the client gave it up")
				mu.Lock()
				first := lost[0]
				mu.Unlock()
				require.ErrorContains(t, first, "ConsumerBusy", "the client's cause is kept")

				p, err := bqpulsar.NewPublisher(client, lossy)
				require.NoError(t, err)
				defer func() { require.NoError(t, p.Close()) }()
				id, err := p.Publish(ctx, okURN, map[string]int{"n": 1})
				require.NoError(t, err)
				select {
				case got := <-handled:
					assert.Equal(t, id, got)
				case <-time.After(waitLong):
					t.Fatal("the consumer did not subscribe again: a message on the lost topic was not handled")
				}
				testwait.Eventually(t, brokertest.WaitLong, func() bool { return c.Health().Ready },
					"the consumer is ready again")
			})
		}
	})
}

// holdTheSubscriptionThroughAnUnload unloads topic on a real broker and subscribes a second
// consumer to its Exclusive subscription "app" in the gap, so that the first consumer's
// reconnection meets ConsumerBusy; it tries again (up to 20 unloads) while the first consumer
// comes back first. The second consumer holds the subscription for a few seconds, long
// enough for the client to give the first one up, and is closed then.
func holdTheSubscriptionThroughAnUnload(t *testing.T, client apulsar.Client, admin, topic string) {
	t.Helper()
	for range 20 {
		status, body := brokertest.AdminDo(t, http.MethodPut, brokertest.TopicURL(admin, topic)+"/unload", "")
		require.Equal(t, http.StatusNoContent, status, "unload: %s", body)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			held, err := client.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "app", Type: apulsar.Exclusive})
			if err == nil {
				time.Sleep(3 * time.Second)
				held.Close()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Fatal("the first consumer came back before a second one could take the subscription, 20 times")
}
