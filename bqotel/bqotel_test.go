package bqotel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const (
	orderURN = "urn:babel:orders:created"
	waitLong = 15 * time.Second
)

var topicSeq atomic.Int64

// fixture is a broker, a client, an in-memory span recorder and a manual metric reader,
// with a Telemetry over them.
type fixture struct {
	broker *pulsartest.Broker
	client apulsar.Client
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tel    *bqotel.Telemetry
	topic  string
	tp     *sdktrace.TracerProvider
}

func newFixture(t *testing.T, opts ...bqotel.Option) *fixture {
	t.Helper()
	b := pulsartest.NewBroker(t)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: b.URL(), OperationTimeout: 5 * time.Second, ConnectionTimeout: 5 * time.Second,
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	f := &fixture{broker: b, client: c, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() {
		assert.NoError(t, f.tp.Shutdown(context.Background()))
		assert.NoError(t, mp.Shutdown(context.Background()))
	})
	f.tel, err = bqotel.New(append([]bqotel.Option{bqotel.WithTracerProvider(f.tp), bqotel.WithMeterProvider(mp)}, opts...)...)
	require.NoError(t, err)
	name := strings.NewReplacer("/", "-").Replace(strings.ToLower(t.Name()))
	f.topic = fmt.Sprintf("persistent://public/default/%s-%d", name, topicSeq.Add(1))
	return f
}

func (f *fixture) publisher(t *testing.T) *bqpulsar.Publisher {
	t.Helper()
	opts := f.tel.PublisherOptions()
	p, err := bqpulsar.NewPublisher(f.client, f.topic, opts[0])
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

func (f *fixture) consumer(t *testing.T, h bqpulsar.HandlerFunc, opts ...bqpulsar.ConsumerOption) *bqpulsar.Consumer {
	t.Helper()
	all := []bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(f.topic),
		bqpulsar.WithSubscription("billing", apulsar.Shared),
		bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
		bqpulsar.Handle(orderURN, h),
		bqpulsar.WithRetry(retry.Policy{Strategy: retry.Republish}),
	}
	all = append(all, f.tel.ConsumerOptions()...)
	c, err := bqpulsar.NewConsumer(f.client, append(all, opts...)...)
	require.NoError(t, err)
	runUntilTheEnd(t, context.Background(), c)
	return c
}

// runUntilTheEnd runs c under a child of ctx until the test ends, then cancels it and
// checks Run's result and Close's.
func runUntilTheEnd(t *testing.T, ctx context.Context, c *bqpulsar.Consumer) { //nolint:revive // t first, as the other helpers
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.NoError(t, c.Close())
	})
}

// ended returns the ended spans of kind k, waiting until there are n of them.
func (f *fixture) ended(t *testing.T, k trace.SpanKind, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	testwait.Eventually(t, waitLong, func() bool {
		got = got[:0]
		for _, s := range f.spans.Ended() {
			if s.SpanKind() == k {
				got = append(got, s)
			}
		}
		return len(got) >= n
	}, "%d of %d %s spans ended", len(got), n, k)
	return got
}

// publisherSpan waits for the producer span of a publish made outside any span: the one
// producer span without a parent. The consumer's own writes (a retry, a dead-letter copy)
// have producer spans too, children of their delivery's span, and one of them may end
// before the publisher's: TestRedriveSpanIsLinkedToTheMovedMessages flaked once (1 of 10
// race runs) taking the first ended producer span for the publisher's.
func (f *fixture) publisherSpan(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var got sdktrace.ReadOnlySpan
	testwait.Eventually(t, waitLong, func() bool {
		for _, s := range f.spans.Ended() {
			if s.SpanKind() == trace.SpanKindProducer && !s.Parent().IsValid() {
				got = s
				return true
			}
		}
		return false
	}, "no ended producer span without a parent")
	return got
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

// eventAttr is attribute k of s's first event named name (an empty value without one).
func eventAttr(s sdktrace.ReadOnlySpan, name string, k attribute.Key) attribute.Value {
	for _, e := range s.Events() {
		if e.Name == name {
			set := attribute.NewSet(e.Attributes...)
			v, _ := set.Value(k)
			return v
		}
	}
	return attribute.Value{}
}

// counters returns the sum of every Int64 counter by instrument name.
func (f *fixture) counters(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					out[m.Name] += dp.Value
				}
			}
		}
	}
	return out
}

