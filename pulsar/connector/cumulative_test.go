package connector_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// publishUnbatched publishes m-0 … m-(n-1), one entry each.
func publishUnbatched(t *testing.T, client apulsar.Client, topic string, n int) {
	t.Helper()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	for i := range n {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)})
		require.NoError(t, err)
	}
}

// TestSource_CumulativeAckOutOfOrderSettlement is the RUNTIME.md §13.3 scenario: with
// ack-strategy=cumulative on an Exclusive subscription, settling 3, 1, 2 acknowledges only
// once the prefix is complete, and a nack in the middle holds the prefix back until its
// redelivered copy is settled. The broker's backlog is checked after each step.
func TestSource_CumulativeAckOutOfOrderSettlement(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic, sub := uniqueTopic(t, "cum"), "cum"
	publishUnbatched(t, client, topic, 5)

	conn, err := connector.New(connector.WithClient(client))
	require.NoError(t, err)
	cfg := messaging.NewChannelConfig("in", connector.Name, messaging.Incoming, map[string]string{
		"topic": topic, "subscriptionName": sub, "subscriptionType": "Exclusive",
		"subscriptionInitialPosition": "Earliest", "ack-strategy": "cumulative",
		"failure-strategy": "nack", "negativeAck.redeliveryDelay": "30ms",
	}, conn.Attributes())
	src, err := conn.NewSource(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = src.Close(ctx)
		_ = conn.Close(ctx)
	})
	backlog := func() int { return b.Backlog(topic, sub) }
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(3)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 3 }, "3 delivered")
	got := ms.received()
	for i, m := range got {
		require.Equal(t, fmt.Sprintf("m-%d", i), string(m.Payload()))
	}
	require.Equal(t, 5, backlog())

	// Settle 3 first: its predecessors are unsettled, nothing may be acknowledged.
	require.NoError(t, got[2].Ack(t.Context()))
	time.Sleep(settleQuiet)
	require.Equal(t, 5, backlog(), "3 settled alone: no acknowledgement")

	// Settle 1: the prefix is 1 only.
	require.NoError(t, got[0].Ack(t.Context()))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return backlog() == 4 }, "1 acknowledged, backlog %d", backlog())
	time.Sleep(settleQuiet)
	require.Equal(t, 4, backlog(), "3 still held back by 2")

	// Settle 2: the prefix 1, 2, 3 is complete.
	require.NoError(t, got[1].Ack(t.Context()))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return backlog() == 2 }, "1-3 acknowledged, backlog %d", backlog())

	// A nack in the middle: 4 nacked, 5 settled; 5 must not be acknowledged (that would
	// cover 4), until the redelivered 4 is settled.
	ms.request(2)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 5 }, "4 and 5 delivered")
	got = ms.received()
	require.Equal(t, "m-3", string(got[3].Payload()))
	require.Equal(t, "m-4", string(got[4].Payload()))
	require.NoError(t, got[3].Nack(t.Context(), errors.New("boom")))
	require.NoError(t, got[4].Ack(t.Context()))
	time.Sleep(settleQuiet)
	require.Equal(t, 2, backlog(), "5 settled after a nacked 4: no acknowledgement")

	// The broker rewinds: 4 comes again (and 5 as a duplicate).
	ms.request(10)
	var again bytesMsg
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		for _, m := range ms.received()[5:] {
			if string(m.Payload()) == "m-3" {
				again = m
				return true
			}
		}
		return false
	}, "4 redelivered")
	require.Equal(t, 2, backlog(), "nothing acknowledged before the copy of 4 is settled")
	require.NoError(t, again.Ack(t.Context()))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return backlog() == 0 }, "4 and 5 acknowledged, backlog %d", backlog())

	// Settling the duplicates changes nothing.
	for _, m := range ms.received()[5:] {
		if m != again {
			require.NoError(t, m.Ack(t.Context()))
		}
	}
	require.Zero(t, backlog())
}
