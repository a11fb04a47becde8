package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Message is a payload with metadata and a settle-once acknowledgement.
// The first Ack or Nack on a message, or on a message
// derived from it with [WithPayload] or [WithMetadataItems], settles it; later
// calls return [ErrAlreadySettled] and run nothing.
type Message[T any] interface {
	// Payload returns the message's payload.
	Payload() T
	// Metadata returns the message's immutable metadata.
	Metadata() Metadata
	// Ack acknowledges the message. It returns the settlement function's result, with
	// ctx.Err() in place of a failure that came after ctx ended, or ErrAlreadySettled. A
	// settlement that succeeds returns nil even when ctx has ended: the message is settled.
	Ack(ctx context.Context) error
	// Nack rejects the message with reason (a nil reason panics).
	Nack(ctx context.Context, reason error, opts ...NackOption) error
}

// AckFunc is a message's acknowledgement function.
type AckFunc func(ctx context.Context) error

// NackFunc is a message's negative-acknowledgement function.
type NackFunc func(ctx context.Context, reason error, o NackOptions) error

// Disposition tells a connector what a nack should do with the message.
type Disposition int

// The dispositions of a nack.
const (
	// Redeliver lets the connector's failure strategy retry the message.
	Redeliver Disposition = iota
	// DeadLetter asks for the dead-letter destination at once (a permanent failure).
	DeadLetter
	// Drop settles the message without redelivery (ack plus a warning).
	Drop
)

// NackOptions are the options of a nack.
type NackOptions struct {
	// Delay: redeliver no sooner than this; 0 means the connector's default.
	Delay time.Duration
	// Disposition: Redeliver (default), DeadLetter or Drop.
	Disposition Disposition
	// Properties: extra properties on a republished or dead-lettered copy.
	Properties map[string]string
}

// NackOption sets a field of NackOptions.
type NackOption func(*NackOptions)

// RedeliverAfter asks for redelivery no sooner than d.
func RedeliverAfter(d time.Duration) NackOption {
	return func(o *NackOptions) { o.Delay, o.Disposition = d, Redeliver }
}

// ToDeadLetter asks for the dead-letter destination at once.
func ToDeadLetter() NackOption { return func(o *NackOptions) { o.Disposition = DeadLetter } }

// DropMessage settles the message without redelivery.
func DropMessage() NackOption { return func(o *NackOptions) { o.Disposition = Drop } }

// WithNackProperties adds properties to a republished or dead-lettered copy.
func WithNackProperties(p map[string]string) NackOption {
	return func(o *NackOptions) {
		if o.Properties == nil {
			o.Properties = make(map[string]string, len(p))
		}
		for k, v := range p {
			o.Properties[k] = v
		}
	}
}