func TestConsumerSpanIsTheChildOfTheProducerSpan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type seen struct {
		traceparent string
		handlerSpan trace.SpanContext
		bodySize    int
	}
	got := make(chan seen, 1)
	tracer := f.tp.Tracer("app")
	f.consumer(t, func(ctx context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		_, span := tracer.Start(ctx, "charge card")
		span.End()
		got <- seen{traceparent: msg.Properties()["traceparent"], handlerSpan: span.SpanContext(), bodySize: len(msg.Payload())}
		return nil
	})
	id, err := f.publisher(t).Publish(context.Background(), orderURN, map[string]any{"order_id": 7})
	require.NoError(t, err)

	var s seen
	select {
	case s = <-got:
	case <-time.After(waitLong):
		t.Fatal("the handler was not called")
	}
	producer := f.ended(t, trace.SpanKindProducer, 1)[0]
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]

	// The producer span: its context went out in the traceparent property.
	assert.Equal(t, "send "+f.topic, producer.Name())
	assert.Equal(t, "pulsar", attrOf(producer, "messaging.system").AsString())
	assert.Equal(t, "send", attrOf(producer, "messaging.operation.type").AsString())
	assert.Equal(t, f.topic, attrOf(producer, "messaging.destination.name").AsString())
	assert.Equal(t, id, attrOf(producer, bqotel.AttrMetaID).AsString(), "meta.id")
	pulsarID := attrOf(producer, "messaging.message.id").AsString()
	assert.NotEmpty(t, pulsarID, "the id Pulsar assigned, from the receipt")
	assert.NotEqual(t, id, pulsarID)
	assert.Equal(t, orderURN, attrOf(producer, bqotel.AttrURN).AsString())
	assert.Equal(t, int64(s.bodySize), attrOf(producer, semconv.MessagingMessageBodySizeKey).AsInt64())
	psc := producer.SpanContext()
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", psc.TraceID(), psc.SpanID()), s.traceparent)

	// The consumer span: exactly the producer span's child.
	assert.Equal(t, psc.TraceID(), consumer.SpanContext().TraceID())
	assert.Equal(t, psc.SpanID(), consumer.Parent().SpanID())
	assert.True(t, consumer.Parent().IsRemote())
	assert.Equal(t, "process "+f.topic, consumer.Name())
	assert.Equal(t, "process", attrOf(consumer, "messaging.operation.type").AsString())
	assert.Equal(t, "billing", attrOf(consumer, "messaging.destination.subscription.name").AsString())
	assert.Equal(t, pulsarID, attrOf(consumer, "messaging.message.id").AsString(), "the same Pulsar id on both sides")
	assert.Equal(t, id, attrOf(consumer, bqotel.AttrMetaID).AsString())
	assert.Equal(t, int64(s.bodySize), attrOf(consumer, semconv.MessagingMessageBodySizeKey).AsInt64())
	assert.Equal(t, "acked", attrOf(consumer, bqotel.AttrOutcome).AsString())
	assert.Equal(t, int64(1), attrOf(consumer, bqotel.AttrAttempt).AsInt64())
	assert.Equal(t, codes.Unset, consumer.Status().Code)
	assert.Equal(t, attribute.EMPTY, attrOf(consumer, semconv.ErrorTypeKey).Type(), "no error.type when acked")
	require.Len(t, consumer.Links(), 1)
	assert.Equal(t, psc.SpanID(), consumer.Links()[0].SpanContext.SpanID())
	assert.Equal(t, []attribute.KeyValue{bqotel.AttrLinkSource.String("traceparent")}, consumer.Links()[0].Attributes,
		"the link says it comes from the traceparent")

	// The handler's own span nests under the consumer span.
	assert.Equal(t, consumer.SpanContext().TraceID(), s.handlerSpan.TraceID())
	var handler sdktrace.ReadOnlySpan
	for _, sp := range f.spans.Ended() {
		if sp.Name() == "charge card" {
			handler = sp
		}
	}
	require.NotNil(t, handler)
	assert.Equal(t, consumer.SpanContext().SpanID(), handler.Parent().SpanID())

	c := f.counters(t)
	assert.Equal(t, int64(1), c[bqotel.MetricSent])
	assert.Equal(t, int64(1), c[bqotel.MetricConsumed])
	assert.Equal(t, int64(1), c[bqotel.MetricHandled])
	assert.Equal(t, int64(1), c[bqotel.MetricSettled])
	assert.Zero(t, c[bqotel.MetricFailed])
}

