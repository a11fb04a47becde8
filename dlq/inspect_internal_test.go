package dlq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// classified tells the kinds apart by the copy, not by its reason alone: an envelope
// dead-lettered with reason poison (a handler's error that matched envelope.ErrPoison) is an
// annotated copy, which a redrive moves; only the {"raw":…} copy of a body that was not an
// envelope is a poison copy, which it leaves in place.
func TestClassifiedTellsAPoisonCopyFromAnEnvelopeDeadLetteredAsPoison(t *testing.T) {
	t.Parallel()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"n": 1})
	require.NoError(t, err)
	annotated, err := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonPoison}).Encode()
	require.NoError(t, err)
	raw, err := envelope.PoisonCopy([]byte("{"), envelope.DeadLetterInfo{})
	require.NoError(t, err)

	m := classified(Message{Payload: annotated})
	assert.Equal(t, KindAnnotated, m.Kind)
	assert.Equal(t, envelope.ReasonPoison, m.Reason)
	assert.Equal(t, "urn:babel:orders:created", m.RoutingURN)

	m = classified(Message{Payload: raw})
	assert.Equal(t, KindPoison, m.Kind)
	assert.Equal(t, envelope.ReasonPoison, m.Reason)
	assert.Empty(t, m.RoutingURN)

	m = classified(Message{Payload: []byte(`{"job":"urn:x"}`)})
	assert.Equal(t, KindRaw, m.Kind, "no dead_letter block")
}
