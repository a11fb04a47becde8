package connector_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// windowPublisher emits numbered messages against demand and checks that the sink never
// has more than window unsettled (requested beyond the settled plus the window).
type windowPublisher struct {
	total, window int64
	emitted       atomic.Int64
	settled       atomic.Int64
	maxUnsettled  atomic.Int64
	nacks         atomic.Int64
	out           *reactive.Outlet[bytesMsg]
}

func (p *windowPublisher) Subscribe(s reactive.Subscriber[bytesMsg]) {
	sub := reactive.NewOutlet(s, func(canEmit bool) (bytesMsg, reactive.PollStatus, error) {
		if p.emitted.Load() == p.total {
			return nil, reactive.PollDone, nil
		}
		if !canEmit {
			return nil, reactive.PollEmpty, nil
		}
		i := p.emitted.Add(1)
		if u := i - p.settled.Load(); u > p.maxUnsettled.Load() {
			p.maxUnsettled.Store(u)
		}
		settle := func() {
			p.settled.Add(1)
		}
		return messaging.NewMessage(fmt.Appendf(nil, "w-%d", i),
			messaging.WithAckFunc(func(context.Context) error { settle(); return nil }),
			messaging.WithNackFunc(func(context.Context, error, messaging.NackOptions) error {
				p.nacks.Add(1)
				settle()
				return nil
			})), reactive.PollReady, nil
	}, nil)
	p.out = sub
	sub.Start()
}

func TestSink_NeverExceedsItsWindow(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	const window = 4
	sink := newTestSink(t, client, window)
	require.Equal(t, window, sink.Window())
	p := &windowPublisher{total: 300, window: window}
	p.Subscribe(sink)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return p.settled.Load() == p.total }, "all settled: %d", p.settled.Load())
	require.LessOrEqual(t, p.maxUnsettled.Load(), int64(window), "pending sends bounded by the window")
	require.Zero(t, p.nacks.Load())
	require.LessOrEqual(t, sink.Pending(), window)
	h := sink.Health()
	// The upstream completed: the channel's stream ended, which is its only reason not to
	// be live.
	require.True(t, h.Started && h.Completed && !h.Live, "%+v", h)
}

func TestSink_FailedSendsAreNacked(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "sinkfail")
	sink, err := connector.NewSink(client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 1, SendTimeout: 300 * time.Millisecond},
		Window:   2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	b.FailNextSends(topic, 1, pulsartest.NotAllowedError)
	p := &windowPublisher{total: 5, window: 2}
	p.Subscribe(sink)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return p.settled.Load() == p.total }, "all settled")
	require.GreaterOrEqual(t, p.nacks.Load(), int64(1), "the failed send surfaced as a nack")
	require.LessOrEqual(t, p.maxUnsettled.Load(), int64(2))
}

func TestSink_NoWaitForWriteCompletion(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "nowait")
	col := collect(t, client, topic)
	sink, err := connector.NewSink(client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic}, Window: 3, NoWaitForWriteCompletion: true,
	})
	require.NoError(t, err)
	p := &windowPublisher{total: 50, window: 3}
	p.Subscribe(sink)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return p.settled.Load() == p.total }, "acked on enqueue")
	require.NoError(t, sink.Close(t.Context()), "Close flushes")
	col.wait(t, 50)
}

func TestSink_OutgoingMetadata(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "md")
	col := collect(t, client, topic)
	env, err := envelope.Make("urn:babel:a:b", map[string]any{"x": 1}, envelope.WithQueue("q"))
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	projecting, err := connector.NewSink(client, connector.SinkOptions{Producer: apulsar.ProducerOptions{Topic: topic}, ProjectEnvelope: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = projecting.Close(context.Background()) })
	m := messaging.WithMetadataItems(messaging.NewMessage(payload), connector.OutgoingMetadata{
		Key: "k1", Properties: map[string]string{"app": "x", bqpulsar.PropJob: "urn:babel:wrong:one"},
	})
	reactive.FromSlice(m).Subscribe(projecting)
	got := col.wait(t, 1)
	require.Equal(t, "k1", got[0].Key())
	require.Equal(t, "x", got[0].Properties()["app"])
	require.Equal(t, "urn:babel:a:b", got[0].Properties()[bqpulsar.PropJob], "bq-* of the envelope win")
}

