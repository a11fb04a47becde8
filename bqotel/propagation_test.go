package bqotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// prefixedPropagator is W3C Trace Context under other property names ("x-app-traceparent"),
// so that a message tells which propagator wrote it and a consumer span tells which one read it.
type prefixedPropagator struct{ propagation.TraceContext }

const propPrefix = "x-app-"

// prefixedCarrier puts propPrefix before every key of the carrier it wraps.
type prefixedCarrier struct{ propagation.TextMapCarrier }

func (c prefixedCarrier) Get(key string) string { return c.TextMapCarrier.Get(propPrefix + key) }

func (c prefixedCarrier) Set(key, value string) { c.TextMapCarrier.Set(propPrefix+key, value) }

func (p prefixedPropagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	p.TraceContext.Inject(ctx, prefixedCarrier{carrier})
}

func (p prefixedPropagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return p.TraceContext.Extract(ctx, prefixedCarrier{carrier})
}

func (p prefixedPropagator) Fields() []string {
	var out []string
	for _, f := range p.TraceContext.Fields() {
		out = append(out, propPrefix+f)
	}
	return out
}

// delivered is what a handler saw of one delivery.
type delivered struct {
	props map[string]string
	span  trace.SpanContext // the span context in the handler's ctx
}

// recordingHandler sends what it sees of each delivery to the returned channel.
func recordingHandler() (bqpulsar.HandlerFunc, <-chan delivered) {
	got := make(chan delivered, 4)
	return func(ctx context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		got <- delivered{props: msg.Properties(), span: trace.SpanContextFromContext(ctx)}
		return nil
	}, got
}

func next(t *testing.T, got <-chan delivered) delivered {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(waitLong):
		t.Fatal("the handler was not called")
		return delivered{}
	}
}

// TestWithPropagatorInjectsAndExtracts: the propagator given to WithPropagator, not the default
// one, writes the producer span's context into the message properties, and reads it back on
// delivery, so that the consumer span is still the producer span's child.
func TestWithPropagatorInjectsAndExtracts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, bqotel.WithPropagator(prefixedPropagator{}))
	h, got := recordingHandler()
	f.consumer(t, h)
	_, err := f.publisher(t).Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	d := next(t, got)

	psc := f.ended(t, trace.SpanKindProducer, 1)[0].SpanContext()
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", psc.TraceID(), psc.SpanID()), d.props[propPrefix+"traceparent"],
		"the given propagator injected")
	assert.NotContains(t, d.props, "traceparent", "the default propagator did not")
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	assert.Equal(t, psc.TraceID(), consumer.Parent().TraceID(), "the given propagator extracted")
	assert.Equal(t, psc.SpanID(), consumer.Parent().SpanID())
}

// TestWithoutTracingNoTraceContextTravels: with tracing off and metrics on, a publish injects
// no trace context into the message, a delivery extracts none from it (not even a traceparent
// the caller set: the handler's context has no span), no span is recorded, and both are still
// counted.
func TestWithoutTracingNoTraceContextTravels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, bqotel.WithoutTracing())
	h, got := recordingHandler()
	f.consumer(t, h)
	pub := f.publisher(t)
	_, err := pub.Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	d := next(t, got)
	assert.NotContains(t, d.props, "traceparent", "nothing injected")
	assert.NotContains(t, d.props, "tracestate")
	assert.False(t, d.span.IsValid(), "no span in the handler's context")

	const theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	_, err = pub.Publish(context.Background(), orderURN, nil, bqpulsar.WithHeaders(map[string]string{"traceparent": theirs}))
	require.NoError(t, err)
	d = next(t, got)
	assert.Equal(t, theirs, d.props["traceparent"], "the caller's property is sent as it is")
	assert.False(t, d.span.IsValid(), "nothing extracted: %v", d.span)

	assert.Empty(t, f.spans.Ended(), "no span")
	assert.Empty(t, f.spans.Started(), "no span")
	c := f.counters(t)
	assert.Equal(t, int64(2), c[bqotel.MetricSent])
	assert.Equal(t, int64(2), c[bqotel.MetricConsumed])
}
