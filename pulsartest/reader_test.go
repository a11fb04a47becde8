package pulsartest_test

import (
	"context"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
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
			testwait.Eventually(t, eventuallyWithin, func() bool {
				subs := listSubscriptionsREST(t, tg.AdminURL(), topic)
				return len(subs) == 1 && subs[0] == "durable"
			}, "the reader's subscription to go")
		}
		k.Close()
		assert.Equal(t, []string{"durable"}, listSubscriptionsREST(t, tg.AdminURL(), topic),
			"a durable subscription outlives its consumers")
	})
}

// A reader whose connection drops comes back where it was, although its subscription went with the connection:
// the client resubscribes from the last message it handed out. (The reader has read everything before the drop:
// pulsar-client-go loses a message that its dispatcher holds while it clears the queue on reconnect, against
// any broker: seen with v0.19.0, and v0.21.0's dispatcher is the same.)
func TestReaderResumesAfterDropWithoutItsSubscription(t *testing.T) {
	t.Parallel()
	b := newEmbedded(t).Broker()
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(t, err)
	sendAll(t, p, "m-0", "m-1")
	// No producer through the drop: pulsar-client-go races (go test -race) between a reconnecting producer's
	// grabCnx and its own sends (seen with v0.19.0; v0.21.0 did not change the producer there).
	p.Close()
	r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, "m-0", readNext(t, r))
	assert.Equal(t, "m-1", readNext(t, r))
	before := b.Subscriptions(topic)
	require.Len(t, before, 1)
	b.DropConnections()
	testwait.Eventually(t, eventuallyWithin, func() bool {
		st := b.Stats(topic)
		return len(st.Subscriptions) == 1 && st.Subscriptions[before[0]].Consumers == 1
	}, "the reader to resubscribe")
	p = newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(t, p, "m-2", "m-3")
	assert.Equal(t, "m-2", readNext(t, r))
	assert.Equal(t, "m-3", readNext(t, r))
	assert.False(t, r.HasNext(), "nothing twice")
	r.Close()
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(b.Subscriptions(topic)) == 0 }, "no subscription left")
}

// After a trim that removed every entry of a topic (brokertest.ForceTrim: unload, then trim), Pulsar 4.0 answers
// GET_LAST_MESSAGE_ID with -1:-1, as for a topic never written to: its last entry is gone with its ledger. So a
// reader from Earliest has no next message (HasNext false, Next waits), whether the start is inclusive or not,
// and so has a reader that had read everything; both read what is published next.
func TestReaderOnAFullyTrimmedTopic(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "a forced trim")
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic + "-fresh", SubscriptionName: "s"})
		assertNoLastMessage(t, k, "a topic never written to")

		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, numbered(3)...)
		old, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
		require.NoError(t, err)
		defer old.Close()
		for _, want := range numbered(3) {
			assert.Equal(t, want, readNext(t, old))
		}
		brokertest.ForceTrim(t, admin, topic)

		k = subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "late"})
		assertNoLastMessage(t, k, "a fully trimmed topic")
		var readers []apulsar.Reader
		for _, inclusive := range []bool{false, true} {
			r, err := c.CreateReader(apulsar.ReaderOptions{
				Topic: topic, StartMessageID: apulsar.EarliestMessageID(), StartMessageIDInclusive: inclusive,
			})
			require.NoError(t, err)
			defer r.Close()
			assert.False(t, r.HasNext(), "from Earliest, inclusive=%t", inclusive)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			_, err = r.Next(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, "inclusive=%t", inclusive)
			readers = append(readers, r)
		}
		assert.False(t, old.HasNext(), "a reader that had read everything")

		sendAll(t, p, "after")
		for _, r := range append(readers, old) {
			assert.True(t, r.HasNext())
			assert.Equal(t, "after", readNext(t, r))
		}
	})
}

// assertNoLastMessage checks that the broker answers GET_LAST_MESSAGE_ID for k's topic with -1:-1.
func assertNoLastMessage(t *testing.T, k apulsar.Consumer, what string) {
	t.Helper()
	id := lastID(t, k)
	assert.Equal(t, int64(-1), id.LedgerID(), "%s: ledger of the last message id %v", what, id)
	assert.Equal(t, int64(-1), id.EntryID(), "%s: entry of the last message id %v", what, id)
}
