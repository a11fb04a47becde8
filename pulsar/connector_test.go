package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
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

// settleQuiet is how long a test waits to see that nothing more happens.
const settleQuiet = 200 * time.Millisecond

func TestSource_NoReceiveWithoutDemand(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 20, func(o *bqpulsar.SourceOptions) {
		o.MaxInflight, o.CompleteAtEnd = 8, false
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	time.Sleep(settleQuiet)
	require.Empty(t, ms.received(), "no demand, no delivery")
	require.Zero(t, src.InFlight(), "no demand, no receive: every message stays in the client queue")

	ms.request(3)
	eventually(t, func() bool { return len(ms.received()) == 3 }, "3 messages after Request(3), got %d", len(ms.received()))
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
	src := newTestSource(t, client, total, func(o *bqpulsar.SourceOptions) { o.MaxInflight = maxInflight })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	// A stalled stage: nothing is settled.
	eventually(t, func() bool { return len(ms.received()) == maxInflight }, "max-inflight messages delivered")
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
	eventually(t, func() bool { done, _ := ms.terminal(); return done }, "completes at the end")
	_, err := ms.terminal()
	require.NoError(t, err)
	require.Len(t, ms.received(), total)
	eventually(t, func() bool { return b.Backlog(src.Health().Channel, "tck") == 0 }, "every message acked")
}

func TestSource_CancelStopsReceiving(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 10, func(o *bqpulsar.SourceOptions) { o.CompleteAtEnd = false })
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(2)
	eventually(t, func() bool { return len(ms.received()) == 2 }, "2 delivered")
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

func TestSource_FailStrategyFailsTheStream(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 3, func(o *bqpulsar.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy = false, bqpulsar.FailureFail
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	eventually(t, func() bool { return len(ms.received()) == 1 }, "1 delivered")
	require.True(t, src.Health().Live)
	errBoom := errors.New("boom")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errBoom))
	eventually(t, func() bool { done, _ := ms.terminal(); return done }, "OnError after a nack under fail")
	_, err := ms.terminal()
	require.ErrorIs(t, err, bqpulsar.ErrSourceFailed)
	require.ErrorIs(t, err, errBoom)
	h := src.Health()
	require.False(t, h.Live)
	require.False(t, h.Ready)
	require.Contains(t, h.Reason, "boom")
}

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
	eventually(t, func() bool { return p.settled.Load() == p.total }, "all settled: %d", p.settled.Load())
	require.LessOrEqual(t, p.maxUnsettled.Load(), int64(window), "pending sends bounded by the window")
	require.Zero(t, p.nacks.Load())
	require.LessOrEqual(t, sink.Pending(), window)
	h := sink.Health()
	require.True(t, h.Live && h.Ready && h.Started)
}

func TestSink_FailedSendsAreNacked(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "sinkfail")
	sink, err := bqpulsar.NewSink(client, bqpulsar.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 1, SendTimeout: 300 * time.Millisecond},
		Window:   2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	b.FailNextSends(topic, 1, pulsartest.NotAllowedError)
	p := &windowPublisher{total: 5, window: 2}
	p.Subscribe(sink)
	eventually(t, func() bool { return p.settled.Load() == p.total }, "all settled")
	require.GreaterOrEqual(t, p.nacks.Load(), int64(1), "the failed send surfaced as a nack")
	require.LessOrEqual(t, p.maxUnsettled.Load(), int64(2))
}

// runtimeOf starts a runtime on cfg with the connector, shut down at cleanup.
func runtimeOf(t *testing.T, cfg map[string]string, register func(*messaging.Runtime), opts ...bqpulsar.ConnectorOption) *messaging.Runtime {
	t.Helper()
	c, err := messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt := messaging.New(c, messaging.WithConnector(bqpulsar.NewConnector(opts...)))
	register(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rt.Shutdown(ctx))
	})
	return rt
}

func incoming(url, topic string, kv ...string) map[string]string {
	m := map[string]string{
		"mp.messaging.incoming.in.connector":                   bqpulsar.ConnectorName,
		"mp.messaging.incoming.in.serviceUrl":                  url,
		"mp.messaging.incoming.in.topic":                       topic,
		"mp.messaging.incoming.in.subscriptionName":            "svc",
		"mp.messaging.incoming.in.subscriptionInitialPosition": "Earliest",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m["mp.messaging.incoming.in."+kv[i]] = kv[i+1]
	}
	return m
}

func publishEnvelopes(t *testing.T, client apulsar.Client, topic string, n int) {
	t.Helper()
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	defer func() { require.NoError(t, pub.Close()) }()
	for i := range n {
		_, err := pub.Publish(t.Context(), "urn:babel:orders:created", map[string]any{"order": i})
		require.NoError(t, err)
	}
}

