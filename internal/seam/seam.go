// Package seam is what package pulsar lends the other packages of this module (the
// messaging connector in pulsar/connector, the bq command) without making it part of its
// public API: the types both sides name (Settler, Outgoing) and the functions package
// pulsar sets when it is initialised (Build, PublishHooks, FrontOption, WrapConnectError, Deferral, Warning,
// AddCopyProperties, TxnOf, TransactionsError), and ActiveTraceID, which package bqotel sets.
// Nothing here is for users of the SDK.
package seam

import (
	"context"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Outgoing is what a message to send is built from, by the Publisher and the connector's
// Sink alike ([Build]).
type Outgoing struct {
	// Payload is the encoded body.
	Payload []byte
	// Env is the envelope Payload encodes, for the bq-* projection; nil for a payload that
	// is not an envelope (its Headers are then sent as given).
	Env *envelope.Envelope
	// Headers are extra properties. With an envelope, the contract's keys (bq-job … bq-delay)
	// in Headers are ignored: the projection always wins. bq-delay is never taken from
	// Headers (Delay and DeliverAt set it), and empty keys or values are dropped.
	Headers map[string]string
	// Key and OrderingKey are the message's keys.
	Key, OrderingKey string
	// Delay, when > 0, delays delivery (DeliverAfter); else DeliverAt, when in the future,
	// does (a DeliverAt now or in the past means no delay). A delayed message carries
	// bq-delay, the delay in whole milliseconds; an undelayed one never does.
	Delay     time.Duration
	DeliverAt time.Time
	// EventTime is the message's event time (zero: none).
	EventTime time.Time
}

// Build returns the Pulsar message of o: the payload as it is; with an envelope, exactly
// its six bq-* properties plus the non-contract headers; the keys, the event time and the
// delay (with bq-delay) as o says. now is the clock DeliverAt is compared with. Set by
// package pulsar: the one outgoing-message builder behind the Publisher and the Sink.
var Build func(o Outgoing, now time.Time) *apulsar.ProducerMessage

// PublishFunc runs the Publish hooks on a message about to be sent to topic and returns
// the function that reports the send's outcome to them (nil when there is nothing to
// report).
type PublishFunc func(ctx context.Context, topic string, env *envelope.Envelope, pm *apulsar.ProducerMessage) func(apulsar.MessageID, error)

// PublishHooks returns the PublishFunc of hooks, a []pulsar.Hooks (nil when none of them
// has a Publish function); logger receives the hooks' panics. Set by package pulsar, whose
// hook set is the one place hooks are called.
var PublishHooks func(hooks any, logger *zap.Logger) PublishFunc

// Front is what a front of the engine other than the Consumer's own loops changes about
// a Consumer's admission and settlement (the connector's Source).
type Front struct {
	// Settler, when set, receives the Pulsar consumer (subscribed by NewConsumer, or the one
	// given to WrapConsumer) and returns the Settler every settlement then goes through:
	// the Source acknowledges cumulatively, or applies its failure strategy to a nack.
	Settler func(pc apulsar.Consumer) Settler
	// NoGate turns off the schema-version gate at admission (payloads that are not the
	// contract's).
	NoGate bool
	// PoisonDelivered leaves a payload that is not an acceptable envelope to the front:
	// Next returns it with a nil Envelope, and settling it with an error matching
	// envelope.ErrPoison takes the poison path. Run refuses a consumer with it.
	PoisonDelivered bool
}

// FrontOption returns the pulsar.ConsumerOption (as any) that applies f. Set by package
// pulsar.
var FrontOption func(f Front) any

// Deferral returns the delay of the pulsar.Defer outcome in err's chain, and false when err
// carries none: for the tests of the packages that defer a delivery (idempotency, the
// connector), since the outcome's type is unexported. Set by package pulsar.
var Deferral func(err error) (delay time.Duration, ok bool)

// Warning reports whether err's chain carries a pulsar.AckWithWarning outcome (the delivery
// succeeded and is acknowledged), for idempotency's middleware, which remembers such a
// delivery, and its tests. Set by package pulsar.
var Warning func(err error) bool

// WrapConnectError returns err as a *pulsar.ConnectError for serviceURL when err says the
// broker could not be reached, and err unchanged otherwise (nil stays nil, a ConnectError is
// returned as is, and an answer of the broker such as "topic not found" is not a
// connection failure). Call it on an error of the client's CreateProducer, Subscribe or
// CreateReader. Set by package pulsar.
var WrapConnectError func(serviceURL string, err error) error

// AddCopyProperties adds p to the properties of the copy that a later settlement of d (a
// *pulsar.Delivery) republishes or dead-letters, all but the binding's own bq-* keys, which
// the settlement alone writes; it must be called before the settlement, from the goroutine
// that settles. Set by package pulsar.
var AddCopyProperties func(d any, p map[string]string)

// ActiveTraceID returns the trace_id that continues the active trace of ctx, or "" when
// ctx carries none; the Publisher uses it for an envelope without WithTraceID. Set by
// package bqotel when a program imports it (package pulsar has no OpenTelemetry
// dependency); nil otherwise.
var ActiveTraceID func(ctx context.Context) string

// TransactionsError wraps an error of opening transactions (creating a transactional client
// included) with pulsar.ErrTransactions and names the setting to change. Set by package
// pulsar.
var TransactionsError func(err error) error

// TxnOf returns the Pulsar transaction a delivery's context carries (a consumer with
// WithTransactions puts its delivery's in it), or nil. Set by package pulsar.
var TxnOf func(ctx context.Context) apulsar.Transaction

// NackBackoff adapts a retry.Backoff to apulsar.NackBackoffPolicy, for
// apulsar.ConsumerOptions.NackBackoffPolicy: the n-th redelivery (the 0-based redelivery
// count) waits the backoff's delay of retry n+1. A consumer whose retry strategy is
// retry.Nack uses it with its policy's backoff unless the consumer options set a policy.
func NackBackoff(b retry.Backoff) apulsar.NackBackoffPolicy { return nackBackoff{b: b} }

type nackBackoff struct{ b retry.Backoff }

func (n nackBackoff) Next(redeliveryCount uint32) time.Duration {
	return n.b.Delay(int(min(redeliveryCount, 1<<20)) + 1)
}
