package connector_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// manualSubscriber records what a Source delivers and lets the test request and settle.
type manualSubscriber struct {
	mu   sync.Mutex
	sub  reactive.Subscription
	msgs []bytesMsg
	err  error
	done bool
}

func (m *manualSubscriber) OnSubscribe(s reactive.Subscription) {
	m.mu.Lock()
	m.sub = s
	m.mu.Unlock()
}

func (m *manualSubscriber) OnNext(v bytesMsg) {
	m.mu.Lock()
	m.msgs = append(m.msgs, v)
	m.mu.Unlock()
}

func (m *manualSubscriber) OnError(err error) {
	m.mu.Lock()
	m.err, m.done = err, true
	m.mu.Unlock()
}

func (m *manualSubscriber) OnComplete() {
	m.mu.Lock()
	m.done = true
	m.mu.Unlock()
}

func (m *manualSubscriber) request(n int64) {
	m.mu.Lock()
	s := m.sub
	m.mu.Unlock()
	s.Request(n)
}

func (m *manualSubscriber) received() []bytesMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bytesMsg(nil), m.msgs...)
}

func (m *manualSubscriber) terminal() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done, m.err
}

func TestSource_NoReceiveWithoutDemand(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 20, func(o *connector.SourceOptions) {
		o.MaxInflight, o.CompleteAtEnd = 8, false
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	time.Sleep(settleQuiet)
	require.Empty(t, ms.received(), "no demand, no delivery")
	require.Zero(t, src.InFlight(), "no demand, no receive: every message stays in the client queue")

	ms.request(3)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 3 }, "3 messages after Request(3), got %d", len(ms.received()))
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), 3, "not one more than requested")
	require.Equal(t, 3, src.InFlight())
	for _, m := range ms.received() {
		require.NoError(t, m.Ack(t.Context()))
	}
	require.Zero(t, src.InFlight())
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), 3, "settling is no demand")
}

func TestSource_UnboundedDemandNeverExceedsMaxInflight(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	const total, maxInflight = 60, 5
	src := newTestSource(t, client, total, func(o *connector.SourceOptions) { o.MaxInflight = maxInflight })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	// A stalled stage: nothing is settled.
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == maxInflight }, "max-inflight messages delivered")
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), maxInflight, "Request(Unbounded) with a stalled stage stops at max-inflight")
	require.Equal(t, maxInflight, src.InFlight())

	// The stage resumes: settle one at a time; in-flight never exceeds the bound.
	settled := 0
	for settled < total {
		msgs := ms.received()
		require.LessOrEqual(t, len(msgs)-settled, maxInflight)
		require.LessOrEqual(t, src.InFlight(), maxInflight)
		if settled < len(msgs) {
			require.NoError(t, msgs[settled].Ack(t.Context()))
			settled++
			continue
		}
		time.Sleep(time.Millisecond)
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { done, _ := ms.terminal(); return done }, "completes at the end")
	_, err := ms.terminal()
	require.NoError(t, err)
	require.Len(t, ms.received(), total)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(src.Health().Channel, "tck") == 0 }, "every message acked")
}

func TestSource_CancelStopsReceiving(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 10, func(o *connector.SourceOptions) { o.CompleteAtEnd = false })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(2)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 2 }, "2 delivered")
	ms.sub.Cancel()
	ms.request(5) // a no-op after Cancel (rule 3.6)
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), 2)
	require.Equal(t, 2, src.InFlight(), "delivered messages stay settle-able after Cancel")
	for _, m := range ms.received() {
		require.NoError(t, m.Ack(t.Context()))
	}
	require.Zero(t, src.InFlight())
}

// A subscriber that comes after Close gets OnError wrapping both messaging.ErrClosed (what
// the runtime tests for) and bqpulsar.ErrClosed (what users of the binding test for).
func TestSource_SubscribeAfterCloseFailsWithErrClosed(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 0, nil)
	require.NoError(t, src.Close(t.Context()))
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { done, _ := ms.terminal(); return done }, "no terminal signal")
	_, err := ms.terminal()
	require.ErrorIs(t, err, messaging.ErrClosed)
	require.ErrorIs(t, err, bqpulsar.ErrClosed)
	require.Empty(t, ms.received())
}

