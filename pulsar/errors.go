package pulsar

import (
	"errors"
	"fmt"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// ErrClosed is returned by calls on a closed [Publisher] or [Consumer], and by [Consumer.Run]
// when [Consumer.Close] stopped it.
var ErrClosed = errors.New("pulsar: closed")

// ErrInvalidOption is wrapped by every error a constructor ([NewPublisher],
// [WrapProducer], [NewConsumer], [WrapConsumer]) returns for an option it refuses.
var ErrInvalidOption = errors.New("pulsar: invalid option")

// ErrFull is returned by [Publisher.TryPublishAsync] when [WithMaxPending] sends are
// already in flight.
var ErrFull = errors.New("pulsar: too many pending sends")

// ErrRunning is returned by [Consumer.Run] when the consumer is already running.
var ErrRunning = errors.New("pulsar: consumer already running")

// ErrUnknownURN is matched by the *[UnknownURNError] the consumer reports for a message whose
// URN has no handler.
var ErrUnknownURN = errors.New("pulsar: no handler for urn")

// ErrPanic is matched by the *[PanicError] built from a recovered panic of a handler or hook.
var ErrPanic = errors.New("pulsar: panic")

// ErrRepublish is matched by the *[SendError] the consumer reports when a retry could not be
// republished; the message is then negatively acknowledged, never acknowledged.
var ErrRepublish = errors.New("pulsar: retry republish failed")

// ErrDeadLetterWrite is matched by the *[SendError] the consumer reports when a dead-letter
// copy could not be written; the message is then negatively acknowledged, never acknowledged.
var ErrDeadLetterWrite = errors.New("pulsar: dead-letter write failed")

// ErrExhausted is matched by the *[ExhaustedError] the consumer reports when it acknowledges
// a message that used up its attempts while dead-lettering is off for its queue: the message
// is dropped (and logged at WARN).
var ErrExhausted = errors.New("pulsar: attempts exhausted, message dropped")

// ErrSettle is matched by the *[SettleError] the consumer reports when an acknowledgement
// failed.
var ErrSettle = errors.New("pulsar: settlement failed")

// ErrReceive is matched by the *[ReceiveError] the consumer reports for a failed receive; a
// transient one is reported and the loop goes on, a fatal one (the Pulsar consumer was
// closed) ends [Consumer.Run].
var ErrReceive = errors.New("pulsar: receive failed")

// UnknownURNError is the Err of the [EventUnknownURN] of a message whose routing URN has no
// handler. It matches [ErrUnknownURN].
type UnknownURNError struct {
	// URN is the routing URN (the bq-job property, else the body's URN).
	URN string
}

// Error implements error.
func (e *UnknownURNError) Error() string { return fmt.Sprintf("pulsar: no handler for urn %q", e.URN) }

// Unwrap returns [ErrUnknownURN], which the error matches.
func (*UnknownURNError) Unwrap() error { return ErrUnknownURN }

// PanicError is a recovered panic. It matches [ErrPanic], and unwraps to the panic value
// when that value is an error.
type PanicError struct {
	// Where says what panicked ("handler", "event hook", …).
	Where string
	// Value is the value passed to panic.
	Value any
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("pulsar: %s panicked: %v", e.Where, e.Value) }

// Unwrap returns [ErrPanic] and, when the panic value is an error, that error, so that the
// error matches both.
func (e *PanicError) Unwrap() []error {
	err, _ := e.Value.(error)
	return matching(ErrPanic, err)
}

// SendError is a failed retry republish ([ErrRepublish]) or dead-letter write
// ([ErrDeadLetterWrite]).
type SendError struct {
	// Op is ErrRepublish or ErrDeadLetterWrite.
	Op error
	// Topic is the topic the message was sent to.
	Topic string
	// Err is the send's error.
	Err error
}

// Error implements error.
func (e *SendError) Error() string { return fmt.Sprintf("%v to %q: %v", e.Op, e.Topic, e.Err) }

// Unwrap returns the operation sentinel and the send's error.
func (e *SendError) Unwrap() []error { return []error{e.Op, e.Err} }

// ExhaustedError is reported when a message that used up its attempts is acknowledged
// without a dead-letter copy because dead-lettering is off. It matches [ErrExhausted] and
// unwraps to the last failure.
type ExhaustedError struct {
	// Reason is why the message failed (failed, unknown_urn or poison).
	Reason envelope.Reason
	// Attempts is the counted number of deliveries.
	Attempts int
	// Err is the last failure.
	Err error
}

// Error implements error.
func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("pulsar: attempts exhausted after %d deliveries (%s), message dropped: %v", e.Attempts, e.Reason, e.Err)
}

// Unwrap returns [ErrExhausted] and the last failure, so that the error matches both.
func (e *ExhaustedError) Unwrap() []error { return matching(ErrExhausted, e.Err) }

// SettleError is a failed acknowledgement. It matches [ErrSettle] and unwraps to the
// client's error.
type SettleError struct {
	// Err is the client's error.
	Err error
}

// Error implements error.
func (e *SettleError) Error() string { return fmt.Sprintf("pulsar: ack failed: %v", e.Err) }

// Unwrap returns [ErrSettle] and the client's error, so that the error matches both.
func (e *SettleError) Unwrap() []error { return matching(ErrSettle, e.Err) }

// ReceiveError is a failed receive. It matches [ErrReceive] and unwraps to the client's
// error.
type ReceiveError struct {
	// Err is the client's error.
	Err error
}

// Error implements error.
func (e *ReceiveError) Error() string { return fmt.Sprintf("pulsar: receive failed: %v", e.Err) }

// Unwrap returns [ErrReceive] and the client's error, so that the error matches both.
func (e *ReceiveError) Unwrap() []error { return matching(ErrReceive, e.Err) }

// matching is what the Unwrap of a typed error returns: its sentinel, which errors.Is then
// matches, and its cause when there is one, which errors.Is and errors.As reach.
func matching(sentinel, cause error) []error {
	if cause == nil {
		return []error{sentinel}
	}
	return []error{sentinel, cause}
}

// joinErrors is errors.Join for two non-nil errors, kept in one place so that every
// "failure plus failed settlement" report has the same shape: the failure first.
func joinErrors(failure, settle error) error { return errors.Join(failure, settle) }

// ErrTruncated is matched by the error that an [EventTruncated] carries: a dead-letter copy
// would have exceeded the broker's message size ([WithMaxMessageSize]), and a truncated,
// marked copy (the dead-letter block, the original's size and SHA-256, and its first bytes)
// was written in its place. The error's text gives the dead-letter topic, the size of the
// copy that did not fit, the limit, and the original payload's size.
var ErrTruncated = errors.New("pulsar: dead-letter copy truncated")

// truncatedError is the error of an EventTruncated; it matches ErrTruncated.
type truncatedError struct {
	topic                   string // the dead-letter topic
	fullSize, limit, origin int    // the copy that did not fit, the bound, the received payload
}

func (e *truncatedError) Error() string {
	return fmt.Sprintf("pulsar: dead-letter copy for %q truncated: %d bytes would exceed the limit of %d (original payload %d bytes)",
		e.topic, e.fullSize, e.limit, e.origin)
}

// Unwrap returns ErrTruncated, which the error matches.
func (*truncatedError) Unwrap() error { return ErrTruncated }