func TestConnector_BabelQueueRetriesThenDeadLetters(t *testing.T) {
	for _, strategy := range []string{"republish", "nack"} {
		t.Run(strategy, func(t *testing.T) {
			b := pulsartest.NewBroker(t)
			client := newClient(t, b)
			topic := uniqueTopic(t, "orders")
			dlqTopic := topic + ".dlq"
			dead := collect(t, client, dlqTopic)
			var calls atomic.Int64
			var hooked atomic.Int64
			var urns sync.Map
			runtimeOf(t, incoming(b.URL(), topic, "max-attempts", "3", "retry-strategy", strategy,
				"negativeAck.redeliveryDelay", "30ms", "codec", bqpulsar.CodecBabelQueue),
				func(rt *messaging.Runtime) {
					messaging.ConsumeMessage(rt, "in", func(_ context.Context, m messaging.Message[*envelope.Envelope]) error {
						calls.Add(1)
						md, ok := messaging.MetadataOf[bqpulsar.IncomingMetadata](m.Metadata())
						if ok {
							urns.Store(md.URN, md.Attempts)
						}
						return errors.New("always fails")
					})
				},
				bqpulsar.WithDeadLetterHook(func(context.Context, bqpulsar.IncomingMetadata, error) { hooked.Add(1) }))
			publishEnvelopes(t, client, topic, 1)
			got := dead.wait(t, 1, waitLong)
			require.Equal(t, int64(3), calls.Load(), "three deliveries in total")
			require.Equal(t, "3", got[0].Properties()[bqpulsar.PropAttempts])
			env, err := envelope.Decode(got[0].Payload())
			require.NoError(t, err)
			require.NotNil(t, env.DeadLetter, "annotated copy")
			_, ok := urns.Load("urn:babel:orders:created")
			require.True(t, ok, "the URN reached the stage through metadata")
			eventually(t, func() bool { return b.Backlog(topic, "svc") == 0 }, "original settled")
			eventually(t, func() bool { return hooked.Load() == 1 }, "dead-letter hook called once")
			time.Sleep(settleQuiet)
			require.Equal(t, 1, dead.count())
		})
	}
}

func TestConnector_FailingDeadLetterProducerNacksNeverLoses(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "orders")
	dlqTopic := topic + ".dlq"
	dead := collect(t, client, dlqTopic)
	b.FailNextSends(dlqTopic, 2, pulsartest.NotAllowedError)
	var calls atomic.Int64
	// NotAllowedError makes the client time the send out (sendTimeoutMs bounds the
	// dead-letter producer of an incoming channel too).
	runtimeOf(t, incoming(b.URL(), topic, "max-attempts", "1", "negativeAck.redeliveryDelay", "30ms", "sendTimeoutMs", "300"),
		func(rt *messaging.Runtime) {
			messaging.Consume(rt, "in", func(context.Context, []byte) error {
				calls.Add(1)
				return errors.New("fails")
			})
		})
	publishN(t, client, topic, 1)
	got := dead.wait(t, 1, waitLong)
	require.Equal(t, "m-0", string(got[0].Payload()), "other payloads are dead-lettered byte for byte")
	require.GreaterOrEqual(t, calls.Load(), int64(3), "two failed dead-letter writes: nacked and redelivered twice")
	eventually(t, func() bool { return b.Backlog(topic, "svc") == 0 }, "acked once the copy was written")
}

func TestConnector_EndToEndProcess(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	in, out := uniqueTopic(t, "in"), uniqueTopic(t, "out")
	sunk := collect(t, client, out)
	cfg := incoming(b.URL(), in, "codec", bqpulsar.CodecBabelQueue)
	cfg["mp.messaging.outgoing.out.connector"] = bqpulsar.ConnectorName
	cfg["mp.messaging.outgoing.out.topic"] = out
	cfg["mp.messaging.outgoing.out.codec"] = bqpulsar.CodecBabelQueue
	cfg["mp.messaging.connector.babelqueue-pulsar.serviceUrl"] = b.URL()
	rt := runtimeOf(t, cfg, func(rt *messaging.Runtime) {
		messaging.Process(rt, "in", "out", func(_ context.Context, e *envelope.Envelope) (*envelope.Envelope, error) {
			return envelope.Make("urn:babel:invoices:issued", map[string]any{"from": e.Meta.ID}, envelope.WithQueue("invoices"))
		})
	})
	publishEnvelopes(t, client, in, 5)
	got := sunk.wait(t, 5, waitLong)
	for _, m := range got {
		require.Equal(t, "urn:babel:invoices:issued", m.Properties()[bqpulsar.PropJob], "bq-* projected by the sink")
	}
	eventually(t, func() bool { return b.Backlog(in, "svc") == 0 }, "inputs acked after their outputs")
	h := rt.Health()
	for _, ch := range h.Channels {
		assert.True(t, ch.Started && ch.Ready && ch.Live, "%+v", ch)
	}
}