// Every field of OutgoingMetadata reaches the message the sink writes (package doc:
// "sets its key, ordering key, properties, event time, delay and replication; a delay also
// writes the bq-delay property"). The key, the ordering key, the event time and bq-delay
// are read back on the broker; the delays are seen to hold their messages back on a Shared
// subscription, which honours them, while an undelayed message sent after them arrives.
// Replication cannot be observed there: the embedded broker has one cluster, and a received
// message does not say which clusters it was meant for. It is checked on the message the
// sink hands to its producer, as a publish hook sees it.
func TestSink_EveryOutgoingMetadataFieldIsWritten(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "md-all")
	all := collect(t, client, topic) // Exclusive: delays do not apply, every message is seen
	shared, err := client.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: apulsar.Shared})
	require.NoError(t, err)
	t.Cleanup(shared.Close)

	type replication struct {
		disabled bool
		clusters []string
	}
	var mu sync.Mutex
	replicated := map[string]replication{}
	hook := bqpulsar.Hooks{Publish: func(_ context.Context, m *bqpulsar.OutgoingMessage) func(apulsar.MessageID, error) {
		mu.Lock()
		replicated[string(m.Message.Payload)] = replication{m.Message.DisableReplication, slices.Clone(m.Message.ReplicationClusters)}
		mu.Unlock()
		return nil
	}}
	// Without batching the messages are written in the order sent, so an undelayed copy of
	// a delayed message would be delivered first.
	sink, err := connector.NewSink(client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic, DisableBatching: true}, Hooks: []bqpulsar.Hooks{hook},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })

	eventTime := time.UnixMilli(1_700_000_000_123)
	with := func(payload string, md connector.OutgoingMetadata) bytesMsg {
		return messaging.WithMetadataItems(messaging.NewMessage([]byte(payload)), md)
	}
	reactive.FromSlice(
		with("after", connector.OutgoingMetadata{DeliverAfter: time.Hour}),
		with("at", connector.OutgoingMetadata{DeliverAt: time.Now().Add(time.Hour)}),
		with("now", connector.OutgoingMetadata{Key: "k", OrderingKey: "ok", EventTime: eventTime, DisableReplication: true}),
		with("clusters", connector.OutgoingMetadata{ReplicationClusters: []string{"east", "west"}}),
	).Subscribe(sink)

	got := map[string]apulsar.Message{}
	for _, m := range all.wait(t, 4) {
		got[string(m.Payload())] = m
	}
	require.Len(t, got, 4)
	now := got["now"]
	require.Equal(t, "k", now.Key())
	require.Equal(t, "ok", now.OrderingKey())
	require.True(t, eventTime.Equal(now.EventTime()), "event time %v, want %v", now.EventTime(), eventTime)
	require.NotContains(t, now.Properties(), bqpulsar.PropDelay, "an undelayed message carries no bq-delay")
	require.Equal(t, "3600000", got["after"].Properties()[bqpulsar.PropDelay], "DeliverAfter writes bq-delay")
	atDelay, err := strconv.ParseInt(got["at"].Properties()[bqpulsar.PropDelay], 10, 64)
	require.NoError(t, err, "DeliverAt writes bq-delay")
	require.True(t, atDelay > 0 && atDelay <= time.Hour.Milliseconds(), "bq-delay of DeliverAt: %d ms", atDelay)

	// On the Shared subscription the delayed messages, sent first, are held back: the first
	// two deliveries are the undelayed ones.
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	var first []string
	for range 2 {
		m, err := shared.Receive(ctx)
		require.NoError(t, err)
		first = append(first, string(m.Payload()))
		require.NoError(t, shared.Ack(m))
	}
	require.Equal(t, []string{"now", "clusters"}, first, "the delayed messages are not delivered before their time")

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, replication{disabled: true}, replicated["now"])
	require.Equal(t, replication{clusters: []string{"east", "west"}}, replicated["clusters"])
	require.Equal(t, replication{}, replicated["after"])
}
