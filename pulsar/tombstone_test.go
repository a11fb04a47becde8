package pulsar_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// TestTombstonesAreDeadLetteredAsPoison: a null-value message (a compaction tombstone: a
// producer's message with neither Payload nor Value, which pulsar-client-go marks null_value)
// on a queue is no envelope. The client delivers it with no payload, and the consumer
// dead-letters it at once as poison, whose copy keeps the key and shows the empty body, while
// the envelope after it is handled: nothing is dropped and the backlog drains. Batched and
// unbatched, since the client marks a batch's entry in its single-message metadata and a lone
// message in the message's own. Both brokers keep the mark, so the raw read below sees it.
func TestTombstonesAreDeadLetteredAsPoison(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		for _, batched := range []bool{false, true} {
			name := map[bool]string{false: "unbatched", true: "batched"}[batched]
			t.Run(name, func(t *testing.T) {
				topic := tg.Topic(t, "tombstone-"+name)
				id := rawThenEnvelope(t, client, topic, !batched, &apulsar.ProducerMessage{Key: "gone"})

				sent := collectAll(t, client, topic, 2)
				assert.True(t, sent[0].IsNullValue(), "the broker keeps the null_value mark")
				assert.Nil(t, sent[0].Payload())

				handled, dead := consumeFromStart(t, client, topic)
				expectHandled(t, handled, id, "the envelope after the tombstone")
				select {
				case <-dead:
				case <-time.After(waitLong):
					t.Fatal("the tombstone was not dead-lettered")
				}

				copies := collectAll(t, client, topic+".dlq", 1)
				assert.Equal(t, "gone", copies[0].Key())
				assert.False(t, copies[0].IsNullValue(), "the copy has a body")
				var cp struct {
					Raw        *string `json:"raw"`
					DeadLetter struct {
						Reason string `json:"reason"`
					} `json:"dead_letter"`
				}
				require.NoError(t, json.Unmarshal(copies[0].Payload(), &cp), string(copies[0].Payload()))
				require.NotNil(t, cp.Raw)
				assert.Empty(t, *cp.Raw)
				assert.Equal(t, string(envelope.ReasonPoison), cp.DeadLetter.Reason)
				admin := tg.Admin(t)
				testwait.Eventually(t, brokertest.WaitLong, func() bool {
					return brokertest.Backlog(t, admin, topic, "app") == 0
				}, "both messages acknowledged")
			})
		}
	})
}

// TestAnUnbatchedEmptyPayloadIsDiscardedByTheClient pins a known limit (README, "Known
// limits"): a message sent unbatched with an empty but non-null payload (zero bytes, no
// null_value mark) never reaches the consumer, because pulsar-client-go takes it for a
// corrupt entry and acknowledges it away before delivery. The same empty body in a batch, or
// marked null_value, is delivered and dead-lettered as poison. The message after it is
// handled. When a client release stops discarding it, this test fails, and the limit goes.
func TestAnUnbatchedEmptyPayloadIsDiscardedByTheClient(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		topic := tg.Topic(t, "empty-unbatched")
		id := rawThenEnvelope(t, client, topic, true, &apulsar.ProducerMessage{Payload: []byte{}, Key: "empty"})
		handled, dead := consumeFromStart(t, client, topic)
		expectHandled(t, handled, id, "the envelope after the empty message")
		admin := tg.Admin(t)
		testwait.Eventually(t, brokertest.WaitLong, func() bool {
			return brokertest.Backlog(t, admin, topic, "app") == 0
		}, "the empty message is acknowledged too")
		assert.Empty(t, dead, "the client discarded the empty message before the consumer saw it")
	})
}

// rawThenEnvelope sends raw to topic with a producer of the client's own (unbatched or not),
// then publishes an envelope of okURN after it, and returns the envelope's id.
func rawThenEnvelope(t *testing.T, client apulsar.Client, topic string, unbatched bool, raw *apulsar.ProducerMessage) string {
	t.Helper()
	prod, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: unbatched})
	require.NoError(t, err)
	defer prod.Close()
	_, err = prod.Send(t.Context(), raw)
	require.NoError(t, err)
	p, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	id, err := p.Publish(t.Context(), okURN, map[string]int{"n": 1})
	require.NoError(t, err)
	return id
}

// consumeFromStart runs, until the test ends, a consumer of topic's subscription "app" from
// the earliest message, which handles okURN; it returns the ids it handled and one signal per
// message it dead-lettered.
func consumeFromStart(t *testing.T, client apulsar.Client, topic string) (handled <-chan string, dead <-chan struct{}) {
	t.Helper()
	ids := make(chan string, 2)
	dl := make(chan struct{}, 2)
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
		bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
			ids <- env.Meta.ID
			return nil
		}),
		onDeadLettered(func() { dl <- struct{}{} }))
	require.NoError(t, err)
	runConsumer(t, c)
	return ids, dl
}

// expectHandled waits for the next handled id and checks that it is id.
func expectHandled(t *testing.T, handled <-chan string, id, what string) {
	t.Helper()
	select {
	case got := <-handled:
		assert.Equal(t, id, got)
	case <-time.After(waitLong):
		t.Fatalf("%s was not handled", what)
	}
}
