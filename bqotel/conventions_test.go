package bqotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// recommendedBuckets are the messaging semantic conventions' boundaries for the duration
// histograms, in seconds.
var recommendedBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// histogram returns the data points of the float64 histogram name.
func (f *fixture) histogram(t *testing.T, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				h, ok := m.Data.(metricdata.Histogram[float64])
				require.True(t, ok, "%s is a float64 histogram", name)
				return h.DataPoints
			}
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

// sums returns the data points of the int64 counter name (none when it has none yet).
func (f *fixture) sums(t *testing.T, name string) []metricdata.DataPoint[int64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	var out []metricdata.DataPoint[int64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				sum, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok, "%s is an int64 counter", name)
				out = append(out, sum.DataPoints...)
			}
		}
	}
	return out
}

func value(set attribute.Set, k attribute.Key) string {
	v, _ := set.Value(k)
	return v.String()
}

// TestMetricsFollowTheMessagingConventions: messaging.process.duration is the consumer span's
// duration (receipt to settlement, not the handler alone), its failed points carry error.type
// (Conditionally Required), messaging.client.operation.duration (Required) measures each send,
// both use the recommended buckets, and WithURNMetricAttribute puts the URN on
// messaging.client.consumed.messages too.
func TestMetricsFollowTheMessagingConventions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, bqotel.WithURNMetricAttribute())
	f.consumer(t, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		if string(env.Data) == `{"n":1}` {
			return bqpulsar.DeadLetter(errors.New("refused"))
		}
		return nil
	})
	pub := f.publisher(t)
	for i := range 2 {
		_, err := pub.Publish(context.Background(), orderURN, map[string]any{"n": i})
		require.NoError(t, err)
	}
	spans := f.ended(t, trace.SpanKindConsumer, 2)
	spanSeconds := map[string]float64{}
	for _, s := range spans {
		spanSeconds[attrOf(s, bqotel.AttrOutcome).AsString()] = s.EndTime().Sub(s.StartTime()).Seconds()
	}
	require.Len(t, spanSeconds, 2, "one acked and one dead-lettered span: %v", spanSeconds)

	process := f.histogram(t, bqotel.MetricProcess)
	require.Len(t, process, 2)
	for _, dp := range process {
		outcome := value(dp.Attributes, bqotel.AttrOutcome)
		assert.Equal(t, recommendedBuckets, dp.Bounds)
		assert.Equal(t, uint64(1), dp.Count, outcome)
		assert.InDelta(t, spanSeconds[outcome], dp.Sum, 1e-9, "%s: the process duration is the span's", outcome)
		assert.Equal(t, "billing", value(dp.Attributes, semconv.MessagingDestinationSubscriptionNameKey))
		etype, failed := dp.Attributes.Value(semconv.ErrorTypeKey)
		switch outcome {
		case "acked":
			assert.False(t, failed, "no error.type on a success")
		case "dead_lettered":
			assert.True(t, failed, "error.type on a failure")
			assert.NotEmpty(t, etype.AsString())
		default:
			t.Errorf("unexpected outcome %q", outcome)
		}
	}

	// Two publishes to the topic, and the consumer's dead-letter write.
	ops := f.histogram(t, bqotel.MetricOperation)
	require.Len(t, ops, 2, "one series per destination")
	counts := map[string]uint64{}
	for _, op := range ops {
		counts[value(op.Attributes, semconv.MessagingDestinationNameKey)] = op.Count
		assert.Positive(t, op.Sum)
		assert.Equal(t, recommendedBuckets, op.Bounds)
		assert.Equal(t, "send", value(op.Attributes, semconv.MessagingOperationNameKey))
		assert.Equal(t, "pulsar", value(op.Attributes, semconv.MessagingSystemKey))
	}
	dlqTopic, err := dlq.TopicFor(f.topic)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{f.topic: 2, dlqTopic: 1}, counts, "one point per send")

	var consumed int
	for _, dp := range f.sums(t, bqotel.MetricConsumed) {
		assert.Equal(t, orderURN, value(dp.Attributes, bqotel.AttrURN), "WithURNMetricAttribute on consumed")
		consumed += int(dp.Value)
	}
	assert.Equal(t, 2, consumed)
}

