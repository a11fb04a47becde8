package pulsartest_test

import (
	"context"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readNext(t *testing.T, r apulsar.Reader) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), receiveTimeout)
	defer cancel()
	m, err := r.Next(ctx)
	require.NoError(t, err)
	return string(m.Payload())
}

// A reader's non-durable subscription goes when the reader closes (Pulsar removes a non-durable subscription with
// its last consumer); a durable one stays. Checked through the admin REST subscription list on every target.
func TestReaderCloseRemovesItsSubscription(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		needAdmin(t, tg, "the subscription list")
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "durable"})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, "0", "1")
		require.Equal(t, []string{"durable"}, listSubscriptionsREST(t, tg.AdminURL(), topic))

		for _, start := range []apulsar.MessageID{apulsar.EarliestMessageID(), apulsar.LatestMessageID()} {
			r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: start})
			require.NoError(t, err)
			if start == apulsar.EarliestMessageID() {
				assert.Equal(t, "0", readNext(t, r))
			}
			subs := listSubscriptionsREST(t, tg.AdminURL(), topic)
			require.Len(t, subs, 2, "the reader's subscription is listed while it reads: %v", subs)
			if b := tg.Broker(); b != nil {
				for _, name := range subs {
					assert.Equal(t, name == "durable", b.Stats(topic).Subscriptions[name].Durable, name)
				}
			}
			r.Close()
			eventually(t, "the reader's subscription to go", func() bool {
				subs := listSubscriptionsREST(t, tg.AdminURL(), topic)
				return len(subs) == 1 && subs[0] == "durable"
			})
		}
		k.Close()
		assert.Equal(t, []string{"durable"}, listSubscriptionsREST(t, tg.AdminURL(), topic),
			"a durable subscription outlives its consumers")
	})
}

// A reader whose connection drops comes back where it was, although its subscription went with the connection:
// the client resubscribes from the last message it handed out. (The reader has read everything before the drop:
// pulsar-client-go v0.19.0 loses a message that its dispatcher holds while it clears the queue on reconnect,
// against any broker.)
func TestReaderResumesAfterDropWithoutItsSubscription(t *testing.T) {
	t.Parallel()
	b := newEmbedded(t).Broker()
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(t, err)
	sendAll(t, p, "m-0", "m-1")
	// No producer through the drop: pulsar-client-go v0.19.0 races (go test -race) between a reconnecting
	// producer's grabCnx and its own sends.
	p.Close()
	r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, "m-0", readNext(t, r))
	assert.Equal(t, "m-1", readNext(t, r))
	before := b.Subscriptions(topic)
	require.Len(t, before, 1)
	b.DropConnections()
	eventually(t, "the reader to resubscribe", func() bool {
		st := b.Stats(topic)
		return len(st.Subscriptions) == 1 && st.Subscriptions[before[0]].Consumers == 1
	})
	p = newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(t, p, "m-2", "m-3")
	assert.Equal(t, "m-2", readNext(t, r))
	assert.Equal(t, "m-3", readNext(t, r))
	assert.False(t, r.HasNext(), "nothing twice")
	r.Close()
	eventually(t, "no subscription left", func() bool { return len(b.Subscriptions(topic)) == 0 })
}
