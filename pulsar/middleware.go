package pulsar

import (
	"fmt"
	"time"

	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
)

// Middleware wraps a handler: it receives the context, the envelope and the Pulsar message
// of every delivery before the handler does, and the handler's outcome (the returned error,
// possibly a [DeadLetter] or [RetryAfter] outcome) on the way back. Idempotency, payload
// validation and tracing are written as middleware.
//
// A middleware that returns without calling next decides the outcome itself: nil
// acknowledges the message, an error settles it as a failed delivery.
type Middleware func(next HandlerFunc) HandlerFunc

// WithMiddleware wraps every registered handler in mw. The first middleware given is the
// outermost: WithMiddleware(a, b) runs a, then b, then the handler, and the outcome goes
// back through b, then a. Several WithMiddleware options append in the order given. A nil
// middleware is refused. Default: none.
func WithMiddleware(mw ...Middleware) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("%w: nil middleware at position %d", ErrInvalidOption, i)
			}
		}
		c.middleware = append(c.middleware, mw...)
		return nil
	})
}

// chain wraps h in mw, the first outermost.
func chain(h HandlerFunc, mw []Middleware) HandlerFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// WithDeliveryHook adds a delivery hook (see [DeliveryHook]). Several hooks nest: the first
// given is called first and its context is passed to the next; their finish functions run
// in reverse order. Default: none.
func WithDeliveryHook(h DeliveryHook) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if h == nil {
			return fmt.Errorf("%w: nil delivery hook", ErrInvalidOption)
		}
		c.deliveryHooks = append(c.deliveryHooks, h)
		return nil
	})
}

// DeadLetterError is the outcome "dead-letter now" (its Err is why no retry can help): the
// message is written to its dead-letter topic at once, with reason failed, without further
// retries. Build it with [DeadLetter].
type DeadLetterError = engine.DeadLetterError

// DeadLetter returns the handler outcome that dead-letters the message on this delivery,
// whatever attempts are left: for a failure no retry can fix, such as a payload that fails
// validation. With dead-lettering off the message is acknowledged, logged at WARN and
// reported as an [ExhaustedError]. err may be nil.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// RetryAfterError is the outcome "retry after Delay" (with the failure Err): a failed
// delivery whose retry waits at least Delay. Build it with [RetryAfter].
type RetryAfterError = engine.RetryAfterError

// RetryAfter returns the handler outcome "failed, retry after d": the delivery counts as
// failed (so maxAttempts still applies: an exhausted message is dead-lettered), and its
// retry is delayed by d instead of the policy's backoff. With retry.Republish on Shared and
// Key_Shared subscriptions the copy is sent with DeliverAfter; on Exclusive and Failover the
// worker waits d before republishing; with retry.Nack the negative acknowledgement is sent
// after d (the message stays unacknowledged meanwhile, and is nacked at once if the consumer
// stops). d ≤ 0 means the policy's backoff.
func RetryAfter(d time.Duration, err error) error { return &RetryAfterError{Delay: d, Err: err} }

// Outcome is how a delivery was settled, as reported to a [DeliveryHook].
type Outcome = engine.Outcome

// The outcomes of a delivery.
const (
	// OutcomeAcked: the handler (or the unknown-URN hook) succeeded and the message was
	// acknowledged.
	OutcomeAcked = engine.OutcomeAcked
	// OutcomeRetried: the delivery failed and another one was arranged (republish + ack,
	// or negative ack).
	OutcomeRetried = engine.OutcomeRetried
	// OutcomeDeadLettered: a copy was written to the dead-letter topic and the original
	// acknowledged.
	OutcomeDeadLettered = engine.OutcomeDeadLettered
	// OutcomeDropped: acknowledged without being handled or dead-lettered (dead-lettering
	// off).
	OutcomeDropped = engine.OutcomeDropped
	// OutcomeNacked: a settlement write (republish or dead letter) or the ack failed; the
	// message was negatively acknowledged (or left to the broker) and comes back.
	OutcomeNacked = engine.OutcomeNacked
)

// Settlement is the final account of one delivery, given to the function a [DeliveryHook]
// returned: the Outcome, the routing URN ("" for poison and gate rejections), the counted
// Attempt, the dead-letter Reason, and Err, the failure being settled (or the settlement
// failure for OutcomeNacked).
type Settlement = engine.Settlement

// DeliveryHook is called for every received message before the schema-version gate, with
// the consumer's context. It returns the context the delivery runs with (the handler, the
// middleware, the settlement writes and the [Event.Context] of its observer events) and a
// function called exactly once with the delivery's [Settlement] (it may be nil). Tracing
// uses it to open a consumer span per delivery. It is called from the goroutine handling
// the message; a panic in it is recovered and logged, and the delivery goes on with the
// consumer's context.
type DeliveryHook = engine.DeliveryHook

// OutgoingMessage is a message about to be sent by a [Publisher] (or the connector's sink),
// as a [PublishHook] sees it: its Topic, the Envelope being sent (do not modify it), and the
// Pulsar Message, whose Properties already hold the bq-* projection and the caller's headers.
// A hook may add properties (a W3C traceparent, say); a property already present was given
// by the caller and should be left as it is.
type OutgoingMessage = engine.OutgoingMessage

// PublishHook is called for every message a [Publisher] sends, after the message is built
// and before it is handed to the producer, with the context of the Publish call. It returns
// a function called exactly once with the outcome of the send (it may be nil). Tracing uses
// it to open a producer span and inject its context into the properties. A panic in it is
// recovered and logged, and the message is sent without it.
type PublishHook = engine.PublishHook

// Health is the state of a consumer (or another endpoint of this package) for liveness and
// readiness probes: Live is false once it has stopped for good (closed, or its Pulsar
// consumer failed: a liveness probe should restart the process); Ready is true while it
// works (live, and its last receive, acknowledgement and settlement write succeeded);
// Reasons says why it is not ready or not live (the fatal reason first, then each failing
// area with its last error); Warnings are recent events an operator should see that do
// not make it unready (a dead-letter copy truncated to fit the broker).
type Health = engine.Health

// HealthChecker is anything that reports a [Health]: a [Consumer], say.
type HealthChecker interface {
	Health() Health
}
