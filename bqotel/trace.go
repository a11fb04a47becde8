package bqotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// The BabelQueue attributes of spans (and, for URN, outcome and reason, of metrics).
const (
	// AttrURN is the routing URN.
	AttrURN = attribute.Key("babelqueue.urn")
	// AttrMetaID is the envelope's meta.id, the message's idempotency key
	// (messaging.message.id is the id Pulsar assigned).
	AttrMetaID = attribute.Key("babelqueue.message.id")
	// AttrTraceID is the envelope's trace_id.
	AttrTraceID = attribute.Key("babelqueue.trace_id")
	// AttrAttempt is the counted delivery number (1 for the first delivery).
	AttrAttempt = attribute.Key("babelqueue.attempt")
	// AttrRedeliveryCount is Pulsar's redelivery count of the message.
	AttrRedeliveryCount = attribute.Key("babelqueue.redelivery_count")
	// AttrOutcome is how a delivery was settled (acked, retried, dead_lettered, dropped,
	// nacked), or the result of a send (ok, error).
	AttrOutcome = attribute.Key("babelqueue.outcome")
	// AttrReason is the dead-letter reason (failed, poison, …).
	AttrReason = attribute.Key("babelqueue.dead_letter.reason")
	// AttrLinkSource says where a link of a consumer span comes from: "traceparent" (the
	// producer span, also the parent), "trace_id" (the trace derived from the envelope's
	// trace_id, see [TraceIDFrom]) or "ambient" (the span the consumer itself runs in).
	AttrLinkSource = attribute.Key("babelqueue.link.source")
)

// The names of the span events a consumer span gets.
const (
	EventRetry        = "babelqueue.retry"
	EventDeadLetter   = "babelqueue.dead_letter"
	EventDropped      = "babelqueue.dropped"
	EventPoison       = "babelqueue.poison"
	EventGateRejected = "babelqueue.gate_rejected"
	EventUnknownURN   = "babelqueue.unknown_urn"
	EventTruncated    = "babelqueue.dead_letter.truncated"
)

var (
	attrSystem      = semconv.MessagingSystemPulsar
	attrOpProcess   = semconv.MessagingOperationTypeProcess
	attrOpSend      = semconv.MessagingOperationTypeSend
	attrNameProcess = semconv.MessagingOperationName("process")
	attrNameSend    = semconv.MessagingOperationName("send")
)

// deliveryKey is the context key of a delivery's state.
type deliveryKey struct{}

// delivery is what the Delivery and Event hooks share about one delivery.
type delivery struct {
	span         trace.Span      // nil without tracing
	ctx          context.Context //nolint:containedctx // the delivery's, for its settlement's measurement; it lives as long as the delivery
	topic        string
	subscription string
	start        time.Time // when the delivery hook ran: the consumer span's start
}

func deliveryFrom(ctx context.Context) *delivery {
	if ctx == nil {
		return nil
	}
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// delivery is the Delivery hook: it opens a consumer span per delivery (see the package
// documentation for its parent, links and attributes) and ends it with the delivery's
// settlement. The handler's context carries the span, so spans the handler starts are its
// children.
func (t *Telemetry) delivery(ctx context.Context, msg apulsar.Message) (context.Context, func(bqpulsar.Event)) {
	d := &delivery{topic: msg.Topic(), start: time.Now()}
	if info, ok := bqpulsar.ConsumerInfoFrom(ctx); ok {
		d.subscription = info.Subscription // known at the span's start, for samplers
	}
	if t.cfg.tracing {
		ctx = t.startConsumerSpan(ctx, msg, d)
	}
	ctx = context.WithValue(ctx, deliveryKey{}, d)
	d.ctx = ctx
	return ctx, func(s bqpulsar.Event) { t.settled(d, s) }
}

func (t *Telemetry) startConsumerSpan(ctx context.Context, msg apulsar.Message, d *delivery) context.Context {
	props := msg.Properties()
	pctx := t.cfg.prop.Extract(ctx, readCarrier(props))
	remote := trace.SpanContextFromContext(pctx)
	dest, partition := splitPartition(d.topic)
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs, attrSystem, attrOpProcess, attrNameProcess, semconv.MessagingDestinationName(dest),
		semconv.MessagingMessageBodySize(len(msg.Payload())),
		AttrRedeliveryCount.Int64(int64(msg.RedeliveryCount())))
	attrs = append(attrs, t.cfg.server...)
	if d.subscription != "" {
		attrs = append(attrs, semconv.MessagingDestinationSubscriptionName(d.subscription))
	}
	if partition != "" {
		attrs = append(attrs, semconv.MessagingDestinationPartitionID(partition))
	}
	attrs = append(attrs, semconv.MessagingMessageID(msg.ID().String()))
	if id := props[bqpulsar.PropMessageID]; id != "" {
		attrs = append(attrs, AttrMetaID.String(id))
	}
	if urn := props[bqpulsar.PropJob]; urn != "" {
		attrs = append(attrs, AttrURN.String(urn))
	}
	traceID := props[bqpulsar.PropTraceID]
	if traceID != "" {
		attrs = append(attrs, AttrTraceID.String(traceID))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...), trace.WithTimestamp(d.start)}
	switch {
	case remote.IsValid() && remote.IsRemote():
		// The producer span is the parent (one message per process span) and, as the
		// messaging conventions ask of the creation context, a link too.
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{AttrLinkSource.String("traceparent")}}))
	default:
		// No producer context: the span joins the trace the envelope's trace_id names, as a
		// child of a remote parent derived from it (trace_id continues the trace across
		// SDKs), and is linked to it; without a trace_id, a root span. Whatever the
		// consumer's own context carries is not the parent.
		pctx = ctx
		if tid, ok := TraceIDFrom(traceID); ok {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: parentSpanIDFrom(traceID), TraceFlags: trace.FlagsSampled, Remote: true,
			})
			pctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLinkSource.String("trace_id"), AttrTraceID.String(traceID)}}))
		} else {
			opts = append(opts, trace.WithNewRoot())
		}
	}
	if amb := trace.SpanContextFromContext(ctx); amb.IsValid() && !amb.Equal(remote) {
		// The consumer runs inside a span of its own (a worker's, say): never the parent,
		// but linked, as the conventions recommend.
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: amb, Attributes: []attribute.KeyValue{AttrLinkSource.String("ambient")}}))
	}
	ctx, d.span = t.tracer.Start(pctx, "process "+dest, opts...)
	return ctx
}