// TestAConsumerInsideASpanLinksIt: a consumer run with a context that carries a span of its
// own (a worker's, recorded here or remote) gets consumer spans linked to it
// (babelqueue.link.source=ambient), and it is never their parent: not when the producer
// span is, not when the trace_id names the trace, and not when the message has neither and
// its span is a root.
func TestAConsumerInsideASpanLinksIt(t *testing.T) {
	t.Parallel()
	ambients := map[string]func(f *fixture) (context.Context, trace.SpanContext){
		"a recorded span": func(f *fixture) (context.Context, trace.SpanContext) {
			ctx, span := f.tp.Tracer("app").Start(context.Background(), "worker")
			t.Cleanup(func() { span.End() })
			return ctx, span.SpanContext()
		},
		"a remote span": func(*fixture) (context.Context, trace.SpanContext) {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
			})
			return trace.ContextWithRemoteSpanContext(context.Background(), sc), sc
		},
	}
	sends := map[string]func(t *testing.T, f *fixture){
		"a traceparent": func(t *testing.T, f *fixture) {
			t.Helper()
			_, err := f.publisher(t).Publish(context.Background(), orderURN, nil)
			require.NoError(t, err)
		},
		"a trace_id only": func(t *testing.T, f *fixture) {
			t.Helper()
			p, err := bqpulsar.NewPublisher(f.client, f.topic) // no hooks: no traceparent
			require.NoError(t, err)
			defer func() { assert.NoError(t, p.Close()) }()
			_, err = p.Publish(context.Background(), orderURN, nil, bqpulsar.WithTraceID("order-42"))
			require.NoError(t, err)
		},
		"neither": func(t *testing.T, f *fixture) {
			t.Helper()
			env, err := envelope.Make(orderURN, nil)
			require.NoError(t, err)
			body, err := env.Encode()
			require.NoError(t, err)
			prod, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.topic})
			require.NoError(t, err)
			defer prod.Close()
			_, err = prod.Send(context.Background(), &apulsar.ProducerMessage{Payload: body, Properties: map[string]string{bqpulsar.PropJob: orderURN}})
			require.NoError(t, err)
		},
	}
	for ambientName, ambient := range ambients {
		for sendName, send := range sends {
			t.Run("inside "+ambientName+", a message with "+sendName, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				c, err := bqpulsar.NewConsumer(f.client, append([]bqpulsar.ConsumerOption{
					bqpulsar.WithTopic(f.topic),
					bqpulsar.WithSubscription("billing", apulsar.Shared),
					bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
					bqpulsar.Handle(orderURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }),
				}, f.tel.ConsumerOptions()...)...)
				require.NoError(t, err)
				worker, workerSC := ambient(f)
				runUntilTheEnd(t, worker, c)
				send(t, f)
				consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
				assert.NotEqual(t, workerSC.SpanID(), consumer.Parent().SpanID(), "the worker's span is never the parent")
				switch sendName {
				case "a traceparent":
					producer := f.ended(t, trace.SpanKindProducer, 1)[0]
					assert.Equal(t, producer.SpanContext().SpanID(), consumer.Parent().SpanID(), "the producer span is the parent")
				case "a trace_id only":
					tid, _ := bqotel.TraceIDFrom("order-42")
					assert.Equal(t, tid, consumer.SpanContext().TraceID(), "in the trace the trace_id names")
				default:
					assert.False(t, consumer.Parent().IsValid(), "a root span")
				}
				var linked int
				for _, l := range consumer.Links() {
					if l.SpanContext.SpanID() == workerSC.SpanID() {
						linked++
						assert.Contains(t, l.Attributes, bqotel.AttrLinkSource.String("ambient"))
					}
				}
				assert.Equal(t, 1, linked, "linked to the worker's span once")
			})
		}
	}
}

// startRecorder is a sampler that samples everything and keeps what each span was started
// with: what a sampler can decide on.
type startRecorder struct {
	mu   sync.Mutex
	seen []sdktrace.SamplingParameters
}

func (r *startRecorder) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	r.mu.Lock()
	r.seen = append(r.seen, p)
	r.mu.Unlock()
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (*startRecorder) Description() string { return "startRecorder" }

// started returns the attributes the first span of kind k named name started with.
func (r *startRecorder) started(k trace.SpanKind, name string) ([]attribute.KeyValue, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.seen {
		if p.Kind == k && p.Name == name {
			return p.Attributes, true
		}
	}
	return nil, false
}

// TestASamplerSeesTheSubscriptionAndTheServer: messaging.destination.subscription.name
// (Conditionally Required) is given when the consumer span starts, so that a sampler can
// decide on it, and WithServiceURL puts server.address and server.port (Conditionally
// Required when available, and Recommended) on the producer and consumer spans and on the
// metric points.
func TestASamplerSeesTheSubscriptionAndTheServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sampler := &startRecorder{}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(f.spans))
	t.Cleanup(func() { assert.NoError(t, f.tp.Shutdown(context.Background())) })
	f.reader = sdkmetric.NewManualReader() // a reader serves one provider
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })
	var err error
	f.tel, err = bqotel.New(bqotel.WithTracerProvider(f.tp), bqotel.WithMeterProvider(mp),
		bqotel.WithServiceURL("pulsar://broker-0.example:16650,broker-1.example:16650"))
	require.NoError(t, err)
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil })
	_, err = f.publisher(t).Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	producer := f.ended(t, trace.SpanKindProducer, 1)[0]

	attrs, ok := sampler.started(trace.SpanKindConsumer, "process "+f.topic)
	require.True(t, ok, "the sampler saw the consumer span")
	assert.Contains(t, attrs, semconv.MessagingDestinationSubscriptionName("billing"), "known at the start")
	server := []attribute.KeyValue{semconv.ServerAddress("broker-0.example"), semconv.ServerPort(16650)}
	assert.Subset(t, attrs, server, "the consumer span starts with the server")
	attrs, ok = sampler.started(trace.SpanKindProducer, "send "+f.topic)
	require.True(t, ok, "the sampler saw the producer span")
	assert.Subset(t, attrs, server, "the producer span starts with the server")
	for _, s := range []sdktrace.ReadOnlySpan{consumer, producer} {
		assert.Equal(t, "broker-0.example", attrOf(s, semconv.ServerAddressKey).AsString(), s.Name())
		assert.Equal(t, int64(16650), attrOf(s, semconv.ServerPortKey).AsInt64(), s.Name())
	}
	assert.Equal(t, "billing", attrOf(consumer, semconv.MessagingDestinationSubscriptionNameKey).AsString())

	points := f.sums(t, bqotel.MetricSent)
	points = append(points, f.sums(t, bqotel.MetricConsumed)...)
	require.NotEmpty(t, points)
	for _, dp := range points {
		assert.Equal(t, "broker-0.example", value(dp.Attributes, semconv.ServerAddressKey))
		assert.Equal(t, "16650", value(dp.Attributes, semconv.ServerPortKey))
	}
	for _, dp := range f.histogram(t, bqotel.MetricProcess) {
		assert.Equal(t, "broker-0.example", value(dp.Attributes, semconv.ServerAddressKey))
	}
}

