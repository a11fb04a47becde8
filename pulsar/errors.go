package pulsar

import (
	"errors"

	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
)

// ErrInvalidOption is wrapped by every error a constructor ([NewPublisher],
// [WrapProducer], [NewConsumer], [WrapConsumer]) returns for an option it refuses.
var ErrInvalidOption = engine.ErrInvalidOption

// ErrClosed is returned by calls on a closed [Publisher] or [Consumer], and by [Consumer.Run]
// when [Consumer.Close] stopped it.
var ErrClosed = engine.ErrClosed

// ErrFull is returned by [Publisher.TryPublishAsync] when [WithMaxPending] sends are
// already in flight.
var ErrFull = errors.New("pulsar: too many pending sends")

// ErrRunning is returned by [Consumer.Run] when the consumer is already running.
var ErrRunning = errors.New("pulsar: consumer already running")

// ErrPoison is the sentinel of a payload that is not an acceptable envelope. The error
// passed to the consumer's error hook for a poison message is a *envelope.PoisonError naming
// the failed rule; it matches ErrPoison (the same value as [envelope.ErrPoison]).
var ErrPoison = engine.ErrPoison

// ErrUnknownURN is matched by the *[UnknownURNError] the consumer reports for a message whose
// URN has no handler (and no OnUnknownURN hook).
var ErrUnknownURN = engine.ErrUnknownURN

// ErrHandler is matched by the *[HandlerError] the consumer reports when a handler failed or
// panicked.
var ErrHandler = engine.ErrHandler

// ErrPanic is matched by the *[PanicError] built from a recovered panic of a handler or hook.
var ErrPanic = engine.ErrPanic

// ErrRepublish is matched by the *[SendError] the consumer reports when a retry could not be
// republished; the message is then negatively acknowledged, never acknowledged.
var ErrRepublish = engine.ErrRepublish

// ErrDeadLetterWrite is matched by the *[SendError] the consumer reports when a dead-letter
// copy could not be written; the message is then negatively acknowledged, never acknowledged.
var ErrDeadLetterWrite = engine.ErrDeadLetterWrite

// ErrExhausted is matched by the *[ExhaustedError] the consumer reports when it acknowledges
// a message that used up its attempts while dead-lettering is off for its queue: the message
// is dropped (and logged at WARN).
var ErrExhausted = engine.ErrExhausted

// ErrSettle is matched by the *[SettleError] the consumer reports when an acknowledgement
// failed.
var ErrSettle = engine.ErrSettle

// ErrReceive is matched by the *[ReceiveError] the consumer reports for a failed receive; a
// transient one is reported and the loop goes on, a fatal one (the Pulsar consumer was
// closed) ends [Consumer.Run].
var ErrReceive = engine.ErrReceive

// UnknownURNError is reported to the error hook for a message whose routing URN has no
// handler. It matches [ErrUnknownURN].
type UnknownURNError = engine.UnknownURNError

// HandlerError is reported to the error hook when a handler returned an error or panicked.
// It matches [ErrHandler] and unwraps to the handler's error (a *[PanicError] for a panic).
type HandlerError = engine.HandlerError

// PanicError is a recovered panic. It matches [ErrPanic], and unwraps to the panic value
// when that value is an error.
type PanicError = engine.PanicError

// SendError is a failed retry republish ([ErrRepublish]) or dead-letter write
// ([ErrDeadLetterWrite]).
type SendError = engine.SendError

// ExhaustedError is reported when a message that used up its attempts is acknowledged
// without a dead-letter copy because dead-lettering is off. It matches [ErrExhausted] and
// unwraps to the last failure.
type ExhaustedError = engine.ExhaustedError

// SettleError is a failed acknowledgement. It matches [ErrSettle] and unwraps to the
// client's error.
type SettleError = engine.SettleError

// ReceiveError is a failed receive. It matches [ErrReceive] and unwraps to the client's
// error.
type ReceiveError = engine.ReceiveError

// ErrTruncated is matched by the *[TruncatedError] reported when a dead-letter copy was too
// large for the broker and a truncated copy was written instead.
var ErrTruncated = engine.ErrTruncated

// TruncatedError reports a dead-letter copy that would have exceeded the broker's message
// size ([WithMaxMessageSize]): a truncated, marked copy (the dead-letter block, the
// original's size and SHA-256, its first bytes) was written in its place, and the original
// acknowledged. Its fields: Topic (the dead-letter topic), FullSize and Limit, OriginalSize.
type TruncatedError = engine.TruncatedError
