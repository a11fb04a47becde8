package pulsar

import (
	"context"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// DeadLetterError is the outcome "dead-letter now": the message is written to its
// dead-letter topic at once, with reason failed, without further retries. Build it with
// [DeadLetter].
type DeadLetterError struct {
	// Err is why no retry can help (a validation failure, say).
	Err error
}

func (e *DeadLetterError) Error() string {
	if e.Err == nil {
		return "pulsar: dead-letter now"
	}
	return "pulsar: dead-letter now: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// RetryAfterError is the outcome "retry after Delay": a failed delivery whose retry waits at
// least Delay. Build it with [RetryAfter].
type RetryAfterError struct {
	// Delay is the least time before the next delivery.
	Delay time.Duration
	// Err is the failure.
	Err error
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("pulsar: retry after %s", e.Delay)
	}
	return fmt.Sprintf("pulsar: retry after %s: %v", e.Delay, e.Err)
}

// Unwrap returns the cause.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Outcome is how a delivery was settled, as reported to a [DeliveryHook].
type Outcome string

// The outcomes of a delivery.
const (
	// OutcomeAcked: the handler (or the unknown-URN hook) succeeded and the message was
	// acknowledged.
	OutcomeAcked Outcome = "acked"
	// OutcomeRetried: the delivery failed and another one was arranged (republish + ack,
	// or negative ack).
	OutcomeRetried Outcome = "retried"
	// OutcomeDeadLettered: a copy was written to the dead-letter topic and the original
	// acknowledged.
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeDropped: acknowledged without being handled or dead-lettered (dead-lettering
	// off).
	OutcomeDropped Outcome = "dropped"
	// OutcomeNacked: a settlement write (republish or dead letter) or the ack failed; the
	// message was negatively acknowledged (or left to the broker) and comes back.
	OutcomeNacked Outcome = "nacked"
)

// Settlement is the final account of one delivery, given to the function a [DeliveryHook]
// returned.
type Settlement struct {
	// Outcome is how the delivery was settled.
	Outcome Outcome
	// URN is the routing URN ("" for poison and gate rejections).
	URN string
	// Attempt is the counted delivery number (1 for the first delivery).
	Attempt int
	// Reason is the dead-letter reason for OutcomeDeadLettered and OutcomeDropped ("" for
	// a gate rejection).
	Reason envelope.Reason
	// Err is the failure being settled (the handler's error, the poison or gate error), or
	// the settlement failure for OutcomeNacked; nil for a clean OutcomeAcked.
	Err error
}

// DeliveryHook is called for every received message before the schema-version gate, with
// the consumer's context. It returns the context the delivery runs with (the handler, the
// middleware, the settlement writes and the [Event.Context] of its observer events) and a
// function called exactly once with the delivery's [Settlement] (it may be nil). Tracing
// uses it to open a consumer span per delivery. It is called from the goroutine handling
// the message; a panic in it is recovered and logged, and the delivery goes on with the
// consumer's context.
type DeliveryHook func(ctx context.Context, msg apulsar.Message) (context.Context, func(Settlement))

// Health is the state of a consumer (or another endpoint of this package) for liveness and
// readiness probes.
type Health struct {
	// Live is false once the endpoint has stopped for good (closed, or its Pulsar consumer
	// failed): a liveness probe should restart the process.
	Live bool
	// Ready is true while the endpoint works: live, connected, and its last receive and
	// settlement writes succeeded.
	Ready bool
	// Reasons says why the endpoint is not ready or not live: the fatal reason first, then
	// each failing area (receive, ack, settlement write) with its last error.
	Reasons []string
	// Warnings are recent events an operator should see that do not make the endpoint
	// unready, newest first (at most 5): a dead-letter copy truncated to fit the broker.
	Warnings []string
}
