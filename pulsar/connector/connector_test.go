package connector_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// runtimeOf starts a runtime on cfg with the connector, shut down at cleanup.
func runtimeOf(t *testing.T, cfg map[string]string, register func(*messaging.Runtime), opts ...connector.Option) *messaging.Runtime {
	t.Helper()
	c, err := messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt := messaging.New(c, messaging.WithConnector(newConnector(t, opts...)))
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
		"mp.messaging.incoming.in.connector":                   connector.Name,
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
				"negativeAck.redeliveryDelay", "30ms", "codec", connector.CodecBabelQueue),
				func(rt *messaging.Runtime) {
					messaging.ConsumeMessage(rt, "in", func(_ context.Context, m messaging.Message[*envelope.Envelope]) error {
						calls.Add(1)
						md, ok := messaging.MetadataOf[connector.IncomingMetadata](m.Metadata())
						if ok {
							urns.Store(md.URN, md.Attempts)
						}
						return errors.New("always fails")
					})
				},
				connector.WithDeadLetterHook(func(context.Context, connector.IncomingMetadata, error) { hooked.Add(1) }))
			publishEnvelopes(t, client, topic, 1)
			got := dead.wait(t, 1)
			require.Equal(t, int64(3), calls.Load(), "three deliveries in total")
			require.Equal(t, "3", got[0].Properties()[bqpulsar.PropAttempts])
			env, err := envelope.Decode(got[0].Payload())
			require.NoError(t, err)
			require.NotNil(t, env.DeadLetter, "annotated copy")
			_, ok := urns.Load("urn:babel:orders:created")
			require.True(t, ok, "the URN reached the stage through metadata")
			testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "svc") == 0 }, "original settled")
			testwait.Eventually(t, brokertest.WaitLong, func() bool { return hooked.Load() == 1 }, "dead-letter hook called once")
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
	got := dead.wait(t, 1)
	require.Equal(t, "m-0", string(got[0].Payload()), "other payloads are dead-lettered byte for byte")
	require.GreaterOrEqual(t, calls.Load(), int64(3), "two failed dead-letter writes: nacked and redelivered twice")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "svc") == 0 }, "acked once the copy was written")
}

func TestConnector_EndToEndProcess(t *testing.T) {
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	in, out := uniqueTopic(t, "in"), uniqueTopic(t, "out")
	sunk := collect(t, client, out)
	cfg := incoming(b.URL(), in, "codec", connector.CodecBabelQueue)
	cfg["mp.messaging.outgoing.out.connector"] = connector.Name
	cfg["mp.messaging.outgoing.out.topic"] = out
	cfg["mp.messaging.outgoing.out.codec"] = connector.CodecBabelQueue
	cfg["mp.messaging.connector.babelqueue-pulsar.serviceUrl"] = b.URL()
	rt := runtimeOf(t, cfg, func(rt *messaging.Runtime) {
		messaging.Process(rt, "in", "out", func(_ context.Context, e *envelope.Envelope) (*envelope.Envelope, error) {
			return envelope.Make("urn:babel:invoices:issued", map[string]any{"from": e.Meta.ID}, envelope.WithQueue("invoices"))
		})
	})
	publishEnvelopes(t, client, in, 5)
	got := sunk.wait(t, 5)
	for _, m := range got {
		require.Equal(t, "urn:babel:invoices:issued", m.Properties()[bqpulsar.PropJob], "bq-* projected by the sink")
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(in, "svc") == 0 }, "inputs acked after their outputs")
	h := rt.Health()
	for _, ch := range h.Channels {
		assert.True(t, ch.Started && ch.Ready && ch.Live, "%+v", ch)
	}
}

