package bqotel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// The names of the instruments (see the package documentation for their units and
// attributes).
const (
	MetricSent          = "messaging.client.sent.messages"
	MetricConsumed      = "messaging.client.consumed.messages"
	MetricProcess       = "messaging.process.duration"
	MetricOperation     = "messaging.client.operation.duration"
	MetricHandled       = "babelqueue.consumer.handled"
	MetricFailed        = "babelqueue.consumer.failed"
	MetricRetried       = "babelqueue.consumer.retried"
	MetricDeadLettered  = "babelqueue.consumer.dead_lettered"
	MetricDropped       = "babelqueue.consumer.dropped"
	MetricPoison        = "babelqueue.consumer.poison"
	MetricGateRejected  = "babelqueue.consumer.gate_rejected"
	MetricUnknownURN    = "babelqueue.consumer.unknown_urn"
	MetricTruncated     = "babelqueue.consumer.truncated"
	MetricSettled       = "babelqueue.consumer.settled"
	MetricInFlight      = "babelqueue.consumer.in_flight"
	MetricPublisherPend = "babelqueue.publisher.pending"
)

// durationBuckets are the bounds of the duration histograms, in seconds: the messaging
// semantic conventions' recommended boundaries, 5 ms to 10 s.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

type instruments struct {
	urn    bool
	server []attribute.KeyValue // WithServiceURL's, on every point

	sent, consumed                                        metric.Int64Counter
	handled, failed, retried, deadLettered, dropped       metric.Int64Counter
	poison, gateRejected, unknownURN, truncated, settledC metric.Int64Counter
	process, operation                                    metric.Float64Histogram
	inFlight, pending                                     metric.Int64ObservableGauge

	mu   sync.RWMutex
	sets map[setKey]*attrSet
}

// attrSet is one attribute set as the instruments take it, built once: ready-made option
// slices, so that a measurement allocates none (a variadic slice passed through an
// interface method escapes).
type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// setKey identifies one attribute set; kind separates the shapes of sets.
type setKey struct {
	kind                            byte
	topic, sub, urn, outcome, etype string
}

const (
	kindSent byte = iota + 1
	kindConsumer
	kindOutcome
	kindReason
	kindProcess
)

func newInstruments(m metric.Meter, t *Telemetry) (*instruments, error) {
	in := &instruments{urn: t.cfg.urnMetrics, server: t.cfg.server, sets: map[setKey]*attrSet{}}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.sent = counter(MetricSent, "{message}", "Messages a publisher sent (error.type set when the send failed).")
	in.consumed = counter(MetricConsumed, "{message}", "Messages a consumer received, before the schema-version gate.")
	in.handled = counter(MetricHandled, "{message}", "Deliveries whose handler returned nil.")
	in.failed = counter(MetricFailed, "{message}", "Deliveries whose handler returned an error or panicked.")
	in.retried = counter(MetricRetried, "{message}", "Failed deliveries republished or negatively acknowledged for another delivery.")
	in.deadLettered = counter(MetricDeadLettered, "{message}", "Messages written to their dead-letter topic.")
	in.dropped = counter(MetricDropped, "{message}", "Messages acknowledged without being handled or dead-lettered.")
	in.poison = counter(MetricPoison, "{message}", "Messages whose payload is not an acceptable envelope.")
	in.gateRejected = counter(MetricGateRejected, "{message}", "Messages the schema-version gate rejected.")
	in.unknownURN = counter(MetricUnknownURN, "{message}", "Messages no handler is registered for.")
	in.truncated = counter(MetricTruncated, "{message}", "Dead-letter copies too large for the broker, replaced by a truncated, marked copy.")
	in.settledC = counter(MetricSettled, "{delivery}", "Deliveries settled, by outcome.")
	var err error
	in.process, err = m.Float64Histogram(MetricProcess, metric.WithUnit("s"),
		metric.WithDescription("Duration of a delivery's processing, from its receipt to its settlement: its consumer span's duration."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, err)
	in.operation, err = m.Float64Histogram(MetricOperation, metric.WithUnit("s"),
		metric.WithDescription("Duration of a send, from the publish to the broker's receipt."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, err)
	in.inFlight, err = m.Int64ObservableGauge(MetricInFlight, metric.WithUnit("{message}"),
		metric.WithDescription("Messages a registered consumer is handling or settling."))
	errs = append(errs, err)
	in.pending, err = m.Int64ObservableGauge(MetricPublisherPend, metric.WithUnit("{message}"),
		metric.WithDescription("Asynchronous sends of a registered publisher awaiting their receipt."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bqotel: create instrument: %w", err)
		}
	}
	if _, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		t.observeGauges(in, o)
		return nil
	}, in.inFlight, in.pending); err != nil {
		return nil, fmt.Errorf("bqotel: register gauge callback: %w", err)
	}
	return in, nil
}

