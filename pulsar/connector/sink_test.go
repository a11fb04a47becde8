package connector_test

import (
	"context"
	"fmt"
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
