package bqotel_test

import (
	"context"
	"fmt"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// samplings are the two cases of the cost targets: every span sampled (and recorded, not
// exported), and none.
var samplings = []struct {
	name    string
	sampler sdktrace.Sampler
}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}}

// samplingTelemetry is benchTelemetry with sampler.
func samplingTelemetry(b *testing.B, sampler sdktrace.Sampler) *bqotel.Telemetry {
	b.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	tel, err := bqotel.New(bqotel.WithTracerProvider(tp), bqotel.WithMeterProvider(mp))
	require.NoError(b, err)
	return tel
}

// benchEnvelope is the envelope the hook benchmarks deliver or publish, and its encoding.
func benchEnvelope(b *testing.B) (*envelope.Envelope, []byte) {
	b.Helper()
	env, err := envelope.Make("urn:babel:bench:order", map[string]any{"order_id": 1})
	require.NoError(b, err)
	payload, err := env.Encode()
	require.NoError(b, err)
	return env, payload
}

// benchMessage is the part of a received message that the hooks read.
type benchMessage struct {
	apulsar.Message // the methods the hooks do not call
	topic           string
	props           map[string]string
	payload         []byte
	id              apulsar.MessageID
}

func (m *benchMessage) Topic() string                 { return m.topic }
func (m *benchMessage) Properties() map[string]string { return m.props }
func (m *benchMessage) Payload() []byte               { return m.payload }
func (m *benchMessage) ID() apulsar.MessageID         { return m.id }
func (*benchMessage) RedeliveryCount() uint32         { return 0 }

// BenchmarkHooksPerDelivery is the hooks' own cost of one delivery, as the consumer calls
// them for a message that is handled and acked: the Delivery hook (the consumer span),
// the received and handled events, and the settlement. No broker, no client: what the
// conventions' cost target (issue 26, point 3) is about.
func BenchmarkHooksPerDelivery(b *testing.B) {
	for _, sm := range samplings {
		b.Run(sm.name, func(b *testing.B) { benchDelivery(b, sm.sampler) })
	}
}

func benchDelivery(b *testing.B, sampler sdktrace.Sampler) {
	b.Helper()
	h := samplingTelemetry(b, sampler).Hooks()
	env, payload := benchEnvelope(b)
	props := bqpulsar.ProjectProperties(env)
	props["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	msg := &benchMessage{topic: "persistent://public/default/orders", props: props, payload: payload, id: apulsar.EarliestMessageID()}
	base := context.Background() // a consumer's would also name it (pulsar.ConsumerInfoFrom): one attribute more
	ev := bqpulsar.Event{Topic: msg.topic, URN: env.URN(), Attempt: 1, Envelope: env, Message: msg, Subscription: "billing"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, fin := h.Delivery(base, msg)
		ev.Context = ctx //nolint:fatcontext // each iteration's delivery context replaces the last, as in the engine
		ev.Kind = bqpulsar.EventReceived
		h.Event(ev)
		ev.Kind = bqpulsar.EventHandled
		h.Event(ev)
		ev.Kind = bqpulsar.EventAcked
		h.Event(ev)
		fin(ev)
	}
}

// BenchmarkHooksPerPublish is the Publish hook's own cost of one send: the producer span,
// the trace context injected into the properties, and the receipt.
func BenchmarkHooksPerPublish(b *testing.B) {
	for _, sm := range samplings {
		b.Run(sm.name, func(b *testing.B) { benchPublish(b, sm.sampler) })
	}
}

func benchPublish(b *testing.B, sampler sdktrace.Sampler) {
	b.Helper()
	h := samplingTelemetry(b, sampler).Hooks()
	env, payload := benchEnvelope(b)
	id := apulsar.EarliestMessageID()
	ctx := context.Background()
	pm := &apulsar.ProducerMessage{Payload: payload, Properties: bqpulsar.ProjectProperties(env)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		done := h.Publish(ctx, &bqpulsar.OutgoingMessage{Topic: "persistent://public/default/orders", Envelope: env, Message: pm})
		done(id, nil)
		delete(pm.Properties, "traceparent") // injected again by the next send, as into a fresh message
	}
}

// BenchmarkSDKFloor is what the OpenTelemetry SDK itself costs for the least that one
// delivery asks of it under the conventions, without this package: a span started with the
// attributes a consumer span starts with (12) and given the settlement's (3), ended; and
// the four measurements of a delivery (three counter increments and one histogram
// record over cached attribute sets). It is the floor under BenchmarkHooksPerDelivery.
func BenchmarkSDKFloor(b *testing.B) {
	for _, sm := range samplings {
		b.Run(sm.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sm.sampler))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			tracer, meter := tp.Tracer("floor"), mp.Meter("floor")
			counter, err := meter.Int64Counter("floor.count")
			require.NoError(b, err)
			hist, err := meter.Float64Histogram("floor.duration")
			require.NoError(b, err)
			start := make([]attribute.KeyValue, 12)
			for i := range start {
				start[i] = attribute.String(fmt.Sprintf("floor.start.%d", i), "persistent://public/default/orders")
			}
			end := []attribute.KeyValue{attribute.String("floor.outcome", "acked"), attribute.Int("floor.attempt", 1), attribute.String("floor.urn", "urn:babel:bench:order")}
			set := metric.WithAttributeSet(attribute.NewSet(start[:4]...))
			add, rec := []metric.AddOption{set}, []metric.RecordOption{set}
			ctx := context.Background()
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(start...)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				sctx, span := tracer.Start(ctx, "process persistent://public/default/orders", opts...)
				span.SetAttributes(end...)
				span.End()
				counter.Add(sctx, 1, add...)
				counter.Add(sctx, 1, add...)
				counter.Add(sctx, 1, add...)
				hist.Record(sctx, 0.001, rec...)
			}
		})
	}
}
