package pulsar

import engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"

// EventKind says what an [Event] reports; its String method gives the kind's name in lower
// case ("received", "handled", …).
type EventKind = engine.EventKind

// The kinds of [Event].
const (
	// EventReceived reports that a message was received (before the gate).
	EventReceived = engine.EventReceived
	// EventHandled reports that a handler returned nil; Latency is the handler's duration.
	EventHandled = engine.EventHandled
	// EventFailed reports that a handler returned an error or panicked; Latency is the handler's
	// duration and Err the failure.
	EventFailed = engine.EventFailed
	// EventRetried reports that a failed message was republished or negatively acknowledged for another
	// delivery.
	EventRetried = engine.EventRetried
	// EventDeadLettered reports that a copy was written to the dead-letter topic and the original
	// acknowledged; Reason says why ("" for a gate rejection).
	EventDeadLettered = engine.EventDeadLettered
	// EventDropped reports that a message was acknowledged without being handled or dead-lettered
	// (attempts exhausted, poison or gate rejection with dead-lettering off).
	EventDropped = engine.EventDropped
	// EventPoison reports that the payload is not an acceptable envelope; Err is the *envelope.PoisonError.
	EventPoison = engine.EventPoison
	// EventGateRejected reports that the bq-schema-version property was rejected before decoding.
	EventGateRejected = engine.EventGateRejected
	// EventUnknownURN reports that no handler is registered for the routing URN.
	EventUnknownURN = engine.EventUnknownURN
	// EventTruncated reports that a dead-letter copy too large for the broker was replaced
	// by a truncated, marked copy; Err is the *TruncatedError.
	EventTruncated = engine.EventTruncated
)

// Event is one observation of the consume pipeline: its Kind, the Topic (partition) the
// message was received on, the routing URN and counted Attempt when known, the handler's
// Latency (handled, failed), the dead-letter Reason (dead-lettered, dropped), the failure
// Err, the Subscription, and the delivery's Context (carrying what a [DeliveryHook] put in
// it, such as a tracing span).
type Event = engine.Event

// Observer receives the consume pipeline's events, for metrics or tracing, without the SDK
// importing a metrics library. Observe is called synchronously from the goroutine handling
// the message, possibly from several goroutines at once: it must be fast and safe for
// concurrent use. A panic in Observe is recovered and logged.
type Observer = engine.Observer

// ObserverFunc adapts a function to [Observer].
type ObserverFunc = engine.ObserverFunc