func TestSource_FailStrategyFailsTheStream(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 3, func(o *connector.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy = false, connector.FailureFail
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "1 delivered")
	require.True(t, src.Health().Live)
	errBoom := errors.New("boom")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errBoom))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { done, _ := ms.terminal(); return done }, "OnError after a nack under fail")
	_, err := ms.terminal()
	require.ErrorIs(t, err, connector.ErrSourceFailed)
	require.ErrorIs(t, err, errBoom)
	h := src.Health()
	require.False(t, h.Live)
	require.False(t, h.Ready)
	require.Contains(t, h.Reason, "boom")
}

func TestSource_AckTimeoutNacksThroughTheStrategy(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	var dlqTopic string
	src := newTestSource(t, client, 1, func(o *connector.SourceOptions) {
		o.CompleteAtEnd, o.MaxAttempts, o.AckTimeout = false, 2, 100*time.Millisecond
		dlqTopic = o.Consumer.Topic + ".dlq"
	})
	dead := collect(t, client, dlqTopic)
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	// The stage never settles: the timeout nacks (retry), the copy times out too (dead letter).
	got := dead.wait(t, 1)
	require.Equal(t, "2", got[0].Properties()[bqpulsar.PropAttempts])
	require.Len(t, ms.received(), 2, "first delivery and the republished retry")
	require.ErrorIs(t, ms.received()[0].Ack(t.Context()), messaging.ErrAlreadySettled, "a late settlement is ignored")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return src.InFlight() == 0 }, "slots freed by the timeouts")
}

func TestSource_ContinueRedeliversAfterTheAckTimeout(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 1, func(o *connector.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy, o.AckTimeout = false, connector.FailureContinue, 150*time.Millisecond
		o.Consumer.NackRedeliveryDelay = 20 * time.Millisecond
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "first delivery")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errors.New("later")))
	require.Zero(t, src.InFlight(), "continue frees the slot")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 2 }, "redelivered after the ack timeout")
	md, ok := messaging.MetadataOf[connector.IncomingMetadata](ms.received()[1].Metadata())
	require.True(t, ok)
	require.Equal(t, uint32(1), md.RedeliveryCount)
	require.NoError(t, ms.received()[1].Ack(t.Context()))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(md.Topic, "tck") == 0 }, "acked")
}

func TestSource_ReconsumeLater(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 1, func(o *connector.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy = false, connector.FailureReconsumeLater
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "first delivery")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errors.New("later"),
		messaging.RedeliverAfter(50*time.Millisecond), messaging.WithNackProperties(map[string]string{"why": "later"})))
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 2 }, "reconsumed from the retry topic")
	md, ok := messaging.MetadataOf[connector.IncomingMetadata](ms.received()[1].Metadata())
	require.True(t, ok)
	require.Equal(t, "1", md.Properties["RECONSUMETIMES"])
	require.Equal(t, "later", md.Properties["why"])
	require.Equal(t, "m-0", string(ms.received()[1].Payload()))
	require.NoError(t, ms.received()[1].Ack(t.Context()))
}

