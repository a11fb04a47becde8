package pulsar

import (
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

func TestBuildProjectsTheEnvelopeAndTheContractWins(t *testing.T) {
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"id": 1}, envelope.WithQueue("orders"))
	require.NoError(t, err)
	pm := build(seam.Outgoing{
		Payload: []byte("x"), Env: env,
		Headers: map[string]string{"traceparent": "tp", PropJob: "urn:evil", PropDelay: "5", "": "x", "empty": ""},
		Key:     "k", OrderingKey: "ok",
	}, time.Now())
	assert.Equal(t, map[string]string{
		"traceparent": "tp", PropJob: "urn:babel:orders:created", PropTraceID: env.TraceID,
		PropMessageID: env.Meta.ID, PropSchemaVersion: "1", PropSourceLang: "go", PropAttempts: "0",
	}, pm.Properties)
	assert.Equal(t, "k", pm.Key)
	assert.Equal(t, "ok", pm.OrderingKey)
	assert.Zero(t, pm.DeliverAfter)
	assert.True(t, pm.DeliverAt.IsZero())
}

func TestBuildDelays(t *testing.T) {
	now := time.Unix(1000, 0)
	pm := build(seam.Outgoing{Payload: []byte("x"), Delay: 1500 * time.Millisecond}, now)
	assert.Equal(t, 1500*time.Millisecond, pm.DeliverAfter)
	assert.Equal(t, "1500", pm.Properties[PropDelay])

	pm = build(seam.Outgoing{Payload: []byte("x"), DeliverAt: now.Add(2 * time.Second)}, now)
	assert.Equal(t, now.Add(2*time.Second), pm.DeliverAt)
	assert.Equal(t, "2000", pm.Properties[PropDelay])

	// A DeliverAt in the past (or now) is no delay: no DeliverAt, no bq-delay.
	for _, at := range []time.Time{now, now.Add(-time.Hour)} {
		pm = build(seam.Outgoing{Payload: []byte("x"), DeliverAt: at, Headers: map[string]string{PropDelay: "0"}}, now)
		assert.True(t, pm.DeliverAt.IsZero())
		assert.NotContains(t, pm.Properties, PropDelay)
	}
}

func TestBuildWithoutEnvelopeKeepsHeaders(t *testing.T) {
	pm := build(seam.Outgoing{Payload: []byte("raw"), Headers: map[string]string{PropJob: "urn:x", "a": "b"}}, time.Now())
	assert.Equal(t, map[string]string{PropJob: "urn:x", "a": "b"}, pm.Properties)
}

func TestBuildIntoReusesWithoutStaleFields(t *testing.T) {
	env, err := envelope.Make("urn:babel:orders:created", nil)
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	var pm apulsar.ProducerMessage
	props := map[string]string{}
	buildInto(&pm, props, seam.Outgoing{
		Payload: []byte("a"), Env: env, Key: "k", Delay: time.Second,
		Headers: map[string]string{"h": "v"}, EventTime: now,
	}, now)
	assert.Equal(t, time.Second, pm.DeliverAfter)
	assert.Equal(t, "1000", pm.Properties[PropDelay])
	assert.Equal(t, now, pm.EventTime)

	clear(props)
	buildInto(&pm, props, seam.Outgoing{Payload: []byte("b"), Env: env}, now)
	assert.Equal(t, []byte("b"), pm.Payload)
	assert.Zero(t, pm.DeliverAfter)
	assert.Empty(t, pm.Key)
	assert.True(t, pm.EventTime.IsZero())
	assert.Equal(t, ProjectProperties(env), pm.Properties, "no header and no bq-delay left from the first message")
}