func TestFailedTwiceThenDeadLetteredHasThreeConsumerSpansAndCountersThatAddUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dlqTopic, err := dlq.TopicFor(f.topic)
	require.NoError(t, err)
	// Watch the dead-letter topic before anything is written to it.
	dl, err := f.client.Subscribe(apulsar.ConsumerOptions{
		Topic: dlqTopic, SubscriptionName: "watch",
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	require.NoError(t, err)
	t.Cleanup(dl.Close)

	var calls atomic.Int32
	var mu sync.Mutex
	var traceparents []string
	f.consumer(t, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		mu.Lock()
		traceparents = append(traceparents, msg.Properties()["traceparent"])
		mu.Unlock()
		return fmt.Errorf("card declined (call %d)", calls.Add(1))
	}, bqpulsar.WithMaxAttempts(3))
	_, err = f.publisher(t).Publish(context.Background(), orderURN, map[string]any{"order_id": 8})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	dead, err := dl.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, dl.Ack(dead))

	// The publisher's producer span (a root), and one per write of the consumer's own: the
	// two retry republishes and the dead-letter copy, each the child of the consumer span
	// of the delivery that wrote it.
	producers := f.ended(t, trace.SpanKindProducer, 4)
	require.Len(t, producers, 4)
	var producer sdktrace.ReadOnlySpan
	writes := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range producers {
		if !s.Parent().IsValid() {
			producer = s
			continue
		}
		writes[s.Parent().SpanID()] = s
	}
	require.NotNil(t, producer, "the publisher's producer span is a root")
	psc := producer.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", psc.TraceID(), psc.SpanID())
	// The retry copies and the dead-letter copy keep the trace context.
	assert.Equal(t, want, dead.Properties()["traceparent"])
	mu.Lock()
	assert.Equal(t, []string{want, want, want}, traceparents)
	mu.Unlock()

	spans := f.ended(t, trace.SpanKindConsumer, 3)
	require.Len(t, spans, 3)
	for i, s := range spans {
		assert.Equal(t, psc.SpanID(), s.Parent().SpanID(), "span %d", i)
		assert.Equal(t, psc.TraceID(), s.SpanContext().TraceID(), "span %d", i)
		assert.Equal(t, int64(i+1), attrOf(s, bqotel.AttrAttempt).AsInt64(), "span %d", i)
		assert.Equal(t, codes.Error, s.Status().Code, "span %d", i)
		assert.Contains(t, s.Status().Description, "card declined", "span %d", i)
		assert.Contains(t, eventNames(s), "exception", "span %d", i)
		// The handler's error, fmt.Errorf without %w, is an *errors.errorString.
		assert.Equal(t, "*errors.errorString", attrOf(s, semconv.ErrorTypeKey).AsString(), "span %d: the failure's Go type", i)
	}
	assert.Equal(t, "retried", attrOf(spans[0], bqotel.AttrOutcome).AsString())
	assert.Equal(t, "retried", attrOf(spans[1], bqotel.AttrOutcome).AsString())
	assert.Equal(t, "dead_lettered", attrOf(spans[2], bqotel.AttrOutcome).AsString())
	assert.Contains(t, eventNames(spans[0]), bqotel.EventRetry)
	assert.Contains(t, eventNames(spans[1]), bqotel.EventRetry)
	assert.Contains(t, eventNames(spans[2]), bqotel.EventDeadLetter)
	assert.NotContains(t, eventNames(spans[2]), bqotel.EventRetry)
	assert.Equal(t, "failed", attrOf(spans[2], bqotel.AttrReason).AsString())
	for i, dest := range []string{f.topic, f.topic, dlqTopic} {
		w, ok := writes[spans[i].SpanContext().SpanID()]
		if assert.True(t, ok, "delivery %d's write has a producer span, its child", i+1) {
			assert.Equal(t, "send "+dest, w.Name(), "delivery %d", i+1)
			assert.Equal(t, dest, attrOf(w, semconv.MessagingDestinationNameKey).AsString(), "delivery %d", i+1)
			assert.NotEmpty(t, attrOf(w, semconv.MessagingMessageIDKey).AsString(), "delivery %d: the receipt's id", i+1)
		}
	}

	c := f.counters(t)
	assert.Equal(t, int64(3), c[bqotel.MetricConsumed], "received")
	assert.Equal(t, int64(3), c[bqotel.MetricFailed], "failed")
	assert.Equal(t, int64(2), c[bqotel.MetricRetried], "retried")
	assert.Equal(t, int64(1), c[bqotel.MetricDeadLettered], "dead-lettered")
	for _, dp := range f.sums(t, bqotel.MetricDeadLettered) {
		assert.Equal(t, "failed", value(dp.Attributes, bqotel.AttrReason), "dead_lettered carries the reason")
	}
	assert.Zero(t, c[bqotel.MetricHandled], "handled")
	assert.Equal(t, int64(3), c[bqotel.MetricSettled], "settled")
	// The publish, the two retry copies and the dead-letter copy: the consumer's own writes
	// are sends too.
	assert.Equal(t, int64(4), c[bqotel.MetricSent], "sent")
	sent := map[string]int64{}
	for _, dp := range f.sums(t, bqotel.MetricSent) {
		sent[value(dp.Attributes, semconv.MessagingDestinationNameKey)] += dp.Value
	}
	assert.Equal(t, map[string]int64{f.topic: 3, dlqTopic: 1}, sent, "sent, by destination")
}

func TestACallerTraceparentWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := make(chan string, 1)
	f.consumer(t, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		got <- msg.Properties()["traceparent"]
		return nil
	})
	const mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	_, err := f.publisher(t).Publish(context.Background(), orderURN, nil,
		bqpulsar.WithHeaders(map[string]string{"traceparent": mine}))
	require.NoError(t, err)
	select {
	case tp := <-got:
		assert.Equal(t, mine, tp)
	case <-time.After(waitLong):
		t.Fatal("the handler was not called")
	}
	consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", consumer.Parent().TraceID().String())
	assert.Equal(t, "b7ad6b7169203331", consumer.Parent().SpanID().String())
}

// TestWithoutTraceparentTheConsumerSpanJoinsTheTraceID: a message without a traceparent
// (a peer that writes only trace_id) gets a consumer span in the trace its trace_id names,
// by the Go core's rule: the child of a remote parent whose trace id is the UUID's 16 bytes
// (or, for another trace_id, its SHA-256's first 16) and whose span id is the first 8 bytes
// of the SHA-256 of "babelqueue-span:"+trace_id; it is linked to that parent too.
func TestWithoutTraceparentTheConsumerSpanJoinsTheTraceID(t *testing.T) {
	t.Parallel()
	for _, traceID := range []string{"4BF92F35-77B3-4DA6-A3CE-929D0E0E4736", "order-42"} {
		t.Run(traceID, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			done := make(chan struct{})
			f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error {
				close(done)
				return nil
			})
			// A publisher without the hook: no traceparent, only bq-trace-id.
			p, err := bqpulsar.NewPublisher(f.client, f.topic)
			require.NoError(t, err)
			defer func() { assert.NoError(t, p.Close()) }()
			_, err = p.Publish(context.Background(), orderURN, nil, bqpulsar.WithTraceID(traceID))
			require.NoError(t, err)
			select {
			case <-done:
			case <-time.After(waitLong):
				t.Fatal("the handler was not called")
			}
			consumer := f.ended(t, trace.SpanKindConsumer, 1)[0]
			spanSum := sha256.Sum256([]byte("babelqueue-span:" + traceID))
			parent := consumer.Parent()
			require.True(t, parent.IsValid(), "a child of the trace_id's parent, not a root")
			assert.True(t, parent.IsRemote())
			assert.Equal(t, goCoreTraceID(traceID), parent.TraceID().String())
			assert.Equal(t, hex.EncodeToString(spanSum[:8]), parent.SpanID().String())
			assert.Equal(t, parent.TraceID(), consumer.SpanContext().TraceID(), "in the trace_id's trace")
			require.Len(t, consumer.Links(), 1)
			link := consumer.Links()[0]
			assert.Equal(t, parent.TraceID(), link.SpanContext.TraceID())
			assert.Contains(t, link.Attributes, bqotel.AttrLinkSource.String("trace_id"))
			assert.Equal(t, traceID, attrOf(consumer, bqotel.AttrTraceID).AsString())
		})
	}
}