// NackOptionsOf applies opts to a zero NackOptions.
func NackOptionsOf(opts ...NackOption) NackOptions {
	var o NackOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// NackError is an error returned by a user function that carries nack
// options for the runtime (see [NackWith]).
type NackError struct {
	Err     error
	Options []NackOption
}

// Error returns the cause's text.
func (e *NackError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *NackError) Unwrap() error { return e.Err }

// NackWith wraps err so that the runtime nacks the input with opts, e.g.
// return messaging.NackWith(err, messaging.ToDeadLetter()) for a permanent
// failure. A nil err panics.
func NackWith(err error, opts ...NackOption) error {
	if err == nil {
		panic(fmt.Errorf("%w: NackWith error", ErrNilArgument))
	}
	return &NackError{Err: err, Options: opts}
}

// nackOptionsFrom extracts the options of a NackError in err's chain.
func nackOptionsFrom(err error) []NackOption {
	var ne *NackError
	if errors.As(err, &ne) {
		return ne.Options
	}
	return nil
}

// MessageOption configures NewMessage.
type MessageOption func(*messageConfig)

type messageConfig struct {
	ack  AckFunc
	nack NackFunc
	md   Metadata
}

// WithAckFunc sets the acknowledgement function of a new message.
func WithAckFunc(f AckFunc) MessageOption { return func(c *messageConfig) { c.ack = f } }

// WithNackFunc sets the negative-acknowledgement function of a new message.
func WithNackFunc(f NackFunc) MessageOption { return func(c *messageConfig) { c.nack = f } }

// WithMetadata sets the metadata of a new message.
func WithMetadata(md Metadata) MessageOption { return func(c *messageConfig) { c.md = md } }

// settlement is the guard shared by a message and the messages derived from it.
type settlement struct {
	done atomic.Bool
	ack  AckFunc
	nack NackFunc
	via  Settler // when set, it settles instead of ack and nack
}

// Settler settles a message built by NewSettledMessage. Connectors use it to
// attach settlement without a closure per message: one value (typically a
// small struct holding the broker handle) implements both methods.
type Settler interface {
	Ack(ctx context.Context) error
	Nack(ctx context.Context, reason error, o NackOptions) error
}

// NewSettledMessage returns a message of payload with metadata md whose
// first Ack or Nack (or that of a message derived from it) calls s; later
// ones return ErrAlreadySettled. A nil s panics with an error wrapping
// ErrNilArgument.
func NewSettledMessage[T any](payload T, md Metadata, s Settler) Message[T] {
	if isNilValue(s) {
		panic(fmt.Errorf("%w: settler", ErrNilArgument))
	}
	r := &relay[T]{}
	return r.init(payload, md, s)
}

// relay is a message settled through a Settler, allocated in one piece with
// its settlement: the internal wrappers (tracking, in-flight bounds) embed it.
type relay[T any] struct {
	msg message[T]
	set settlement
}

// init makes r a message of payload and md settled by via.
func (r *relay[T]) init(payload T, md Metadata, via Settler) Message[T] {
	r.set.via = via
	r.msg = message[T]{payload: payload, md: md, s: &r.set}
	return &r.msg
}

type message[T any] struct {
	payload T
	md      Metadata
	s       *settlement
}

// NewMessage returns a message of payload. Without WithAckFunc/WithNackFunc,
// settling it runs nothing and returns nil (MP RM Message.of).
//
// The specification names the options WithAck and WithNack; here they are
// WithAckFunc and WithNackFunc because WithAck is the stage option choosing an
// AckStrategy.
func NewMessage[T any](payload T, opts ...MessageOption) Message[T] {
	var c messageConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return &message[T]{payload: payload, md: c.md, s: &settlement{ack: c.ack, nack: c.nack}}
}

// WithPayload returns a message of p with m's metadata and settlement: acking
// or nacking it settles m (the ack chain of processors).
func WithPayload[T, U any](m Message[T], p U) Message[U] {
	if mm, ok := m.(*message[T]); ok {
		return &message[U]{payload: p, md: mm.md, s: mm.s}
	}
	return &foreign[T, U]{payload: p, md: m.Metadata(), src: m}
}

// WithMetadataItems returns a message like m with items added to its
// metadata, sharing m's settlement.
func WithMetadataItems[T any](m Message[T], items ...any) Message[T] {
	md := m.Metadata()
	for _, it := range items {
		md = md.With(it)
	}
	if mm, ok := m.(*message[T]); ok {
		return &message[T]{payload: mm.payload, md: md, s: mm.s}
	}
	return &foreign[T, T]{payload: m.Payload(), md: md, src: m}
}

func (m *message[T]) Payload() T         { return m.payload }
func (m *message[T]) Metadata() Metadata { return m.md }

func (m *message[T]) Ack(ctx context.Context) error {
	if m.s.ack == nil && m.s.nack == nil && m.s.via == nil {
		return nil
	}
	if !m.s.done.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	if m.s.via != nil {
		return settleResult(ctx, m.s.via.Ack(ctx))
	}
	if m.s.ack == nil {
		return ctxErr(ctx)
	}
	return settleResult(ctx, m.s.ack(ctx))
}

func (m *message[T]) Nack(ctx context.Context, reason error, opts ...NackOption) error {
	if reason == nil {
		panic(fmt.Errorf("%w: nack reason", ErrNilArgument))
	}
	if m.s.ack == nil && m.s.nack == nil && m.s.via == nil {
		return nil
	}
	if !m.s.done.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	if m.s.via != nil {
		return settleResult(ctx, m.s.via.Nack(ctx, reason, NackOptionsOf(opts...)))
	}
	if m.s.nack == nil {
		return ctxErr(ctx)
	}
	return settleResult(ctx, m.s.nack(ctx, reason, NackOptionsOf(opts...)))
}

// settleResult prefers ctx.Err() when ctx ended during the settlement.
func settleResult(ctx context.Context, err error) error {
	if ctx.Err() != nil && err != nil {
		return ctxErr(ctx)
	}
	return err
}

// ctxErr returns ctx.Err() wrapped (errors.Is(err, context.Canceled) holds), or nil.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// foreign derives a message from a Message implementation of another package:
// settlement is delegated to the source message.
type foreign[T, U any] struct {
	payload U
	md      Metadata
	src     Message[T]
}

func (m *foreign[T, U]) Payload() U         { return m.payload }
func (m *foreign[T, U]) Metadata() Metadata { return m.md }
func (m *foreign[T, U]) Ack(ctx context.Context) error {
	return m.src.Ack(ctx)
}

func (m *foreign[T, U]) Nack(ctx context.Context, reason error, opts ...NackOption) error {
	return m.src.Nack(ctx, reason, opts...)
}
