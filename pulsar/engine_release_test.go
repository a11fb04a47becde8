package pulsar

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Release recycles only a delivery whose settlement acknowledged it and was reported; any
// other is left as it is, for whoever may still hold it (a delayed nack's timer).
func TestReleaseRecyclesOnlyAcknowledgedDeliveries(t *testing.T) {
	e := &engine{}
	pending := &Delivery{urn: "urn:x", counted: 2, finished: true}
	e.release(pending)
	assert.Equal(t, "urn:x", pending.urn, "a delivery that was not acknowledged is not touched")

	unfinished := &Delivery{urn: "urn:x", acked: true}
	e.release(unfinished)
	assert.Equal(t, "urn:x", unfinished.urn, "a delivery whose settlement was not reported is not touched")

	called := false
	done := &Delivery{
		urn: "urn:x", acked: true, finished: true,
		finishers: []func(Event){func(Event) { called = true }},
	}
	fins := done.finishers
	e.release(done)
	assert.Empty(t, done.urn, "a released delivery is cleared")
	assert.False(t, done.acked)
	assert.Empty(t, done.finishers)
	assert.Nil(t, fins[0], "the finishers it held are let go")
	assert.False(t, called)
	e.release(nil) // no panic
}
