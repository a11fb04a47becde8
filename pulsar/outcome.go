package pulsar

import (
	"fmt"
	"time"
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

// DeadLetter returns the handler outcome that dead-letters the message on this delivery,
// whatever attempts are left: for a failure no retry can fix, such as a payload that fails
// validation. With dead-lettering off the message is acknowledged, logged at WARN and
// reported as an [ExhaustedError]. err may be nil.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// RetryAfter returns the handler outcome "failed, retry after d": the delivery counts as
// failed (so maxAttempts still applies: an exhausted message is dead-lettered), and its
// retry is delayed by d instead of the policy's backoff. With retry.Republish on Shared and
// Key_Shared subscriptions the copy is sent with DeliverAfter; on Exclusive and Failover the
// worker waits d before republishing; with retry.Nack the negative acknowledgement is sent
// after d (the message stays unacknowledged meanwhile, and is nacked at once if the consumer
// stops). d ≤ 0 means the policy's backoff.
func RetryAfter(d time.Duration, err error) error { return &RetryAfterError{Delay: d, Err: err} }