// TestWithServiceURLRefusesAURLWithoutABroker: a URL of another scheme, without a host or
// with a bad port is refused when the Telemetry is built, not at the first span.
func TestWithServiceURLRefusesAURLWithoutABroker(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "broker:6650", "kafka://broker:9092", "pulsar://", "pulsar://:6650", "pulsar://broker:0", "pulsar://broker:70000", "pulsar://broker:x"} {
		_, err := bqotel.New(bqotel.WithServiceURL(u))
		require.ErrorIs(t, err, bqotel.ErrInvalidOption, "%q", u)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", u))
	}
}

// TestAProducerSpanOfAPartitionedTopicNamesThePartition: the producer picks the partition
// after the Publish hook ran; the receipt names it, and the span carries it as
// messaging.destination.partition.id (Recommended), while messaging.destination.name stays
// the topic. The consumer span of each delivery names the partition it came from, the one
// its producer span named.
func TestAProducerSpanOfAPartitionedTopicNamesThePartition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.broker.CreatePartitionedTopic(f.topic, 3))
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil })
	pub := f.publisher(t)
	for i := range 6 {
		_, err := pub.Publish(context.Background(), orderURN, map[string]any{"n": i}, bqpulsar.WithKey(fmt.Sprintf("key-%d", i)))
		require.NoError(t, err)
	}
	partitionOf := map[trace.SpanID]string{}
	for _, s := range f.ended(t, trace.SpanKindProducer, 6) {
		assert.Equal(t, f.topic, attrOf(s, semconv.MessagingDestinationNameKey).AsString())
		p := attrOf(s, semconv.MessagingDestinationPartitionIDKey).AsString()
		assert.Contains(t, []string{"0", "1", "2"}, p, "a partition of three")
		partitionOf[s.SpanContext().SpanID()] = p
	}
	for _, s := range f.ended(t, trace.SpanKindConsumer, 6) {
		assert.Equal(t, f.topic, attrOf(s, semconv.MessagingDestinationNameKey).AsString())
		p := attrOf(s, semconv.MessagingDestinationPartitionIDKey).AsString()
		assert.Contains(t, []string{"0", "1", "2"}, p, "a partition of three")
		assert.Equal(t, partitionOf[s.Parent().SpanID()], p, "the partition it was sent to")
	}

	// A topic that is not partitioned names none, on either side.
	g := newFixture(t)
	g.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil })
	_, err := g.publisher(t).Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	for _, k := range []trace.SpanKind{trace.SpanKindProducer, trace.SpanKindConsumer} {
		s := g.ended(t, k, 1)[0]
		assert.Equal(t, attribute.EMPTY, attrOf(s, semconv.MessagingDestinationPartitionIDKey).Type(), "no partition id on the %s span", k)
	}
}

// TestTheEventHookCountsWithoutTheDeliveryHook: an event whose context no Delivery hook of
// this Telemetry opened (its Event hook given alone, or beside another's Delivery hook) is
// counted all the same, under the topic without its partition suffix.
func TestTheEventHookCountsWithoutTheDeliveryHook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tel.Hooks().Event(bqpulsar.Event{
		Kind: bqpulsar.EventReceived, Context: context.Background(),
		Topic: f.topic + "-partition-1", Subscription: "billing",
	})
	points := f.sums(t, bqotel.MetricConsumed)
	require.Len(t, points, 1)
	assert.Equal(t, int64(1), points[0].Value)
	assert.Equal(t, f.topic, value(points[0].Attributes, semconv.MessagingDestinationNameKey))
	assert.Equal(t, "billing", value(points[0].Attributes, semconv.MessagingDestinationSubscriptionNameKey))
}