func TestConnector_InvalidCombinations(t *testing.T) {
	c := bqpulsar.NewConnector()
	cases := []struct {
		name  string
		attrs map[string]string
	}{
		{"retry nack on Exclusive", map[string]string{"subscriptionType": "Exclusive", "retry-strategy": "nack"}},
		{"retry nack on Failover", map[string]string{"subscriptionType": "Failover", "retry-strategy": "nack"}},
		{"cumulative on Shared", map[string]string{"ack-strategy": "cumulative"}},
		{"continue without ack timeout", map[string]string{"failure-strategy": "continue"}},
		{"cumulative on Key_Shared", map[string]string{"subscriptionType": "Key_Shared", "ack-strategy": "cumulative"}},
		{"cumulative with reconsume-later", map[string]string{"subscriptionType": "Exclusive", "ack-strategy": "cumulative", "failure-strategy": "reconsume-later"}},
		{"zero-queue with reconsume-later", map[string]string{"zero-queue": "true", "failure-strategy": "reconsume-later"}},
		{"native DLQ with babelqueue", map[string]string{"deadLetterPolicy.maxRedeliverCount": "3"}},
		{"max-inflight 0", map[string]string{"max-inflight": "0"}},
		{"bad nack backoff", map[string]string{"negativeAck.redeliveryBackoff": "100,50,2"}},
		{"bad enum", map[string]string{"subscriptionType": "Sharded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := messaging.NewChannelConfig("in", bqpulsar.ConnectorName, messaging.Incoming, tc.attrs, c.Attributes())
			_, err := c.NewSource(t.Context(), cfg)
			require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
		})
	}
	t.Run("sink window 0", func(t *testing.T) {
		cfg := messaging.NewChannelConfig("out", bqpulsar.ConnectorName, messaging.Outgoing,
			map[string]string{"max-inflight-messages": "0"}, c.Attributes())
		_, err := c.NewSink(t.Context(), cfg)
		require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
	})
	require.NoError(t, c.Close(t.Context()))
}

func TestConnector_AssemblyErrorsAtStart(t *testing.T) {
	cfg := incoming("pulsar://127.0.0.1:1", "persistent://public/default/x",
		"subscriptionType", "Exclusive", "retry-strategy", "nack", "bogus-attribute", "1")
	cfg[messaging.KeyStrict] = "true"
	c, err := messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt := messaging.New(c, messaging.WithConnector(bqpulsar.NewConnector()))
	messaging.Consume(rt, "in", func(context.Context, []byte) error { return nil })
	err = rt.Start(t.Context())
	require.ErrorIs(t, err, messaging.ErrUnknownAttribute, "strict mode fails on an undeclared attribute")
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	_ = rt.Shutdown(t.Context())

	delete(cfg, "mp.messaging.incoming.in.bogus-attribute")
	c, err = messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt = messaging.New(c, messaging.WithConnector(bqpulsar.NewConnector()))
	messaging.Consume(rt, "in", func(context.Context, []byte) error { return nil })
	err = rt.Start(t.Context())
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute, "retry-strategy=nack on Exclusive")
	_ = rt.Shutdown(t.Context())
}

func TestEnvelopeCodec(t *testing.T) {
	codec := bqpulsar.EnvelopeCodec{}
	env, err := envelope.Make("urn:babel:a:b", map[string]any{"x": 1})
	require.NoError(t, err)
	b, err := codec.Encode(env)
	require.NoError(t, err)
	v, err := codec.Decode(b, reflectTypeOfEnvelope())
	require.NoError(t, err)
	e, ok := v.(*envelope.Envelope)
	require.True(t, ok)
	require.Equal(t, "urn:babel:a:b", e.URN())
	_, err = codec.Decode([]byte("not json"), reflectTypeOfEnvelope())
	require.ErrorIs(t, err, envelope.ErrPoison)
	_, err = codec.Encode(strconv.Itoa(1))
	require.Error(t, err)
}

func reflectTypeOfEnvelope() reflect.Type { return reflect.TypeFor[*envelope.Envelope]() }