// TestPublishInsideASpanContinuesItsTrace: a Publisher called inside an active span writes
// that trace's id as the envelope's trace_id (UUID-shaped), even without the publish hook,
// so that a consumer which reads only trace_id (no traceparent) lands in the producer's
// trace; outside a span trace_id stays a random UUID of its own trace; WithTraceID wins.
func TestPublishInsideASpanContinuesItsTrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := make(chan *envelope.Envelope, 3)
	f.consumer(t, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		got <- env
		return nil
	})
	p, err := bqpulsar.NewPublisher(f.client, f.topic) // no hook: no traceparent
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	ctx, span := f.tp.Tracer("test").Start(context.Background(), "request")
	tid := span.SpanContext().TraceID()
	_, err = p.Publish(ctx, orderURN, nil)
	require.NoError(t, err)
	_, err = p.Publish(ctx, orderURN, nil, bqpulsar.WithTraceID("order-7"))
	require.NoError(t, err)
	span.End()
	_, err = p.Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	var envs []*envelope.Envelope
	for range 3 {
		select {
		case e := <-got:
			envs = append(envs, e)
		case <-time.After(waitLong):
			t.Fatal("a message was not handled")
		}
	}
	h := tid.String()
	want := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	assert.Equal(t, want, envs[0].TraceID, "the active trace, UUID-shaped")
	assert.Equal(t, "order-7", envs[1].TraceID, "WithTraceID wins")
	assert.NotEqual(t, want, envs[2].TraceID, "outside a span: a trace of its own")
	_, err = uuid.Parse(envs[2].TraceID)
	require.NoError(t, err, "outside a span: a random UUID")
	consumers := f.ended(t, trace.SpanKindConsumer, 3)
	var inTrace int
	for _, c := range consumers {
		if c.SpanContext().TraceID() == tid {
			inTrace++
		}
	}
	assert.Equal(t, 1, inTrace, "the consumer of the first message is in the producer's trace")
}

func TestPoisonAndGateRejectionGetSpanEventsAndCounters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil })
	prod, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.topic})
	require.NoError(t, err)
	defer prod.Close()
	ctx := context.Background()
	_, err = prod.Send(ctx, &apulsar.ProducerMessage{Payload: []byte("not json")})
	require.NoError(t, err)
	_, err = prod.Send(ctx, &apulsar.ProducerMessage{Payload: []byte("{}"), Properties: map[string]string{bqpulsar.PropSchemaVersion: "99"}})
	require.NoError(t, err)

	spans := f.ended(t, trace.SpanKindConsumer, 2)
	var names, messages []string
	for _, s := range spans {
		names = append(names, eventNames(s)...)
		for _, e := range []string{bqotel.EventPoison, bqotel.EventGateRejected} {
			if m := eventAttr(s, e, semconv.ExceptionMessageKey).AsString(); m != "" {
				messages = append(messages, e+": "+m)
			}
		}
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.Equal(t, "dead_lettered", attrOf(s, bqotel.AttrOutcome).AsString())
	}
	assert.Contains(t, names, bqotel.EventPoison)
	assert.Contains(t, names, bqotel.EventGateRejected)
	assert.Len(t, messages, 2, "each event says why, in exception.message: %q", messages)
	c := f.counters(t)
	assert.Equal(t, int64(1), c[bqotel.MetricPoison])
	assert.Equal(t, int64(1), c[bqotel.MetricGateRejected])
	assert.Equal(t, int64(2), c[bqotel.MetricDeadLettered])
}

func TestGaugesObserveRegisteredEndpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	release := make(chan struct{})
	started := make(chan struct{})
	c := f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		close(started)
		<-release
		return nil
	})
	unregister, err := f.tel.RegisterConsumer("billing", c)
	require.NoError(t, err)
	p := f.publisher(t)
	unregisterPub, err := f.tel.RegisterPublisher(p)
	require.NoError(t, err)
	_, err = p.Publish(context.Background(), orderURN, nil)
	require.NoError(t, err)
	<-started

	gauges := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, f.reader.Collect(context.Background(), &rm))
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
					for _, dp := range g.DataPoints {
						out[m.Name] += dp.Value
					}
				}
			}
		}
		return out
	}
	g := gauges()
	assert.Equal(t, int64(1), g[bqotel.MetricInFlight])
	assert.Contains(t, g, bqotel.MetricPublisherPend)
	close(release)
	testwait.Eventually(t, waitLong, func() bool { return gauges()[bqotel.MetricInFlight] == 0 }, "in-flight back to 0")
	unregister()
	unregisterPub()
	unregister() // idempotent
	assert.NotContains(t, gauges(), bqotel.MetricInFlight)

	_, err = f.tel.RegisterConsumer("x", nil)
	require.ErrorIs(t, err, bqotel.ErrInvalidOption)
	_, err = f.tel.RegisterPublisher(nil)
	require.ErrorIs(t, err, bqotel.ErrInvalidOption)
}

