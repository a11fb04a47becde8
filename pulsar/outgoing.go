package pulsar

import (
	"strconv"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// build returns the Pulsar message of o (seam.Build): the payload as it is; with an
// envelope, exactly its six bq-* properties plus the non-contract headers; the keys, the
// event time and the delay (with bq-delay) as o says. now is the clock DeliverAt is compared
// with.
func build(o seam.Outgoing, now time.Time) *apulsar.ProducerMessage {
	pm := &apulsar.ProducerMessage{}
	buildInto(pm, make(map[string]string, len(o.Headers)+7), o, now)
	return pm
}

// buildInto is build into a message and a property map the caller provides (and may
// reuse once the client is done with them): pm is overwritten whole, props must be empty
// and becomes pm.Properties.
func buildInto(pm *apulsar.ProducerMessage, props map[string]string, o seam.Outgoing, now time.Time) {
	for k, v := range o.Headers {
		if k == "" || v == "" || (o.Env != nil && binding.IsProperty(k)) || k == PropDelay {
			continue
		}
		props[k] = v
	}
	if o.Env != nil {
		binding.Project(props, o.Env)
	}
	*pm = apulsar.ProducerMessage{
		Payload:     o.Payload,
		Properties:  props,
		Key:         o.Key,
		OrderingKey: o.OrderingKey,
		EventTime:   o.EventTime,
	}
	switch {
	case o.Delay > 0:
		pm.DeliverAfter = o.Delay
		props[PropDelay] = strconv.FormatInt(o.Delay.Milliseconds(), 10)
	case !o.DeliverAt.IsZero():
		if left := o.DeliverAt.Sub(now); left > 0 {
			pm.DeliverAt = o.DeliverAt
			props[PropDelay] = strconv.FormatInt(left.Milliseconds(), 10)
		}
	}
}
