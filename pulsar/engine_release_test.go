package pulsar

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A slot keeps only a delivery whose settlement acknowledged it and was reported; any other
// is left as it is, for whoever may still hold it (a delayed nack's timer), and the slot
// hands out a new one.
func TestDeliverySlotKeepsOnlyAcknowledgedDeliveries(t *testing.T) {
	var slot deliverySlot
	pending := &Delivery{urn: "urn:x", counted: 2, finished: true}
	slot.keep(pending)
	assert.Equal(t, "urn:x", pending.urn, "a delivery that was not acknowledged is not touched")
	assert.Nil(t, slot.spare, "nor kept")

	unfinished := &Delivery{urn: "urn:x", acked: true}
	slot.keep(unfinished)
	assert.Equal(t, "urn:x", unfinished.urn, "a delivery whose settlement was not reported is not touched")
	assert.Nil(t, slot.spare, "nor kept")
	fresh := slot.take()
	assert.NotSame(t, pending, fresh, "an empty slot hands out a new delivery")
	assert.NotSame(t, unfinished, fresh)

	called := false
	done := &Delivery{
		urn: "urn:x", acked: true, finished: true,
		finishers: []func(Event){func(Event) { called = true }},
	}
	fins := done.finishers
	slot.keep(done)
	assert.Empty(t, done.urn, "a kept delivery is cleared")
	assert.False(t, done.acked)
	assert.Empty(t, done.finishers)
	assert.Nil(t, fins[0], "the finishers it held are let go")
	assert.False(t, called)
	assert.Same(t, done, slot.take(), "the kept delivery is the next one taken")
	assert.Nil(t, slot.spare, "and only once")
	slot.keep(nil) // no panic

	var none *deliverySlot
	assert.NotNil(t, none.take(), "a nil slot hands out a new delivery")
	none.keep(done) // no panic, nothing kept
}