func TestURNMetricAttributeIsOptIn(t *testing.T) {
	t.Parallel()
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprint(optIn), func(t *testing.T) {
			t.Parallel()
			var opts []bqotel.Option
			if optIn {
				opts = append(opts, bqotel.WithURNMetricAttribute())
			}
			f := newFixture(t, opts...)
			_, err := f.publisher(t).Publish(context.Background(), orderURN, nil)
			require.NoError(t, err)
			points := f.sums(t, bqotel.MetricSent)
			require.NotEmpty(t, points)
			for _, dp := range points {
				v, ok := dp.Attributes.Value(bqotel.AttrURN)
				assert.Equal(t, optIn, ok)
				if ok {
					assert.Equal(t, orderURN, v.AsString())
				}
				o, _ := dp.Attributes.Value(bqotel.AttrOutcome)
				assert.Equal(t, "ok", o.AsString())
			}
		})
	}
}

func TestNewRefusesNilProviders(t *testing.T) {
	t.Parallel()
	for _, o := range []bqotel.Option{
		bqotel.WithTracerProvider(nil), bqotel.WithMeterProvider(nil), bqotel.WithPropagator(nil),
	} {
		_, err := bqotel.New(o)
		require.ErrorIs(t, err, bqotel.ErrInvalidOption)
	}
	tel, err := bqotel.New(nil, bqotel.WithoutTracing(), bqotel.WithoutMetrics())
	require.NoError(t, err)
	assert.Nil(t, tel.Hooks().Publish(context.Background(), &bqpulsar.OutgoingMessage{Topic: "t"}),
		"nothing to report with tracing and metrics off")
}

func TestFailedSendRecordsTheError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	done := f.tel.Hooks().Publish(context.Background(), &bqpulsar.OutgoingMessage{
		Topic: "persistent://public/default/x-partition-3", Message: &apulsar.ProducerMessage{},
	})
	require.NotNil(t, done)
	done(nil, errors.New("broker said no"))
	s := f.ended(t, trace.SpanKindProducer, 1)[0]
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Equal(t, "broker said no", s.Status().Description)
	assert.Equal(t, "*errors.errorString", attrOf(s, semconv.ErrorTypeKey).AsString(), "the failure's Go type")
	assert.Equal(t, "persistent://public/default/x", attrOf(s, "messaging.destination.name").AsString())
	assert.Equal(t, "3", attrOf(s, "messaging.destination.partition.id").AsString())
	c := f.counters(t)
	assert.Equal(t, int64(1), c[bqotel.MetricSent])
	sent := f.sums(t, bqotel.MetricSent)
	require.Len(t, sent, 1)
	assert.Equal(t, "error", value(sent[0].Attributes, bqotel.AttrOutcome))
	assert.Equal(t, "*errors.errorString", value(sent[0].Attributes, semconv.ErrorTypeKey))
	ops := f.histogram(t, bqotel.MetricOperation)
	require.Len(t, ops, 1)
	assert.Equal(t, "error", value(ops[0].Attributes, bqotel.AttrOutcome))
	assert.Equal(t, "*errors.errorString", value(ops[0].Attributes, semconv.ErrorTypeKey))
}

