package pulsar

import (
	"errors"
	"fmt"
	"time"
)

// directive is a handler outcome that is not a failure: a deferral ([Defer]) or a success
// with a warning ([AckWithWarning]). Handlers build it only through those functions; the
// engine recognises it at settlement.
type directive struct {
	warn  bool          // acknowledge and warn; else defer
	delay time.Duration // a deferral's least time before the next delivery
	err   error         // why the delivery was deferred, or the warning; may be nil
}

func (d *directive) Error() string {
	what := "acknowledged with a warning"
	if !d.warn {
		what = fmt.Sprintf("deferred for %s", d.delay)
	}
	if d.err == nil {
		return "pulsar: " + what
	}
	return "pulsar: " + what + ": " + d.err.Error()
}

// Unwrap returns the cause, or the warning.
func (d *directive) Unwrap() error { return d.err }

// directiveOf returns the directive in err's chain, and whether it is a warning.
func directiveOf(err error) (*directive, bool) {
	var d *directive
	if !errors.As(err, &d) {
		return nil, false
	}
	return d, d.warn
}

// deferralOf returns the delay of the deferral in err's chain (seam.Deferral).
func deferralOf(err error) (time.Duration, bool) {
	d, warn := directiveOf(err)
	if d == nil || warn {
		return 0, false
	}
	return d.delay, true
}

// Defer returns the handler outcome "deliver again after d, without counting this
// delivery": the delivery was not handled, through no fault of its own (its message id is
// being handled elsewhere, say). The message is republished to its (parent) topic with
// bq-attempts and the body's attempts left at the count of earlier deliveries (so the next
// delivery has the same attempt number as this one), then acknowledged; a failed republish
// is negatively acknowledged as for any retry. It is a republish under either retry
// strategy: a negative ack would raise Pulsar's redelivery count, which the contract's
// reconciliation counts as an attempt. The delay is applied as for [RetryAfter]
// (DeliverAfter on Shared and Key_Shared, a wait before the republish on Exclusive and
// Failover); d ≤ 0 means the policy's backoff. Since a deferral spends no attempt, nothing
// bounds how often a message is deferred: defer only what is certain to end (a lease held by
// a live worker ends when that worker settles or dies). The Event hook sees EventFailed and
// EventRetried as for a retry. err may be nil; the outcome unwraps to it.
func Defer(d time.Duration, err error) error { return &directive{delay: d, err: err} }

// AckWithWarning returns the handler outcome "succeeded, acknowledge it, and warn": the
// delivery succeeded, but something an operator should see went wrong on the way (an
// idempotency store that could not record the message as done, say). The message is
// acknowledged as for nil, and the outcome (which unwraps to err) is logged at WARN,
// reported to the Event hook in an EventError, recorded in [Health].Warnings and carried by
// the settlement (EventAcked with Err set). The Event hook sees EventHandled, not
// EventFailed. err may be nil.
func AckWithWarning(err error) error { return &directive{warn: true, err: err} }
