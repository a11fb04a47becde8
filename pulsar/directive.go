package pulsar

import (
	"fmt"
	"time"
)

// DeferError is the outcome "not now, and not a failure": the delivery was not handled,
// through no fault of its own (its message id is being handled elsewhere, say), and comes
// back after Delay without counting toward maxAttempts. Build it with [Defer].
type DeferError struct {
	// Delay is the least time before the next delivery.
	Delay time.Duration
	// Err says why the delivery was deferred.
	Err error
}

func (e *DeferError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("pulsar: deferred for %s", e.Delay)
	}
	return fmt.Sprintf("pulsar: deferred for %s: %v", e.Delay, e.Err)
}

// Unwrap returns the cause.
func (e *DeferError) Unwrap() error { return e.Err }

// Defer returns the handler outcome "deliver again after d, without counting this
// delivery": the message is republished to its (parent) topic with bq-attempts and the
// body's attempts left at the count of earlier deliveries (so the next delivery has the same
// attempt number as this one), then acknowledged; a failed republish is negatively
// acknowledged as for any retry. It is a republish under either retry strategy: a negative
// ack would raise Pulsar's redelivery count, which the contract's reconciliation counts as
// an attempt. The delay is applied as for [RetryAfter] (DeliverAfter on Shared and
// Key_Shared, a wait before the republish on Exclusive and Failover); d ≤ 0 means the
// policy's backoff. Since a deferral spends no attempt, nothing bounds how often a message
// is deferred: defer only what is certain to end (a lease held by a live worker ends when
// that worker settles or dies). The Event hook sees EventFailed and EventRetried as for a
// retry. err may be nil.
func Defer(d time.Duration, err error) error { return &DeferError{Delay: d, Err: err} }

// WarningError is the outcome "acknowledge, with a warning": the delivery succeeded, but
// something an operator should see went wrong on the way (an idempotency store that could
// not record the message as done, say). Build it with [AckWithWarning].
type WarningError struct {
	// Err is the warning.
	Err error
}

func (e *WarningError) Error() string {
	if e.Err == nil {
		return "pulsar: acknowledged with a warning"
	}
	return "pulsar: acknowledged with a warning: " + e.Err.Error()
}

// Unwrap returns the warning.
func (e *WarningError) Unwrap() error { return e.Err }

// AckWithWarning returns the handler outcome "succeeded, acknowledge it, and warn": the
// message is acknowledged as for nil, and err is logged at WARN, reported to the Event hook
// (an EventError with the *WarningError), recorded in [Health].Warnings and carried by the
// settlement (EventAcked with Err set). The Event hook sees EventHandled, not EventFailed.
// err may be nil.
func AckWithWarning(err error) error { return &WarningError{Err: err} }
