package bqotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
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

// delivery is what the Delivery and Event hooks share about one delivery. It is the
// delivery's context too (the one the Delivery hook returns: the consumer's, with the
// consumer span), which answers deliveryKey with itself, so that one allocation carries
// both. Its arrays hold what the span is started and settled with (the SDK copies them),
// so that neither needs an allocation of its own.
type delivery struct {
	context.Context //nolint:containedctx // the delivery's context, which this is

	span         trace.Span // nil without tracing
	topic        string     // the topic (partition) the message came from
	dest         string     // topic without its partition suffix
	partition    string     // topic's partition suffix ("" for none)
	subscription string
	start        time.Time // when the delivery hook ran: the consumer span's start

	attrs [16]attribute.KeyValue
	opts  [4]trace.SpanStartOption
	links [2]trace.Link
}

// Value answers deliveryKey with d, and any other key from the delivery's context.
func (d *delivery) Value(key any) any {
	if _, ok := key.(deliveryKey); ok {
		return d
	}
	return d.Context.Value(key)
}

func deliveryFrom(ctx context.Context) *delivery {
	if ctx == nil {
		return nil
	}
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// The span start options and link attributes that never change.
var (
	consumerKind    = trace.WithSpanKind(trace.SpanKindConsumer)
	producerKind    = trace.WithSpanKind(trace.SpanKindProducer)
	newRoot         = trace.WithNewRoot()
	linkTraceparent = []attribute.KeyValue{AttrLinkSource.String("traceparent")}
	linkAmbient     = []attribute.KeyValue{AttrLinkSource.String("ambient")}
	linkSourceTrace = AttrLinkSource.String("trace_id")
)

// delivery is the Delivery hook: it opens a consumer span per delivery (see the package
// documentation for its parent, links and attributes) and ends it with the delivery's
// settlement. The handler's context carries the span, so spans the handler starts are its
// children.
func (t *Telemetry) delivery(ctx context.Context, msg apulsar.Message) (context.Context, func(bqpulsar.Event)) {
	d := &delivery{Context: ctx, topic: msg.Topic(), start: time.Now()}
	d.dest, d.partition = splitPartition(d.topic)
	if info, ok := bqpulsar.ConsumerInfoFrom(ctx); ok {
		d.subscription = info.Subscription // known at the span's start, for samplers
	}
	if t.cfg.tracing {
		d.Context = t.startConsumerSpan(ctx, msg, d)
	}
	return d, func(s bqpulsar.Event) { t.settled(d, s) }
}

func (t *Telemetry) startConsumerSpan(ctx context.Context, msg apulsar.Message, d *delivery) context.Context {
	props := msg.Properties()
	amb := trace.SpanContextFromContext(ctx) // the consumer's own span, a worker's say
	pctx, remote := t.extract(ctx, props)
	dest, partition := d.dest, d.partition
	attrs := append(d.attrs[:0], attrSystem, attrOpProcess, attrNameProcess, semconv.MessagingDestinationName(dest),
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
	if urn, ok := binding.RoutedJob(props); ok { // the routing URN, when bq-job names it
		attrs = append(attrs, AttrURN.String(urn))
	}
	traceID := props[bqpulsar.PropTraceID]
	if traceID != "" {
		attrs = append(attrs, AttrTraceID.String(traceID))
	}
	opts := append(d.opts[:0], consumerKind, trace.WithAttributes(attrs...), trace.WithTimestamp(d.start))
	links := d.links[:0]
	switch {
	case remote.IsValid() && remote.IsRemote():
		// The producer span is the parent (one message per process span) and, as the
		// messaging conventions ask of the creation context, a link too.
		links = append(links, trace.Link{SpanContext: remote, Attributes: linkTraceparent})
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
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{linkSourceTrace, AttrTraceID.String(traceID)}})
		} else {
			opts = append(opts, newRoot)
		}
	}
	if amb.IsValid() && !amb.Equal(remote) {
		// The consumer runs inside a span of its own (a worker's, say): never the parent,
		// but linked, as the conventions recommend.
		links = append(links, trace.Link{SpanContext: amb, Attributes: linkAmbient})
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	ctx, d.span = t.tracer.Start(pctx, t.spanName(&t.processNames, "process ", dest), opts...)
	return ctx
}

// extract returns ctx with the span context that props carry (a producer's traceparent) in
// place of ctx's own span, and that span context, invalid when props carry none. ctx's own
// span is taken out first: a propagator returns the context it was given when there is
// nothing to extract, and the caller's span (a worker's, recorded or remote) would then be
// taken for the message's.
func (t *Telemetry) extract(ctx context.Context, props map[string]string) (context.Context, trace.SpanContext) {
	pctx := t.cfg.prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), readCarrier(props))
	return pctx, trace.SpanContextFromContext(pctx)
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
	// The start attributes were copied by the SDK at the start: the array is free again.
	attrs := append(d.attrs[:0], AttrOutcome.String(s.Kind.String()), AttrAttempt.Int(s.Attempt))
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
	if !t.cfg.tracing && t.m == nil {
		return nil
	}
	s := &sending{t: t, ctx: ctx, m: m, start: time.Now()}
	if t.cfg.tracing {
		dest, partition := splitPartition(m.Topic)
		attrs := append(s.attrs[:0], attrSystem, attrOpSend, attrNameSend, semconv.MessagingDestinationName(dest))
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
		var sctx context.Context
		sctx, s.span = t.tracer.Start(ctx, t.spanName(&t.sendNames, "send ", dest), producerKind, trace.WithAttributes(attrs...))
		s.ctx = sctx
		if m.Message != nil {
			t.cfg.prop.Inject(sctx, writeCarrier{m.Message})
		}
	}
	return s.done
}

// sending is one send a Publish hook follows, until its outcome. Its arrays hold what the
// span is started and ended with (the SDK copies them), so that neither needs an
// allocation of its own.
type sending struct {
	t     *Telemetry
	ctx   context.Context //nolint:containedctx // the send's, with its producer span, for its outcome's measurement
	m     *bqpulsar.OutgoingMessage
	span  trace.Span // nil without tracing
	start time.Time
	attrs [12]attribute.KeyValue
}

// done ends the send's span with its outcome and counts it.
func (s *sending) done(id apulsar.MessageID, err error) {
	if s.t.m != nil {
		s.t.m.published(s.ctx, s.m, err, s.start)
	}
	if s.span == nil {
		return
	}
	attrs := s.attrs[:0]
	if id != nil {
		attrs = append(attrs, semconv.MessagingMessageID(id.String())) // the id Pulsar assigned, known at the receipt
		if s.m.Partitioned {
			// The producer picked the partition after the hook ran; the receipt names it.
			attrs = append(attrs, semconv.MessagingDestinationPartitionID(strconv.Itoa(int(id.PartitionIdx()))))
		}
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(err, "")))
	}
	if len(attrs) > 0 {
		s.span.SetAttributes(attrs...)
	}
	s.span.End()
}

// spanName returns prefix+dest, built once per destination (names is the cache of one
// prefix).
func (*Telemetry) spanName(names *sync.Map, prefix, dest string) string {
	if n, ok := names.Load(dest); ok {
		if name, ok := n.(string); ok {
			return name
		}
	}
	n := prefix + dest
	names.Store(dest, n)
	return n
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
