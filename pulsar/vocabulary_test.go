package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// The documented defaults and bounds are what the option docs say they are.
func TestDocumentedDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 10*time.Second, bqpulsar.DefaultCloseTimeout)
	assert.Equal(t, 10*time.Second, bqpulsar.DefaultConnectTimeout)
	assert.Equal(t, 4, bqpulsar.DefaultInflightPerWorker)
	assert.Equal(t, 1000, bqpulsar.DefaultMaxPending)
	assert.Equal(t, math.MaxInt32, bqpulsar.MaxAttemptsValue)
	_, ok := bqpulsar.ParseAttempts("2147483648")
	assert.False(t, ok, "above MaxAttemptsValue")
}

// The property names are the binding's, as their doc comments spell them.
func TestPropertyNames(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"bq-job", "bq-trace-id", "bq-message-id", "bq-schema-version", "bq-source-lang", "bq-attempts", "bq-delay"},
		[]string{
			bqpulsar.PropJob, bqpulsar.PropTraceID, bqpulsar.PropMessageID, bqpulsar.PropSchemaVersion,
			bqpulsar.PropSourceLang, bqpulsar.PropAttempts, bqpulsar.PropDelay,
		})
}

// Every typed error matches its sentinel and unwraps to its cause, as its doc says, and
// errors.As finds it through a wrap and a join.
func TestErrorVocabulary(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	cases := []struct {
		err      error
		sentinel error
		hasCause bool
	}{
		{&bqpulsar.ReceiveError{Err: cause}, bqpulsar.ErrReceive, true},
		{&bqpulsar.ExhaustedError{Reason: envelope.ReasonFailed, Attempts: 3, Err: cause}, bqpulsar.ErrExhausted, true},
		{&bqpulsar.SettleError{Err: cause}, bqpulsar.ErrSettle, true},
		{&bqpulsar.SendError{Op: bqpulsar.ErrRepublish, Topic: "t", Err: cause}, bqpulsar.ErrRepublish, true},
		{&bqpulsar.PanicError{Where: "handler", Value: cause}, bqpulsar.ErrPanic, true},
		{&bqpulsar.ConnectError{URL: "pulsar://x:1", Cause: cause}, bqpulsar.ErrConnect, true},
		{&bqpulsar.UnreachableError{For: time.Second, Err: cause}, bqpulsar.ErrUnreachable, true},
		{&bqpulsar.UnknownURNError{URN: "urn:x"}, bqpulsar.ErrUnknownURN, false},
		{&bqpulsar.PanicError{Where: "handler", Value: "not an error"}, bqpulsar.ErrPanic, false},
		{&bqpulsar.CloseTimeoutError{Timeout: time.Second, Pending: "x"}, bqpulsar.ErrCloseTimeout, false},
		{&bqpulsar.SchemaVersionError{Value: "2"}, bqpulsar.ErrSchemaVersion, false},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("outer: %w", errors.Join(errors.New("other"), c.err))
		for _, err := range []error{c.err, wrapped} {
			require.ErrorIs(t, err, c.sentinel, "%T", c.err)
			if c.hasCause {
				require.ErrorIs(t, err, cause, "%T", c.err)
			} else {
				require.NotErrorIs(t, err, cause, "%T", c.err)
			}
			target := reflect.New(reflect.TypeOf(c.err))
			require.ErrorAs(t, err, target.Interface(), "errors.As %T", c.err)
			require.Same(t, c.err, target.Elem().Interface(), "errors.As %T", c.err)
		}
		for _, other := range []error{bqpulsar.ErrPanic, bqpulsar.ErrSettle, bqpulsar.ErrReceive, bqpulsar.ErrUnknownURN, bqpulsar.ErrTruncated} {
			if !errors.Is(other, c.sentinel) {
				require.NotErrorIs(t, c.err, other, "%T", c.err)
			}
		}
	}
}

// The settlements a delivery hook is told are named as the contract's reports name
// outcomes, and every kind has a name.
func TestOutcomeNames(t *testing.T) {
	t.Parallel()
	for want, k := range map[string]bqpulsar.EventKind{
		"acked": bqpulsar.EventAcked, "retried": bqpulsar.EventRetried, "dead_lettered": bqpulsar.EventDeadLettered,
		"dropped": bqpulsar.EventDropped, "nacked": bqpulsar.EventNacked,
		"received": bqpulsar.EventReceived, "handled": bqpulsar.EventHandled, "failed": bqpulsar.EventFailed,
		"poison": bqpulsar.EventPoison, "gate_rejected": bqpulsar.EventGateRejected, "unknown_urn": bqpulsar.EventUnknownURN,
		"truncated": bqpulsar.EventTruncated, "routing_mismatch": bqpulsar.EventRoutingMismatch, "error": bqpulsar.EventError,
	} {
		assert.Equal(t, want, k.String())
	}
	assert.Equal(t, "unknown", bqpulsar.EventKind(0).String())
	assert.Equal(t, "unknown", bqpulsar.EventKind(99).String())
	assert.NotNil(t, bqpulsar.HandleUnknown(func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }))
}