// TestConnector_InvalidCombinations checks that every invalid configuration fails with
// messaging.ErrInvalidAttribute naming the channel and the rule. The combinations of
// options are judged by NewSource alone (their errors also wrap
// bqpulsar.ErrInvalidOption); what only the attributes show is judged by the connector.
func TestConnector_InvalidCombinations(t *testing.T) {
	c := newConnector(t)
	cases := []struct {
		name        string
		attrs       map[string]string
		want        string
		constructor bool // judged by NewSource
	}{
		{"retry nack on Exclusive", map[string]string{"subscriptionType": "Exclusive", "retry-strategy": "nack"}, "retry by nack needs a Shared or Key_Shared subscription", true},
		{"retry nack on Failover", map[string]string{"subscriptionType": "Failover", "retry-strategy": "nack"}, "redeliveries on Failover", true},
		{"cumulative on Shared", map[string]string{"ack-strategy": "cumulative"}, "cumulative acknowledgement on a Shared subscription", true},
		{"continue without ack timeout", map[string]string{"failure-strategy": "continue"}, "continue needs an ack timeout", true},
		{"cumulative on Key_Shared", map[string]string{"subscriptionType": "Key_Shared", "ack-strategy": "cumulative"}, "cumulative acknowledgement on a Key_Shared subscription", true},
		{"cumulative with reconsume-later", map[string]string{"subscriptionType": "Exclusive", "ack-strategy": "cumulative", "failure-strategy": "reconsume-later"}, "cumulative acknowledgement cannot be combined with reconsume-later", true},
		{"zero-queue with reconsume-later", map[string]string{"zero-queue": "true", "failure-strategy": "reconsume-later"}, "reconsume-later cannot be combined with a zero-queue consumer", true},
		{"native DLQ with babelqueue", map[string]string{"deadLetterPolicy.maxRedeliverCount": "3"}, "deadLetterPolicy.maxRedeliverCount not allowed with failure-strategy=babelqueue", false},
		{"max-inflight 0", map[string]string{"max-inflight": "0"}, "max-inflight must be >= 1", false},
		{"max-attempts 0", map[string]string{"max-attempts": "0"}, "max-attempts must be >= 1", false},
		{"receiverQueueSize 0", map[string]string{"receiverQueueSize": "0"}, "receiverQueueSize must be >= 1", false},
		{"native DLQ redeliveries 0", map[string]string{"failure-strategy": "nack", "deadLetterPolicy.maxRedeliverCount": "0"}, "deadLetterPolicy.maxRedeliverCount must be >= 1", false},
		{"invalid queue", map[string]string{"queue": "a/b"}, "queue: dlq: invalid", false},
		{"invalid queue beside a dead-letter topic", map[string]string{"queue": "a/b", "dead-letter-topic": "orders-dead"}, "queue: dlq: invalid", false},
		{"invalid queue without dead letters", map[string]string{"queue": "a/b", "dead-letter-enabled": "false"}, "queue: dlq: invalid", false},
		{"bad nack backoff", map[string]string{"negativeAck.redeliveryBackoff": "100,50,2"}, "negativeAck.redeliveryBackoff", false},
		{"bad enum", map[string]string{"subscriptionType": "Sharded"}, `"Sharded" is not one of`, false},
		{"transactions with cumulative", map[string]string{"subscriptionType": "Exclusive", "ack-strategy": "cumulative", "transactions": "5s"}, "transactions cannot be combined with cumulative acknowledgement", true},
		{"transactions with continue", map[string]string{"failure-strategy": "continue", "ackTimeoutMillis": "1000", "transactions": "5s"}, "transactions cannot be combined with failure strategy continue", true},
		{"transactions with reconsume-later", map[string]string{"failure-strategy": "reconsume-later", "transactions": "5s"}, "transactions cannot be combined with failure strategy reconsume-later", true},
		{"negative transactions", map[string]string{"transactions": "-1s"}, "transactions must be >= 0", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := messaging.NewChannelConfig("in", connector.Name, messaging.Incoming, tc.attrs, c.Attributes())
			_, err := c.NewSource(t.Context(), cfg)
			require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
			require.ErrorContains(t, err, `channel "in"`)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.constructor, errors.Is(err, bqpulsar.ErrInvalidOption), "judged once, by the right party: %v", err)
		})
	}
	t.Run("sink window 0", func(t *testing.T) {
		cfg := messaging.NewChannelConfig("out", connector.Name, messaging.Outgoing,
			map[string]string{"max-inflight-messages": "0"}, c.Attributes())
		_, err := c.NewSink(t.Context(), cfg)
		require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
		require.ErrorContains(t, err, `channel "out": max-inflight-messages must be >= 1`)
	})
	for name, tc := range map[string]struct {
		attrs map[string]string
		want  string
	}{
		"sink maxPendingMessages 0": {map[string]string{"maxPendingMessages": "0"}, "maxPendingMessages must be >= 1"},
		"sink with two topics":      {map[string]string{"topic": "a,b"}, "an outgoing channel takes one topic, got 2"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.NewSink(t.Context(), messaging.NewChannelConfig("out", connector.Name, messaging.Outgoing, tc.attrs, c.Attributes()))
			require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
			require.ErrorContains(t, err, `channel "out": `+tc.want)
		})
	}
	require.NoError(t, c.Close(t.Context()))
}

func TestNew_RefusesBadOptions(t *testing.T) {
	noop := func(*apulsar.ConsumerOptions) {}
	cases := map[string]connector.Option{
		"nil logger":              connector.WithLogger(nil),
		"nil client":              connector.WithClient(nil),
		"nil dead-letter hook":    connector.WithDeadLetterHook(nil),
		"nil consumer customizer": connector.WithConsumerCustomizer("in", nil),
		"nil producer customizer": connector.WithProducerCustomizer("out", nil),
		"blank channel":           connector.WithConsumerCustomizer(" ", noop),
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := connector.New(o)
			require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
			require.Nil(t, c)
		})
	}
	c, err := connector.New(nil, connector.WithLogger(zap.NewNop()), connector.WithConsumerCustomizer("in", noop))
	require.NoError(t, err, "nil options are skipped")
	require.Equal(t, connector.Name, c.Name())
	require.NoError(t, c.Close(t.Context()))
}

func TestConnector_AssemblyErrorsAtStart(t *testing.T) {
	cfg := incoming("pulsar://127.0.0.1:1", "persistent://public/default/x",
		"subscriptionType", "Exclusive", "retry-strategy", "nack", "bogus-attribute", "1")
	cfg[messaging.KeyStrict] = "true"
	c, err := messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt := messaging.New(c, messaging.WithConnector(newConnector(t)))
	messaging.Consume(rt, "in", func(context.Context, []byte) error { return nil })
	err = rt.Start(t.Context())
	require.ErrorIs(t, err, messaging.ErrUnknownAttribute, "strict mode fails on an undeclared attribute")
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	_ = rt.Shutdown(t.Context())

	delete(cfg, "mp.messaging.incoming.in.bogus-attribute")
	c, err = messaging.LoadConfig(messaging.FromMap(cfg))
	require.NoError(t, err)
	rt = messaging.New(c, messaging.WithConnector(newConnector(t)))
	messaging.Consume(rt, "in", func(context.Context, []byte) error { return nil })
	err = rt.Start(t.Context())
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute, "retry-strategy=nack on Exclusive")
	_ = rt.Shutdown(t.Context())
}

func TestEnvelopeCodec(t *testing.T) {
	codec := connector.EnvelopeCodec{}
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
