package pulsartest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// A non-persistent topic delivers to the consumers connected when a message arrives and keeps nothing for a
// subscription that connects later.
func TestNonPersistentTopicKeepsNothing(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		np := "non-persistent://public/default/" + topic
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: np, DisableBatching: true})
		sendAll(t, p, "nobody listens")
		k := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: np, SubscriptionName: "s", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		// Until the consumer's FLOW reached the broker it has no permits, and a non-persistent message without
		// a permit is dropped: send until one arrives.
		var got apulsar.Message
		testwait.Eventually(t, eventuallyWithin, func() bool {
			sendAll(t, p, "live")
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			m, err := k.Receive(ctx)
			got = m
			return err == nil
		}, "a live message")
		assert.Equal(t, "live", string(got.Payload()))
		k.Close()
		sendAll(t, p, "gone")
		late := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: np, SubscriptionName: "s", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		expectNone(t, late, 300*time.Millisecond)
		if b := tg.Broker(); b != nil {
			assert.Zero(t, b.Stats(np).Entries, "nothing stored")
		}
	})
}

// A reader with read_compacted on a topic that was never compacted reads every message, as on Pulsar (the
// client's TableView depends on it).
func TestReadCompactedWithoutCompaction(t *testing.T) {
	eachTarget(t, func(t *testing.T, _ target, c apulsar.Client, topic string) {
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		for _, kv := range [][2]string{{"a", "1"}, {"a", "2"}} {
			_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Key: kv[0], Payload: []byte(kv[1])})
			require.NoError(t, err)
		}
		r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID(), ReadCompacted: true})
		require.NoError(t, err)
		defer r.Close()
		for _, want := range []string{"1", "2"} {
			ctx, cancel := context.WithTimeout(t.Context(), receiveTimeout)
			m, err := r.Next(ctx)
			cancel()
			require.NoError(t, err)
			assert.Equal(t, want, string(m.Payload()))
		}
	})
}

// Terminating a topic disconnects its producers, which then close with ErrTopicTerminated; new producers are
// refused; consumers still read what was stored.
func TestTopicTermination(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	c, closing := newClientSeeingCloses(t, b.URL())
	topic := uniqueName(t, "t")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
	k := subscribe(t, c, apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	sendAll(t, p, "last")
	code, body := adminDo(t, http.MethodPost, b.AdminURL()+"/admin/v2/persistent/public/default/"+topic+"/terminate", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"entryId":0`)
	// Waited for through the client's log, not by polling with Send: the client's close of
	// the producer races with a concurrent Send (newClientSeeingCloses).
	testwait.Eventually(t, eventuallyWithin, closing, "the producer to close")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := p.Send(ctx, &apulsar.ProducerMessage{Payload: []byte("more")})
	require.ErrorIs(t, err, apulsar.ErrProducerClosed)
	_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TopicTerminated")
	assert.Equal(t, "last", string(receive(t, k).Payload()))
	assert.ErrorIs(t, b.TerminateTopic("missing"), pulsartest.ErrTopicNotFound)
}