// failure-strategy=ignore acknowledges a nacked message (source_options.go, FailureIgnore),
// and so does a DropMessage nack under babelqueue: the subscription's backlog empties and
// the message is neither redelivered nor retried. A nack, a retry or a dead letter would
// each leave the message, or a copy of it, to be delivered again, or a dead letter behind.
func TestSource_NacksThatAcknowledge(t *testing.T) {
	for name, tc := range map[string]struct {
		strategy connector.FailureStrategy
		opts     []messaging.NackOption
	}{
		"ignore":                 {strategy: connector.FailureIgnore},
		"babelqueue DropMessage": {strategy: connector.FailureBabelQueue, opts: []messaging.NackOption{messaging.DropMessage()}},
	} {
		t.Run(name, func(t *testing.T) {
			b := pulsartest.NewBroker(t)
			client := newClient(t, b)
			var topic string
			src := newTestSource(t, client, 1, func(o *connector.SourceOptions) {
				o.CompleteAtEnd, o.FailureStrategy, o.MaxAttempts = false, tc.strategy, 3
				o.Consumer.NackRedeliveryDelay = 20 * time.Millisecond
				topic = o.Consumer.Topic
			})
			dead := collect(t, client, topic+".dlq")
			ms := &manualSubscriber{}
			src.Subscribe(ms)
			ms.request(reactive.Unbounded)
			testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "first delivery")
			require.NoError(t, ms.received()[0].Nack(t.Context(), errors.New("not wanted"), tc.opts...))
			testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "tck") == 0 || len(ms.received()) > 1 },
				"neither acknowledged nor delivered again")
			var delivered []string
			for _, m := range ms.received() {
				delivered = append(delivered, string(m.Payload()))
			}
			require.Equal(t, []string{"m-0"}, delivered, "the nacked message was delivered again")
			require.Zero(t, b.Backlog(topic, "tck"), "the nacked message was acknowledged")
			require.Zero(t, dead.count(), "nothing dead-lettered")
		})
	}
}

// TestSource_ZeroQueue: with a zero-queue consumer each request asks the broker for one
// message, and no more than max-inflight are held.
//
// The messages are published only once the broker has seen the first receive's permit:
// pulsar-client-go v0.21.0, as v0.19.0 before it, tells a consumer's dispatcher that it is
// connected from a goroutine of its own (grabConn starts it after the SUBSCRIBE's answer),
// and a dispatcher that takes that notice after the first MESSAGE has already been queued
// drops the queued messages (the notice resets its queue). A normal consumer sends its
// first permits only on that notice, so nothing can be queued before it; a zero-queue
// consumer sends its permit on Receive, which can come first. The dropped messages stay
// unacknowledged on the broker until the consumer reconnects or closes, so the receive
// waits. With messages already in the topic at subscribe time this test stalled about once
// in 300 runs under -race (with v0.19.0); the connector's package doc states the caveat.
func TestSource_ZeroQueue(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "src")
	src, err := connector.NewSource(client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "tck", Type: apulsar.Shared,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
			EnableZeroQueueConsumer:     true,
		},
		MaxInflight: 2,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = src.Close(ctx)
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Stats(topic).Subscriptions["tck"].Permits == 1 }, "the first receive's one permit")
	publishN(t, client, topic, 5)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return len(ms.received()) == 1 }, "one permit, one message")
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), 1)
	ms.request(reactive.Unbounded)
	for settled := 0; settled < 5; {
		msgs := ms.received()
		require.LessOrEqual(t, len(msgs)-settled, 2)
		if settled < len(msgs) {
			require.NoError(t, msgs[settled].Ack(t.Context()))
			settled++
			continue
		}
		time.Sleep(time.Millisecond)
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Stats(topic).Subscriptions["tck"].Backlog == 0 }, "every message acknowledged")
	time.Sleep(settleQuiet)
	require.Len(t, ms.received(), 5, "nothing more was delivered")
}

func TestSource_SurvivesADroppedConnection(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	const total = 20
	src := newTestSource(t, client, total, func(o *connector.SourceOptions) { o.MaxInflight = 4 })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	seen := map[string]bool{}
	for settled := 0; len(seen) < total; {
		msgs := ms.received()
		if settled < len(msgs) {
			seen[string(msgs[settled].Payload())] = true
			require.NoError(t, msgs[settled].Ack(t.Context()))
			settled++
			if settled == 5 {
				b.DropConnections()
			}
			continue
		}
		if done, err := ms.terminal(); done {
			require.NoError(t, err)
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Len(t, seen, total, "every message delivered across the reconnect")
	h := src.Health()
	require.True(t, h.Started && h.Completed && !h.Live, "completed at its end, nothing failed: %+v", h)
}