func TestRedriveSpanIsLinkedToTheMovedMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dlqTopic, err := dlq.TopicFor(f.topic)
	require.NoError(t, err)
	var calls atomic.Int32
	handled := make(chan struct{})
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		if calls.Add(1) == 1 {
			return bqpulsar.DeadLetter(errors.New("no such customer"))
		}
		close(handled)
		return nil
	})
	_, err = f.publisher(t).Publish(context.Background(), orderURN, map[string]any{"order_id": 9})
	require.NoError(t, err)
	f.ended(t, trace.SpanKindConsumer, 1) // dead-lettered

	rep, err := f.tel.Redrive(context.Background(), f.client, dlq.RedriveOptions{Topic: dlqTopic, IdleTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	select {
	case <-handled:
	case <-time.After(waitLong):
		t.Fatal("the redriven message was not handled")
	}
	psc := f.publisherSpan(t).SpanContext()
	var redrive sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.Name() == "redrive "+dlqTopic {
			redrive = s
		}
	}
	require.NotNil(t, redrive)
	require.Len(t, redrive.Links(), 1)
	assert.Equal(t, psc.SpanID(), redrive.Links()[0].SpanContext.SpanID())
	link := attribute.NewSet(redrive.Links()[0].Attributes...)
	assert.Equal(t, "traceparent", value(link, bqotel.AttrLinkSource))
	assert.Equal(t, orderURN, value(link, bqotel.AttrURN))
	assert.Equal(t, rep.Moved[0].Envelope.Meta.ID, value(link, bqotel.AttrMetaID), "the link names the moved message")
	assert.Equal(t, int64(1), attrOf(redrive, bqotel.AttrRedriveMoved).AsInt64())
	// The redriven delivery is still a child of the original producer span.
	spans := f.ended(t, trace.SpanKindConsumer, 2)
	assert.Equal(t, psc.SpanID(), spans[1].Parent().SpanID())
	assert.Equal(t, "acked", attrOf(spans[1], bqotel.AttrOutcome).AsString())
}

// TestAFailedRedriveSpanIsAnError: when dlq.Redrive fails, here because the queue refuses the
// republish (the embedded broker's fault hook), the redrive span's status is Error with the
// error's message, and the error is recorded as an exception event.
func TestAFailedRedriveSpanIsAnError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dlqTopic, err := dlq.TopicFor(f.topic)
	require.NoError(t, err)
	require.NoError(t, dlq.EnsureSubscription(context.Background(), f.client, dlqTopic, dlq.DefaultSubscription))
	env, err := envelope.Make(orderURN, map[string]any{"order_id": 10})
	require.NoError(t, err)
	dead := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonFailed, Cause: errors.New("declined"), Attempts: 3})
	body, err := dead.Encode()
	require.NoError(t, err)
	prod, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: dlqTopic})
	require.NoError(t, err)
	defer prod.Close()
	_, err = prod.Send(context.Background(), &apulsar.ProducerMessage{Payload: body, Properties: bqpulsar.ProjectProperties(dead)})
	require.NoError(t, err)

	require.NoError(t, f.broker.CreateTopic(f.topic))
	// NotAllowedError: the client gives the send up without reconnecting; the redrive ends
	// with its context.
	f.broker.FailNextSends(f.topic, 1, pulsartest.NotAllowedError)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	rep, err := f.tel.Redrive(ctx, f.client, dlq.RedriveOptions{Topic: dlqTopic, IdleTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Empty(t, rep.Moved)

	var redrive sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.Name() == "redrive "+dlqTopic {
			redrive = s
		}
	}
	require.NotNil(t, redrive)
	assert.Equal(t, codes.Error, redrive.Status().Code)
	assert.Equal(t, err.Error(), redrive.Status().Description)
	assert.Contains(t, eventNames(redrive), "exception", "the error is recorded")
	assert.Equal(t, int64(0), attrOf(redrive, bqotel.AttrRedriveMoved).AsInt64())
}

// TestUnknownURNAndDroppedGetSpanEventsAndCounters: a message no handler is registered for,
// with one attempt and dead-lettering off, is reported as unknown_urn and then dropped. Its
// consumer span gets both events, the outcome dropped with its reason, status Error and
// error.type; the unknown_urn and dropped counters count it, dropped with the reason.
func TestUnknownURNAndDroppedGetSpanEventsAndCounters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil },
		bqpulsar.WithMaxAttempts(1), bqpulsar.WithDeadLetter(dlq.Off()))
	const unknown = "urn:babel:orders:unknown"
	_, err := f.publisher(t).Publish(context.Background(), unknown, nil)
	require.NoError(t, err)

	s := f.ended(t, trace.SpanKindConsumer, 1)[0]
	assert.Equal(t, []string{bqotel.EventUnknownURN, bqotel.EventDropped}, eventNames(s))
	for _, e := range s.Events() {
		switch e.Name {
		case bqotel.EventUnknownURN:
			assert.Contains(t, e.Attributes, bqotel.AttrURN.String(unknown))
		case bqotel.EventDropped:
			assert.Contains(t, e.Attributes, bqotel.AttrReason.String("unknown_urn"))
		}
	}
	assert.Equal(t, "dropped", attrOf(s, bqotel.AttrOutcome).AsString())
	assert.Equal(t, "unknown_urn", attrOf(s, bqotel.AttrReason).AsString())
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Equal(t, "*pulsar.ExhaustedError", attrOf(s, semconv.ErrorTypeKey).AsString(), "the failure's Go type")

	unknownURN := f.sums(t, bqotel.MetricUnknownURN)
	require.Len(t, unknownURN, 1)
	assert.Equal(t, int64(1), unknownURN[0].Value)
	assert.Equal(t, f.topic, value(unknownURN[0].Attributes, semconv.MessagingDestinationNameKey))
	assert.Equal(t, "billing", value(unknownURN[0].Attributes, semconv.MessagingDestinationSubscriptionNameKey))
	dropped := f.sums(t, bqotel.MetricDropped)
	require.Len(t, dropped, 1)
	assert.Equal(t, int64(1), dropped[0].Value)
	assert.Equal(t, "unknown_urn", value(dropped[0].Attributes, bqotel.AttrReason), "dropped carries the reason")
	assert.Equal(t, "billing", value(dropped[0].Attributes, semconv.MessagingDestinationSubscriptionNameKey))
	c := f.counters(t)
	assert.Zero(t, c[bqotel.MetricDeadLettered])
	assert.Equal(t, int64(1), c[bqotel.MetricSettled])
}