func TestSource_AckTimeoutNacksThroughTheStrategy(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	var dlqTopic string
	src := newTestSource(t, client, 1, func(o *bqpulsar.SourceOptions) {
		o.CompleteAtEnd, o.MaxAttempts, o.AckTimeout = false, 2, 100*time.Millisecond
		dlqTopic = o.Consumer.Topic + ".dlq"
	})
	dead := collect(t, client, dlqTopic)
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	// The stage never settles: the timeout nacks (retry), the copy times out too (dead letter).
	got := dead.wait(t, 1, waitLong)
	require.Equal(t, "2", got[0].Properties()[bqpulsar.PropAttempts])
	require.Len(t, ms.received(), 2, "first delivery and the republished retry")
	require.ErrorIs(t, ms.received()[0].Ack(t.Context()), messaging.ErrAlreadySettled, "a late settlement is ignored")
	eventually(t, func() bool { return src.InFlight() == 0 }, "slots freed by the timeouts")
}

func TestSource_ContinueRedeliversAfterTheAckTimeout(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 1, func(o *bqpulsar.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy, o.AckTimeout = false, bqpulsar.FailureContinue, 150*time.Millisecond
		o.Consumer.NackRedeliveryDelay = 20 * time.Millisecond
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	eventually(t, func() bool { return len(ms.received()) == 1 }, "first delivery")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errors.New("later")))
	require.Zero(t, src.InFlight(), "continue frees the slot")
	eventually(t, func() bool { return len(ms.received()) == 2 }, "redelivered after the ack timeout")
	md, ok := messaging.MetadataOf[bqpulsar.IncomingMetadata](ms.received()[1].Metadata())
	require.True(t, ok)
	require.Equal(t, uint32(1), md.RedeliveryCount)
	require.NoError(t, ms.received()[1].Ack(t.Context()))
	eventually(t, func() bool { return b.Backlog(md.Topic, "tck") == 0 }, "acked")
}

func TestSource_ReconsumeLater(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 1, func(o *bqpulsar.SourceOptions) {
		o.CompleteAtEnd, o.FailureStrategy = false, bqpulsar.FailureReconsumeLater
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(reactive.Unbounded)
	eventually(t, func() bool { return len(ms.received()) == 1 }, "first delivery")
	require.NoError(t, ms.received()[0].Nack(t.Context(), errors.New("later"),
		messaging.RedeliverAfter(50*time.Millisecond), messaging.WithNackProperties(map[string]string{"why": "later"})))
	eventually(t, func() bool { return len(ms.received()) == 2 }, "reconsumed from the retry topic")
	md, ok := messaging.MetadataOf[bqpulsar.IncomingMetadata](ms.received()[1].Metadata())
	require.True(t, ok)
	require.Equal(t, "1", md.Properties["RECONSUMETIMES"])
	require.Equal(t, "later", md.Properties["why"])
	require.Equal(t, "m-0", string(ms.received()[1].Payload()))
	require.NoError(t, ms.received()[1].Ack(t.Context()))
}

func TestSource_ZeroQueue(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	src := newTestSource(t, client, 5, func(o *bqpulsar.SourceOptions) {
		o.MaxInflight = 2
		o.Consumer.EnableZeroQueueConsumer = true
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(1)
	eventually(t, func() bool { return len(ms.received()) == 1 }, "one permit, one message")
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
	eventually(t, func() bool { done, _ := ms.terminal(); return done }, "completes at the end")
}

func TestSink_NoWaitForWriteCompletion(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "nowait")
	col := collect(t, client, topic)
	sink, err := bqpulsar.NewSink(client, bqpulsar.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: topic}, Window: 3, NoWaitForWriteCompletion: true,
	})
	require.NoError(t, err)
	p := &windowPublisher{total: 50, window: 3}
	p.Subscribe(sink)
	eventually(t, func() bool { return p.settled.Load() == p.total }, "acked on enqueue")
	require.NoError(t, sink.Close(t.Context()), "Close flushes")
	col.wait(t, 50, waitLong)
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
	projecting, err := bqpulsar.NewSink(client, bqpulsar.SinkOptions{Producer: apulsar.ProducerOptions{Topic: topic}, ProjectEnvelope: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = projecting.Close(context.Background()) })
	m := messaging.WithMetadataItems(messaging.NewMessage(payload), bqpulsar.OutgoingMetadata{
		Key: "k1", Properties: map[string]string{"app": "x", bqpulsar.PropJob: "urn:babel:wrong:one"},
	})
	reactive.FromSlice(m).Subscribe(projecting)
	got := col.wait(t, 1, waitLong)
	require.Equal(t, "k1", got[0].Key())
	require.Equal(t, "x", got[0].Properties()["app"])
	require.Equal(t, "urn:babel:a:b", got[0].Properties()[bqpulsar.PropJob], "bq-* of the envelope win")
}

func TestSource_SurvivesADroppedConnection(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	const total = 20
	src := newTestSource(t, client, total, func(o *bqpulsar.SourceOptions) { o.MaxInflight = 4 })
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
	require.True(t, h.Live && h.Started, "%+v", h)
}
