package pulsar

import (
	"context"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventReceived reports that a message was received (before the gate).
	EventReceived EventKind = iota + 1
	// EventHandled reports that a handler returned nil; Latency is the handler's duration.
	EventHandled
	// EventFailed reports that a handler returned an error or panicked; Latency is the handler's
	// duration and Err the failure.
	EventFailed
	// EventRetried reports that a failed message was republished or negatively acknowledged for another
	// delivery.
	EventRetried
	// EventDeadLettered reports that a copy was written to the dead-letter topic and the original
	// acknowledged; Reason says why ("" for a gate rejection).
	EventDeadLettered
	// EventDropped reports that a message was acknowledged without being handled or dead-lettered
	// (attempts exhausted, poison or gate rejection with dead-lettering off).
	EventDropped
	// EventPoison reports that the payload is not an acceptable envelope; Err is the *envelope.PoisonError.
	EventPoison
	// EventGateRejected reports that the bq-schema-version property was rejected before decoding.
	EventGateRejected
	// EventUnknownURN reports that no handler is registered for the routing URN.
	EventUnknownURN
	// EventTruncated reports that a dead-letter copy too large for the broker was replaced
	// by a truncated, marked copy (the original's size, SHA-256 and first bytes); Err is the
	// *TruncatedError. An EventDeadLettered follows when the copy is written.
	EventTruncated
)

// String returns the kind's name in lower case ("received", "handled", …).
func (k EventKind) String() string {
	switch k {
	case EventReceived:
		return "received"
	case EventHandled:
		return "handled"
	case EventFailed:
		return "failed"
	case EventRetried:
		return "retried"
	case EventDeadLettered:
		return "dead_lettered"
	case EventDropped:
		return "dropped"
	case EventPoison:
		return "poison"
	case EventGateRejected:
		return "gate_rejected"
	case EventUnknownURN:
		return "unknown_urn"
	case EventTruncated:
		return "truncated"
	default:
		return "unknown"
	}
}

// Event is one observation of the consume pipeline.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Topic is the topic (partition) the message was received on.
	Topic string
	// URN is the routing URN when known ("" before routing, e.g. for poison).
	URN string
	// Attempt is the counted delivery number when known (0 before reconciliation).
	Attempt int
	// Latency is the handler's duration for EventHandled and EventFailed.
	Latency time.Duration
	// Reason is the dead-letter reason for EventDeadLettered and EventDropped.
	Reason envelope.Reason
	// Err is the failure, when there is one.
	Err error
	// Subscription is the consumer's subscription name ("" when unknown: a wrapped
	// consumer).
	Subscription string
	// Context is the delivery's context: the consumer's, or the one its [DeliveryHook]s
	// returned (carrying a tracing span, say). Nil for events outside a delivery.
	Context context.Context //nolint:containedctx // the delivery's, so that an observer can reach its span
}

// Observer receives the consume pipeline's events, for metrics or tracing, without the SDK
// importing a metrics library. Observe is called synchronously from the goroutine handling
// the message, possibly from several goroutines at once: it must be fast and safe for
// concurrent use. A panic in Observe is recovered and logged.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }
