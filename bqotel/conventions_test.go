package bqotel_test

import (
	"context"
	"errors"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
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

	ops := f.histogram(t, bqotel.MetricOperation)
	require.Len(t, ops, 1)
	assert.Equal(t, uint64(2), ops[0].Count, "one point per send")
	assert.Positive(t, ops[0].Sum)
	assert.Equal(t, recommendedBuckets, ops[0].Bounds)
	assert.Equal(t, "send", value(ops[0].Attributes, semconv.MessagingOperationNameKey))
	assert.Equal(t, "pulsar", value(ops[0].Attributes, semconv.MessagingSystemKey))

	var consumed int
	for _, dp := range f.sums(t, bqotel.MetricConsumed) {
		assert.Equal(t, orderURN, value(dp.Attributes, bqotel.AttrURN), "WithURNMetricAttribute on consumed")
		consumed += int(dp.Value)
	}
	assert.Equal(t, 2, consumed)
}

// TestAConsumerInsideASpanLinksIt: a consumer run with a context that carries a span of its
// own (a worker's) gets consumer spans linked to it (babelqueue.link.source=ambient); the
// producer span stays the parent.
func TestAConsumerInsideASpanLinksIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, err := bqpulsar.NewConsumer(f.client, append([]bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(f.topic),
		bqpulsar.WithSubscription("billing", apulsar.Shared),
		bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
		bqpulsar.Handle(orderURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }),
	}, f.tel.ConsumerOptions()...)...)
	require.NoError(t, err)
	worker, span := f.tp.Tracer("app").Start(context.Background(), "worker")
	defer span.End()
	ctx, cancel := context.WithCancel(worker)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.NoError(t, c.Close())
	})
	_, err = f.publisher(t).Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	producer := f.ended(t, trace.SpanKindProducer, 1)[0]
	assert.Equal(t, producer.SpanContext().SpanID(), consumer.Parent().SpanID(), "the producer span is the parent")
	var ambient int
	for _, l := range consumer.Links() {
		if l.SpanContext.SpanID() == span.SpanContext().SpanID() {
			ambient++
			assert.Contains(t, l.Attributes, bqotel.AttrLinkSource.String("ambient"))
		}
	}
	assert.Equal(t, 1, ambient, "linked to the worker's span once")
}