func TestPulsarHasNoOpenTelemetryDependency(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", "github.com/babelqueue/babelqueue-go-pulsar/pulsar").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "github.com/apache/pulsar-client-go/pulsar", "the listing worked")
	assert.NotContains(t, string(out), "go.opentelemetry.io", "a program that does not import bqotel pays nothing for it")
}

func TestTruncatedDeadLetterIsCountedAndMarked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumer(t, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		return bqpulsar.DeadLetter(errors.New("refused"))
	}, bqpulsar.WithMaxMessageSize(64<<10))
	big := strings.Repeat("x", 100<<10)
	_, err := f.publisher(t).Publish(context.Background(), orderURN, map[string]any{"note": big})
	require.NoError(t, err)
	s := f.ended(t, trace.SpanKindConsumer, 1)[0]
	assert.Contains(t, eventNames(s), bqotel.EventTruncated)
	assert.Equal(t, int64(1), f.counters(t)[bqotel.MetricTruncated])
}

// The routing URN that the consumer span starts with and the consumed count carry, before
// decoding, is a usable bq-job property's, as the consumer routes: a blank one names no URN,
// a usable one its own even when the body says another. The span ends with the URN the
// message was routed by, if any (a poison body has none).
func TestReceivedURNIsTheRoutingURN(t *testing.T) {
	t.Parallel()
	f := newFixture(t, bqotel.WithURNMetricAttribute())
	const routed = "urn:babel:orders:created-v2"
	handled := make(chan struct{}, 2)
	h := func(context.Context, *envelope.Envelope, apulsar.Message) error { handled <- struct{}{}; return nil }
	f.consumer(t, h, bqpulsar.Handle(routed, h))

	p, err := f.client.CreateProducer(apulsar.ProducerOptions{Topic: f.topic, DisableBatching: true})
	require.NoError(t, err)
	defer p.Close()
	env, err := envelope.Make(orderURN, map[string]any{"order_id": 1})
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	for _, m := range []struct{ job, payload string }{
		{" \t", string(payload)}, {routed, string(payload)}, {" \t", "not an envelope"},
	} {
		props := bqpulsar.ProjectProperties(env)
		props[bqpulsar.PropJob] = m.job
		_, err := p.Send(context.Background(), &apulsar.ProducerMessage{Payload: []byte(m.payload), Properties: props})
		require.NoError(t, err)
	}
	for range 2 {
		select {
		case <-handled:
		case <-time.After(waitLong):
			t.Fatal("a message was not handled")
		}
	}

	urns := map[string]bool{}
	for _, s := range f.ended(t, trace.SpanKindConsumer, 3) {
		v := attrOf(s, bqotel.AttrURN)
		urns[v.AsString()] = v.Type() != attribute.EMPTY
	}
	assert.Equal(t, map[string]bool{orderURN: true, routed: true, "": false}, urns,
		"the body's URN routes past a blank bq-job, a usable one routes by itself, poison has none")

	consumed := map[string]int64{}
	for _, dp := range f.sums(t, bqotel.MetricConsumed) {
		consumed[value(dp.Attributes, bqotel.AttrURN)] += dp.Value
	}
	assert.Equal(t, map[string]int64{"": 2, routed: 1}, consumed)
}
