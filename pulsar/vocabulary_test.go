package pulsar_test

import (
	"errors"
	"math"
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

// Every typed error matches its sentinel and unwraps to its cause, as its doc says.
func TestErrorVocabulary(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	cases := []struct {
		err      error
		sentinel error
	}{
		{&bqpulsar.HandlerError{URN: "urn:x", Attempt: 1, Err: cause}, bqpulsar.ErrHandler},
		{&bqpulsar.ReceiveError{Err: cause}, bqpulsar.ErrReceive},
		{&bqpulsar.ExhaustedError{Reason: envelope.ReasonFailed, Attempts: 3, Err: cause}, bqpulsar.ErrExhausted},
		{&bqpulsar.SettleError{Err: cause}, bqpulsar.ErrSettle},
		{&bqpulsar.SendError{Op: bqpulsar.ErrRepublish, Topic: "t", Err: cause}, bqpulsar.ErrRepublish},
	}
	for _, c := range cases {
		require.ErrorIs(t, c.err, c.sentinel, "%T", c.err)
		require.ErrorIs(t, c.err, cause, "%T", c.err)
	}
	require.ErrorIs(t, &bqpulsar.UnknownURNError{URN: "urn:x"}, bqpulsar.ErrUnknownURN)
}

// The outcomes a delivery hook is told are named as the contract's reports name them.
func TestOutcomeNames(t *testing.T) {
	t.Parallel()
	for want, o := range map[string]bqpulsar.Outcome{
		"acked": bqpulsar.OutcomeAcked, "retried": bqpulsar.OutcomeRetried, "dead_lettered": bqpulsar.OutcomeDeadLettered,
		"dropped": bqpulsar.OutcomeDropped, "nacked": bqpulsar.OutcomeNacked,
	} {
		assert.Equal(t, want, string(o))
	}
	var hook bqpulsar.UnknownURNHook = func(*envelope.Envelope, apulsar.Message) {}
	assert.NotNil(t, bqpulsar.OnUnknownURN(hook))
}