// set returns k's attribute set, built once.
func (in *instruments) set(k setKey) *attrSet {
	in.mu.RLock()
	o, ok := in.sets[k]
	in.mu.RUnlock()
	if ok {
		return o
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, attrSystem, semconv.MessagingDestinationName(k.topic))
	attrs = append(attrs, in.server...)
	switch k.kind {
	case kindSent:
		attrs = append(attrs, attrNameSend, AttrOutcome.String(k.outcome))
		if k.etype != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(k.etype))
		}
	case kindOutcome:
		attrs = append(attrs, AttrOutcome.String(k.outcome))
	case kindProcess:
		attrs = append(attrs, AttrOutcome.String(k.outcome))
		if k.etype != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(k.etype))
		}
	case kindReason:
		attrs = append(attrs, AttrReason.String(k.outcome))
	default:
	}
	if k.kind != kindSent {
		attrs = append(attrs, attrNameProcess)
		if k.sub != "" {
			attrs = append(attrs, semconv.MessagingDestinationSubscriptionName(k.sub))
		}
	}
	if k.urn != "" {
		attrs = append(attrs, AttrURN.String(k.urn))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o = &attrSet{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	in.mu.Lock()
	if prev, ok := in.sets[k]; ok {
		o = prev
	} else {
		in.sets[k] = o
	}
	in.mu.Unlock()
	return o
}

func (in *instruments) urnOf(urn string) string {
	if in.urn {
		return urn
	}
	return ""
}

// event counts one event of the consume pipeline.
func (in *instruments) event(e bqpulsar.Event, d *delivery) {
	ctx := e.Context
	if ctx == nil {
		return // every event of a delivery has its context; there is no other kind
	}
	var topic string
	if d != nil && e.Topic == d.topic {
		topic = d.dest
	} else {
		topic, _ = splitPartition(e.Topic)
	}
	k := setKey{kind: kindConsumer, topic: topic, sub: e.Subscription, urn: in.urnOf(e.URN)}
	var c metric.Int64Counter
	switch e.Kind {
	case bqpulsar.EventReceived:
		// Before decoding, the routing URN is known only when a usable bq-job names it.
		if in.urn && e.Message != nil {
			k.urn, _ = binding.RoutedJob(e.Message.Properties())
		}
		c = in.consumed
	case bqpulsar.EventHandled:
		c = in.handled
	case bqpulsar.EventFailed:
		c = in.failed
	case bqpulsar.EventRetried:
		c = in.retried
	case bqpulsar.EventDeadLettered:
		k.kind, k.outcome = kindReason, string(e.Reason)
		c = in.deadLettered
	case bqpulsar.EventDropped:
		k.kind, k.outcome = kindReason, string(e.Reason)
		c = in.dropped
	case bqpulsar.EventPoison:
		c = in.poison
	case bqpulsar.EventGateRejected:
		c = in.gateRejected
	case bqpulsar.EventUnknownURN:
		c = in.unknownURN
	case bqpulsar.EventTruncated:
		c = in.truncated
	default:
		return
	}
	c.Add(ctx, 1, in.set(k).add...)
}

// settlement counts d's settlement and records its processing duration, from the delivery
// hook (where its consumer span starts) to now (where the span ends), with error.type when
// the outcome is not acked.
func (in *instruments) settlement(d *delivery, s bqpulsar.Event, now time.Time) {
	k := setKey{kind: kindOutcome, topic: d.dest, sub: d.subscription, urn: in.urnOf(s.URN), outcome: s.Kind.String()}
	in.settledC.Add(d, 1, in.set(k).add...)
	k.kind = kindProcess
	if s.Kind != bqpulsar.EventAcked {
		k.etype = errorType(s.Err, s.Kind.String())
	}
	in.process.Record(d, now.Sub(d.start).Seconds(), in.set(k).rec...)
}

// published counts a send and records its duration (messaging.client.operation.duration)
// since start.
func (in *instruments) published(ctx context.Context, m *bqpulsar.OutgoingMessage, err error, start time.Time) {
	topic, _ := splitPartition(m.Topic)
	k := setKey{kind: kindSent, topic: topic, outcome: "ok"}
	if err != nil {
		k.outcome, k.etype = "error", errorType(err, "")
	}
	if m.Envelope != nil {
		k.urn = in.urnOf(m.Envelope.URN())
	}
	set := in.set(k)
	in.sent.Add(ctx, 1, set.add...)
	in.operation.Record(ctx, time.Since(start).Seconds(), set.rec...)
}

// event is the Event hook: it counts the consume pipeline's events, records the handler
// durations and adds the span events (retry, dead letter, poison, gate rejection, …) to the
// delivery's consumer span.
func (t *Telemetry) event(e bqpulsar.Event) {
	d := deliveryFrom(e.Context)
	if d != nil {
		spanEvent(d, e)
	}
	if t.m != nil {
		t.m.event(e, d)
	}
}

// InFlightReporter is what [Telemetry.RegisterConsumer] observes: a [bqpulsar.Consumer].
type InFlightReporter interface {
	InFlight() int
}

// PendingReporter is what [Telemetry.RegisterPublisher] observes: a [bqpulsar.Publisher].
type PendingReporter interface {
	Pending() int
	Topic() string
}

type gaugeEntry struct {
	value func() int
	opt   metric.ObserveOption
}

// RegisterConsumer adds c to the in-flight gauge (babelqueue.consumer.in_flight), with the
// subscription as its attribute. It returns the function that removes it again (call it
// when the consumer is closed). A nil c is refused.
func (t *Telemetry) RegisterConsumer(subscription string, c InFlightReporter) (func(), error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil consumer", ErrInvalidOption)
	}
	attrs := append([]attribute.KeyValue{attrSystem, semconv.MessagingDestinationSubscriptionName(subscription)}, t.cfg.server...)
	return t.register(t.consumers, &gaugeEntry{value: c.InFlight, opt: metric.WithAttributeSet(attribute.NewSet(attrs...))}), nil
}

