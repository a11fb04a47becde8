package pulsar

import (
	"context"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventReceived reports that a message was received (before the gate).
	EventReceived EventKind = iota + 1
	// EventHandled reports that a handler returned nil; Latency is the handler's duration.
	EventHandled
	// EventFailed reports that a handler returned an error or panicked (a *[PanicError]);
	// Latency is the handler's duration and Err the failure.
	EventFailed
	// EventRetried reports a settlement: a failed message was republished (and the original
	// acknowledged) or negatively acknowledged for another delivery; Err is the failure.
	EventRetried
	// EventDeadLettered reports a settlement: a copy was written to the dead-letter topic
	// and the original acknowledged; Reason says why ("" for a gate rejection) and Err is
	// the failure.
	EventDeadLettered
	// EventDropped reports a settlement: a message was acknowledged without being handled
	// or dead-lettered, because dead-lettering is off (attempts exhausted, poison or a gate
	// rejection); Err is an *[ExhaustedError] for exhausted attempts, else the failure.
	EventDropped
	// EventPoison reports that the payload is not an acceptable envelope; Err is the
	// *envelope.PoisonError.
	EventPoison
	// EventGateRejected reports that the bq-schema-version property was rejected before
	// decoding; Err is the *[SchemaVersionError].
	EventGateRejected
	// EventUnknownURN reports that no handler is registered for the routing URN; Err is the
	// *[UnknownURNError].
	EventUnknownURN
	// EventTruncated reports that a dead-letter copy too large for the broker was replaced
	// by a truncated, marked copy (the original's size, SHA-256 and first bytes); Err matches
	// [ErrTruncated]. An EventDeadLettered follows when the copy is written.
	EventTruncated
	// EventAcked reports a settlement: the message was acknowledged after its handler (or
	// [HandleUnknown]'s) succeeded, or by [Delivery.Ack].
	EventAcked
	// EventNacked reports a settlement: the message was negatively acknowledged (or, for a
	// failed acknowledgement, left to the broker) and comes back. Err is why: the failed
	// republish or dead-letter write (a *[SendError], joined after the failure being
	// settled), the failed acknowledgement (a *[SettleError]), or the error given to
	// [Delivery.Nack].
	EventNacked
	// EventRoutingMismatch reports that a usable bq-job property differs from the body's
	// URN: the property wins the routing. URN is the property's, Envelope.URN() the body's.
	EventRoutingMismatch
	// EventError reports a failure that has no kind of its own, outside a delivery's steps:
	// a receive failure (a *[ReceiveError]; the loop goes on unless it is fatal), the broker
	// found unreachable (an *[UnreachableError]), deliveries of [Consumer.Next] left
	// unsettled at Close (wrapping [ErrUnsettled]), or a retry copy its queue refused for
	// good (a *[SendError] matching [ErrRepublish]; the message is dead-lettered instead),
	// or the warning of a delivery a handler settled with [AckWithWarning] (its outcome;
	// its EventAcked carries it too).
	EventError
)

var eventKindNames = [...]string{
	EventReceived: "received", EventHandled: "handled", EventFailed: "failed", EventRetried: "retried",
	EventDeadLettered: "dead_lettered", EventDropped: "dropped", EventPoison: "poison",
	EventGateRejected: "gate_rejected", EventUnknownURN: "unknown_urn", EventTruncated: "truncated",
	EventAcked: "acked", EventNacked: "nacked", EventRoutingMismatch: "routing_mismatch", EventError: "error",
}

// String returns the kind's name in lower case ("received", "handled", "dead_lettered",
// …); a settlement's kind is named as the contract's reports name outcomes ("acked",
// "retried", "dead_lettered", "dropped", "nacked").
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "unknown"
}

// Event is one observation of the consume pipeline, given to the [Hooks] Event functions
// and, for a settlement, to the function a Delivery hook returned.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Topic is the topic (partition) the message was received on ("" outside a delivery).
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
	// Envelope is the decoded envelope when there is one (nil before classification, for
	// poison and gate rejections, and outside a delivery); do not modify it.
	Envelope *envelope.Envelope
	// Message is the Pulsar message (nil outside a delivery).
	Message apulsar.Message
	// Subscription is the consumer's subscription name ("" when unknown: a wrapped
	// consumer without [WithSubscription]).
	Subscription string
	// Context is the delivery's context: the consumer's, or the one its Delivery hooks
	// returned (carrying a tracing span, say). Nil for events outside a delivery.
	Context context.Context //nolint:containedctx // the delivery's, so that a hook can reach its span
}