// spanEvent records an event on the delivery's span.
func spanEvent(d *delivery, e bqpulsar.Event) {
	if d.span == nil {
		return
	}
	switch e.Kind {
	case bqpulsar.EventFailed:
		d.span.RecordError(e.Err, trace.WithAttributes(AttrAttempt.Int(e.Attempt)))
	case bqpulsar.EventRetried:
		d.span.AddEvent(EventRetry, trace.WithAttributes(AttrAttempt.Int(e.Attempt)))
	case bqpulsar.EventDeadLettered:
		d.span.AddEvent(EventDeadLetter, trace.WithAttributes(AttrAttempt.Int(e.Attempt), AttrReason.String(string(e.Reason))))
	case bqpulsar.EventDropped:
		d.span.AddEvent(EventDropped, trace.WithAttributes(AttrAttempt.Int(e.Attempt), AttrReason.String(string(e.Reason))))
	case bqpulsar.EventPoison:
		d.span.AddEvent(EventPoison, trace.WithAttributes(errorMessage(e.Err)))
	case bqpulsar.EventGateRejected:
		d.span.AddEvent(EventGateRejected, trace.WithAttributes(errorMessage(e.Err)))
	case bqpulsar.EventUnknownURN:
		d.span.AddEvent(EventUnknownURN, trace.WithAttributes(AttrURN.String(e.URN)))
	case bqpulsar.EventTruncated:
		d.span.AddEvent(EventTruncated, trace.WithAttributes(errorMessage(e.Err)))
	default:
	}
}

func errorMessage(err error) attribute.KeyValue {
	if err == nil {
		return semconv.ExceptionMessage("")
	}
	return semconv.ExceptionMessage(err.Error())
}

// settled ends the delivery's span and counts the settlement.
func (t *Telemetry) settled(d *delivery, s bqpulsar.Event) {
	now := time.Now() // the span's end and the process duration's, so that the two agree
	if t.m != nil {
		t.m.settlement(d, s, now)
	}
	if d.span == nil {
		return
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(s.Kind.String()), AttrAttempt.Int(s.Attempt)}
	if s.URN != "" {
		attrs = append(attrs, AttrURN.String(s.URN))
	}
	if s.Reason != "" {
		attrs = append(attrs, AttrReason.String(string(s.Reason)))
	}
	if s.Kind != bqpulsar.EventAcked {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(s.Err, s.Kind.String())))
		desc := s.Kind.String()
		if s.Err != nil {
			desc = s.Err.Error()
		}
		d.span.SetStatus(codes.Error, desc)
	}
	d.span.SetAttributes(attrs...)
	d.span.End(trace.WithTimestamp(now))
}

// errorType is the error.type of a failure: the Go type of err, or fallback without one.
func errorType(err error, fallback string) string {
	if err == nil {
		return fallback
	}
	return fmt.Sprintf("%T", err)
}

// publish is the Publish hook: it opens a producer span per message (a child of the span
// in the Publish call's context), injects its context into the message properties
// (traceparent and tracestate, with the default propagator; a property the caller set is
// kept) and counts the send.
func (t *Telemetry) publish(ctx context.Context, m *bqpulsar.OutgoingMessage) func(apulsar.MessageID, error) {
	start := time.Now()
	var span trace.Span
	if t.cfg.tracing {
		dest, partition := splitPartition(m.Topic)
		attrs := make([]attribute.KeyValue, 0, 11)
		attrs = append(attrs, attrSystem, attrOpSend, attrNameSend, semconv.MessagingDestinationName(dest))
		attrs = append(attrs, t.cfg.server...)
		if partition != "" {
			attrs = append(attrs, semconv.MessagingDestinationPartitionID(partition))
		}
		if m.Message != nil {
			attrs = append(attrs, semconv.MessagingMessageBodySize(len(m.Message.Payload)))
		}
		if e := m.Envelope; e != nil {
			attrs = append(attrs, AttrMetaID.String(e.Meta.ID), AttrURN.String(e.URN()), AttrTraceID.String(e.TraceID))
		}
		ctx, span = t.tracer.Start(ctx, "send "+dest, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		if m.Message != nil {
			t.cfg.prop.Inject(ctx, writeCarrier{m.Message})
		}
	}
	if span == nil && t.m == nil {
		return nil
	}
	return func(id apulsar.MessageID, err error) {
		if t.m != nil {
			t.m.published(ctx, m, err, start)
		}
		if span == nil {
			return
		}
		if id != nil {
			span.SetAttributes(semconv.MessagingMessageID(id.String())) // the id Pulsar assigned, known at the receipt
			if m.Partitioned {
				// The producer picked the partition after this hook ran; the receipt names it.
				span.SetAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(id.PartitionIdx()))))
			}
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err, "")))
		}
		span.End()
	}
}

// splitPartition splits "topic-partition-N" into the topic and N ("" when not a partition).
func splitPartition(topic string) (string, string) {
	i := strings.LastIndex(topic, "-partition-")
	if i < 0 {
		return topic, ""
	}
	n := topic[i+len("-partition-"):]
	if _, err := strconv.ParseUint(n, 10, 32); err != nil {
		return topic, ""
	}
	return topic[:i], n
}

// readCarrier reads message properties for extraction.
type readCarrier map[string]string

func (c readCarrier) Get(key string) string { return c[key] }

func (readCarrier) Set(string, string) {}

func (c readCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// writeCarrier injects into a producer message's properties without overwriting a
// property that is already there: a header the caller gave wins.
type writeCarrier struct{ m *apulsar.ProducerMessage }

func (c writeCarrier) Get(key string) string { return c.m.Properties[key] }

func (c writeCarrier) Set(key, value string) {
	if _, ok := c.m.Properties[key]; ok {
		return
	}
	if c.m.Properties == nil {
		c.m.Properties = map[string]string{}
	}
	c.m.Properties[key] = value
}

func (c writeCarrier) Keys() []string { return readCarrier(c.m.Properties).Keys() }

// TraceIDFrom returns the OpenTelemetry trace id a BabelQueue trace_id names, by the Go
// core's rule (its otel helper's TraceIDOf), so that every SDK puts the hops that share a
// trace_id in one trace: with its hyphens removed, a trace_id of 32 hex digits (a UUID, in
// either case) names the trace of those 16 bytes; any other trace_id, and the all-zero UUID,
// names the trace of the first 16 bytes of its SHA-256. Only "" names none (ok false). For a
// UUID it matches the connector sink's traceparent, whose trace id is the UUID's 32 hex
// digits, and it inverts the Publisher's trace_id inside an active trace.
func TraceIDFrom(traceID string) (trace.TraceID, bool) {
	var id trace.TraceID
	if traceID == "" {
		return id, false
	}
	var buf [32]byte
	digits, long := buf[:0], false
	for i := range len(traceID) {
		if c := traceID[i]; c != '-' {
			if len(digits) == cap(digits) {
				long = true
				break
			}
			digits = append(digits, c)
		}
	}
	if !long && len(digits) == len(buf) {
		if _, err := hex.Decode(id[:], digits); err == nil && id.IsValid() {
			return id, true
		}
	}
	sum := sha256.Sum256([]byte(traceID))
	copy(id[:], sum[:len(id)])
	return id, true
}

// parentSpanIDFrom is the span id of the remote parent a consumer span without a traceparent
// gets in the trace of its trace_id: the first 8 bytes of the SHA-256 of
// "babelqueue-span:"+traceID (never zero), the Go core's rule, so that the parent is the same
// in every SDK. No span of that id is ever recorded.
func parentSpanIDFrom(traceID string) trace.SpanID {
	sum := sha256.Sum256([]byte("babelqueue-span:" + traceID))
	var s trace.SpanID
	copy(s[:], sum[:len(s)])
	if !s.IsValid() {
		s[len(s)-1] = 1
	}
	return s
}
