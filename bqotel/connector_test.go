package bqotel_test

import (
	"context"
	"sync"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// collector requests without bound and keeps what a Source delivers.
type collector struct {
	mu   sync.Mutex
	msgs []messaging.Message[[]byte]
}

func (*collector) OnSubscribe(s reactive.Subscription) { s.Request(1 << 30) }

func (c *collector) OnNext(m messaging.Message[[]byte]) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (*collector) OnError(error) {}

func (*collector) OnComplete() {}

func (c *collector) received() []messaging.Message[[]byte] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]messaging.Message[[]byte](nil), c.msgs...)
}

// The connector's sink and source take the same hooks: the source's consumer span is the
// child of the sink's producer span, and the source's deliveries are counted.
func TestConnectorEndpointsTakeTheHooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sink, err := connector.NewSink(f.client, connector.SinkOptions{
		Producer:        apulsar.ProducerOptions{Topic: f.topic},
		ProjectEnvelope: true,
		// The sink's own tracing (derive a traceparent from the trace_id) runs after the
		// publish hook, so the hook's traceparent is the one sent.
		Tracing: true,
		Hooks:   []bqpulsar.Hooks{f.tel.Hooks()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sink.Close(context.Background())) })
	env, err := envelope.Make(orderURN, map[string]any{"order_id": 10})
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	reactive.FromSlice(messaging.NewMessage(payload)).Subscribe(sink)

	require.NoError(t, f.sourceMessage(t, "invoicing").Ack(context.Background()))

	producer := f.ended(t, trace.SpanKindProducer, 1)[0]
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	assert.Equal(t, env.Meta.ID, attrOf(producer, bqotel.AttrMetaID).AsString())
	assert.Equal(t, attrOf(producer, "messaging.message.id").AsString(), attrOf(consumer, "messaging.message.id").AsString(),
		"the id Pulsar assigned, on both sides")
	assert.Equal(t, producer.SpanContext().SpanID(), consumer.Parent().SpanID())
	assert.Equal(t, producer.SpanContext().TraceID(), consumer.SpanContext().TraceID())
	assert.Equal(t, "invoicing", attrOf(consumer, "messaging.destination.subscription.name").AsString())
	assert.Equal(t, "acked", attrOf(consumer, bqotel.AttrOutcome).AsString())
	testwait.Eventually(t, waitLong, func() bool { return f.counters(t)[bqotel.MetricSettled] == 1 }, "the settlement was not counted")
	c := f.counters(t)
	assert.Equal(t, int64(1), c[bqotel.MetricSent])
	assert.Equal(t, int64(1), c[bqotel.MetricConsumed])
}

// A stage of the runtime gets the delivery's context with the message
// (messaging.ContextMetadata): the span it starts is the child of the source's consumer
// span, and when it puts its own context on the message it returns, the sink's producer
// span is the child of the stage's span, so that one trace runs through the whole pipeline.
func TestAStageSpanNestsBetweenTheSourceAndTheSink(t *testing.T) {
	t.Parallel()
	const subscription = "enrich"
	f := newFixture(t)
	_, err := f.publisher(t).Publish(context.Background(), orderURN, map[string]any{"order_id": 11})
	require.NoError(t, err)
	in := f.sourceMessage(t, subscription)

	// What a Process stage's function does with the ctx the runtime gives it.
	ctx := messaging.MessageContext(context.Background(), in.Metadata())
	stageCtx, stage := f.tp.Tracer("app").Start(ctx, "enrich order")
	out := messaging.WithMetadataItems(messaging.WithPayload(in, in.Payload()), messaging.ContextMetadata{Context: stageCtx})
	stage.End()

	sink, err := connector.NewSink(f.client, connector.SinkOptions{
		Producer: apulsar.ProducerOptions{Topic: f.topic + "-enriched"},
		Hooks:    []bqpulsar.Hooks{f.tel.Hooks()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sink.Close(context.Background())) })
	reactive.FromSlice(out).Subscribe(sink) // the sink acks the input once sent

	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	stageSpan, sinkSpan := spanNamed(t, f, "enrich order"), spanNamed(t, f, "send "+f.topic+"-enriched")
	assert.Equal(t, consumer.SpanContext().SpanID(), stageSpan.Parent().SpanID(), "the stage's span is the consumer span's child")
	assert.Equal(t, stageSpan.SpanContext().SpanID(), sinkSpan.Parent().SpanID(), "the sink's producer span is the stage span's child")
	assert.Equal(t, consumer.SpanContext().TraceID(), sinkSpan.SpanContext().TraceID(), "one trace")
	assert.Equal(t, "acked", attrOf(consumer, bqotel.AttrOutcome).AsString(), "the sink's send acked the input")
}

// sourceMessage runs a connector Source with the fixture's hooks on its topic under
// subscription, and returns the first message it delivers.
func (f *fixture) sourceMessage(t *testing.T, subscription string) messaging.Message[[]byte] {
	t.Helper()
	src, err := connector.NewSource(f.client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{
			Topic: f.topic, SubscriptionName: subscription, Type: apulsar.Shared,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		},
		Hooks: []bqpulsar.Hooks{f.tel.Hooks()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, src.Close(context.Background())) })
	col := &collector{}
	src.Subscribe(col)
	testwait.Eventually(t, waitLong, func() bool { return len(col.received()) == 1 }, "nothing delivered")
	return col.received()[0]
}

// spanNamed waits for the ended span named name.
func spanNamed(t *testing.T, f *fixture, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var got sdktrace.ReadOnlySpan
	testwait.Eventually(t, waitLong, func() bool {
		for _, s := range f.spans.Ended() {
			if s.Name() == name {
				got = s
				return true
			}
		}
		return false
	}, "no ended span %q", name)
	return got
}
