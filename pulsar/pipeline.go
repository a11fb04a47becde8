package pulsar

import (
	"context"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
)

// process runs the contract's pipeline on one message: the engine's admission (gate,
// classify, reconcile, route), then the Consumer's dispatch by URN and the engine's
// settlement of the outcome. It never panics and never returns an error: every outcome is a
// settlement, a log line and, for failures, a call of the error hook.
func (c *Consumer) process(ctx context.Context, msg apulsar.Message) {
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	d := c.eng.Admit(ctx, msg)
	if d == nil {
		return // settled at admission (gate rejection, poison)
	}
	h, ok := c.cfg.handlers[d.URN]
	if !ok {
		c.unknownURN(d)
		return
	}
	var start time.Time
	if c.eng.Observing() {
		start = time.Now()
	}
	err := callHandler(h, d)
	var latency time.Duration
	if !start.IsZero() {
		latency = time.Since(start)
	}
	if err != nil || !start.IsZero() {
		c.eng.Handled(d, err, latency) // a success without an observer has nothing to record
	}
	c.eng.Settle(d, err)
	c.eng.Release(d) // reused only when the settlement acknowledged it: nothing else holds it then
}

func callHandler(h HandlerFunc, d *engine.Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: "handler", Value: r}
		}
	}()
	return h(d.Ctx, d.Env, d.Msg)
}

// unknownURN handles a message without a handler: the hook, then ack; without a hook (or
// when it panicked) a failure with reason unknown_urn.
func (c *Consumer) unknownURN(d *engine.Delivery) {
	c.eng.Observe(d, Event{Kind: EventUnknownURN, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted})
	if c.cfg.onUnknown != nil {
		perr := engine.SafeCall("OnUnknownURN hook", func() { c.cfg.onUnknown(d.Env, d.Msg) })
		if perr == nil {
			_ = c.eng.AckHandled(d) // a failed ack is reported by the engine
			return
		}
		c.eng.Report(perr, d.Env, d.Msg)
	}
	err := &UnknownURNError{URN: d.URN}
	c.eng.Logger().Warn("no handler for urn", zap.String("urn", d.URN), zap.Int("attempt", d.Counted),
		zap.String("message_id", d.Env.Meta.ID))
	c.eng.Report(err, d.Env, d.Msg)
	c.eng.Fail(d, envelope.ReasonUnknownURN, err, engine.FailOptions{})
}
