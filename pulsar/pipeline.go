package pulsar

import (
	"context"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// process runs the contract's pipeline on one message: the engine's admission (gate,
// classify, reconcile, route), then the Consumer's dispatch by URN and the engine's
// settlement of the outcome. It never panics and never returns an error: every outcome is a
// settlement, a log line and, for failures, an event. ctx must carry the consumer's
// ConsumerInfo (Run derives it once, with withConsumerInfo, rather than admission per
// message). slot is the calling goroutine's (nil for none): the delivery comes from it and
// goes back to it once acknowledged.
func (c *Consumer) process(ctx context.Context, msg apulsar.Message, slot *deliverySlot) {
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	d := c.eng.admit(ctx, msg, nil, slot)
	if d == nil {
		return // settled at admission (gate rejection, poison)
	}
	h, ok := c.cfg.handlers[d.urn]
	if !ok {
		c.unknownURN(d)
		return
	}
	c.eng.settle(d, c.handle(h, d))
	slot.keep(d) // reused only when the settlement acknowledged it: nothing else holds it then
}

// handle calls h on d and records its result (the event, timed when someone observes it,
// and a failure's log line).
func (c *Consumer) handle(h HandlerFunc, d *Delivery) error {
	var start time.Time
	if c.eng.observing() {
		start = time.Now()
	}
	err := callHandler(h, d)
	var latency time.Duration
	if !start.IsZero() {
		latency = time.Since(start)
	}
	if err != nil || !start.IsZero() {
		c.eng.handled(d, err, latency) // a success nobody observes has nothing to record
	}
	return err
}

func callHandler(h HandlerFunc, d *Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: "handler", Value: r}
		}
	}()
	return h(d.ctx, d.env, d.msg)
}

// unknownURN handles a message without a handler: [HandleUnknown]'s handler, then ack;
// without one (or when it failed) a failure with reason unknown_urn.
func (c *Consumer) unknownURN(d *Delivery) {
	err := &UnknownURNError{URN: d.urn}
	c.eng.observe(d, Event{Kind: EventUnknownURN, Err: err})
	if c.cfg.unknown != nil {
		if herr := c.handle(c.cfg.unknown, d); herr == nil {
			_ = c.eng.acknowledge(d) // a failed ack is reported by the engine
			return
		}
	}
	c.eng.logger().Warn("no handler for urn", zap.String("urn", d.urn), zap.Int("attempt", d.counted),
		zap.String("message_id", d.env.Meta.ID))
	c.eng.fail(d, envelope.ReasonUnknownURN, err, failOptions{})
}