// RegisterPublisher adds p to the pending-sends gauge (babelqueue.publisher.pending), with
// its topic as the attribute. It returns the function that removes it again. A nil p is
// refused.
func (t *Telemetry) RegisterPublisher(p PendingReporter) (func(), error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil publisher", ErrInvalidOption)
	}
	topic, _ := splitPartition(p.Topic())
	attrs := append([]attribute.KeyValue{attrSystem, semconv.MessagingDestinationName(topic)}, t.cfg.server...)
	return t.register(t.publishers, &gaugeEntry{value: p.Pending, opt: metric.WithAttributeSet(attribute.NewSet(attrs...))}), nil
}

func (t *Telemetry) register(set map[*gaugeEntry]struct{}, e *gaugeEntry) func() {
	t.gaugeMu.Lock()
	set[e] = struct{}{}
	t.gaugeMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.gaugeMu.Lock()
			delete(set, e)
			t.gaugeMu.Unlock()
		})
	}
}

func (t *Telemetry) observeGauges(in *instruments, o metric.Observer) {
	t.gaugeMu.Lock()
	defer t.gaugeMu.Unlock()
	for e := range t.consumers {
		o.ObserveInt64(in.inFlight, int64(e.value()), e.opt)
	}
	for e := range t.publishers {
		o.ObserveInt64(in.pending, int64(e.value()), e.opt)
	}
}
