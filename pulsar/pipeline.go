package pulsar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// delivery is one received message on its way through the pipeline.
type delivery struct {
	msg     apulsar.Message
	props   map[string]string
	env     *envelope.Envelope // nil for poison and gate rejections
	urn     string             // routing URN
	counted int                // this delivery's number

	// Set by the reactive Source (zero for the Consumer's own pipeline):
	delay      time.Duration     // a retry delay overriding the policy's backoff (0: the policy's)
	extraProps map[string]string // added to a republished or dead-lettered copy
	acked      bool              // the message was acknowledged by its settlement
}

// process runs the pipeline of CONTRACT.md §2.3 on one message: gate, classify,
// reconcile, route, dispatch, settle. It never panics and never returns an error: every
// outcome is a settlement, a log line and, for failures, a call of the error hook.
func (c *Consumer) process(ctx context.Context, msg apulsar.Message) {
	d := &delivery{msg: msg, props: msg.Properties()}
	c.observe(Event{Kind: EventReceived, Topic: msg.Topic()})

	// 1. Schema-version gate, on the property, before the payload is looked at.
	if v, ok := d.props[PropSchemaVersion]; ok {
		if err := GateVerdict(v, true); err != nil {
			c.gateReject(ctx, d, err)
			return
		}
	}
	// 2. Classify.
	attemptsProp, hasAttempts := d.props[PropAttempts]
	env, perr := envelope.Classify(msg.Payload())
	if perr != nil {
		_, d.counted = Reconcile(attemptsProp, hasAttempts, 0, msg.RedeliveryCount())
		c.poison(ctx, d, perr)
		return
	}
	// 3. Reconcile attempts.
	reconciled, counted := Reconcile(attemptsProp, hasAttempts, env.Attempts, msg.RedeliveryCount())
	if env.Attempts != reconciled {
		env = env.WithAttempts(reconciled)
	}
	d.env, d.counted = env, counted
	// 4. Route: a usable bq-job property wins over the body.
	bodyURN := env.URN()
	d.urn = bodyURN
	if pj, ok := d.props[PropJob]; ok && !envelope.IsBlank(pj) {
		d.urn = pj
		if pj != bodyURN {
			c.mismatch(pj, bodyURN, d)
		}
	}
	h, ok := c.cfg.handlers[d.urn]
	if !ok {
		c.unknownURN(ctx, d)
		return
	}
	// 5. Dispatch.
	start := time.Now()
	err := callHandler(ctx, h, d)
	latency := time.Since(start)
	if err == nil {
		c.observe(Event{Kind: EventHandled, Topic: msg.Topic(), URN: d.urn, Attempt: d.counted, Latency: latency})
		c.ack(d)
		return
	}
	c.observe(Event{Kind: EventFailed, Topic: msg.Topic(), URN: d.urn, Attempt: d.counted, Latency: latency, Err: err})
	c.cfg.logger.Warn("handler failed", zap.String("urn", d.urn), zap.Int("attempt", d.counted),
		zap.String("message_id", env.Meta.ID), zap.Error(err))
	c.report(&HandlerError{URN: d.urn, Attempt: d.counted, Err: err}, env, msg)
	// 6. Settle the failure.
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		c.exhaust(ctx, d, envelope.ReasonFailed, err)
		return
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.Delay > 0 {
		d.delay = ra.Delay
	}
	c.fail(ctx, d, envelope.ReasonFailed, err)
}

func callHandler(ctx context.Context, h HandlerFunc, d *delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: "handler", Value: r}
		}
	}()
	return h(ctx, d.env, d.msg)
}

// gateReject settles a message whose bq-schema-version property was rejected: on its first
// delivery, without counting attempts, as a raw copy (payload and properties unchanged, no
// dead_letter block) to the dead-letter topic, or acked with a WARN when dead-lettering is
// off. A failed write is negatively acknowledged.
func (c *Consumer) gateReject(ctx context.Context, d *delivery, err error) {
	c.observe(Event{Kind: EventGateRejected, Topic: d.msg.Topic(), Err: err})
	c.report(err, nil, d.msg)
	pm := &apulsar.ProducerMessage{
		Payload:     d.msg.Payload(),
		Properties:  maps.Clone(d.props),
		Key:         d.msg.Key(),
		OrderingKey: d.msg.OrderingKey(),
	}
	c.deadLetter(ctx, d, pm, "", err)
}

// poison settles a payload that is not an acceptable envelope: the ADR-0035 copy to the
// dead-letter topic at once, or, with dead-lettering off, bounded retries of the payload
// byte for byte and then an ack with a WARN.
func (c *Consumer) poison(ctx context.Context, d *delivery, perr error) {
	c.observe(Event{Kind: EventPoison, Topic: d.msg.Topic(), Attempt: d.counted, Err: perr})
	c.cfg.logger.Warn("poison message", zap.String("topic", d.msg.Topic()), zap.Int("attempt", d.counted), zap.Error(perr))
	c.report(perr, nil, d.msg)
	dlt, on := c.deadLetterTopic(d)
	if !on {
		c.fail(ctx, d, envelope.ReasonPoison, perr)
		return
	}
	queue, _ := dlq.QueueName(d.msg.Topic())
	body, err := envelope.PoisonCopy(d.msg.Payload(), envelope.DeadLetterInfo{
		Reason: envelope.ReasonPoison, Cause: perr, Queue: queue, Attempts: d.counted,
	})
	if err != nil {
		c.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, perr)
		return
	}
	props := maps.Clone(d.props)
	if props == nil {
		props = map[string]string{}
	}
	props[PropAttempts] = strconv.Itoa(d.counted)
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	c.deadLetter(ctx, d, pm, envelope.ReasonPoison, perr)
}

// unknownURN handles a message without a handler: the hook, then ack; without a hook (or
// when it panicked) a failure with reason unknown_urn.
func (c *Consumer) unknownURN(ctx context.Context, d *delivery) {
	c.observe(Event{Kind: EventUnknownURN, Topic: d.msg.Topic(), URN: d.urn, Attempt: d.counted})
	if c.cfg.onUnknown != nil {
		perr := c.safeHook("OnUnknownURN hook", func() { c.cfg.onUnknown(d.env, d.msg) })
		if perr == nil {
			c.ack(d)
			return
		}
		c.report(perr, d.env, d.msg)
	}
	err := &UnknownURNError{URN: d.urn}
	c.cfg.logger.Warn("no handler for urn", zap.String("urn", d.urn), zap.Int("attempt", d.counted),
		zap.String("message_id", d.env.Meta.ID))
	c.report(err, d.env, d.msg)
	c.fail(ctx, d, envelope.ReasonUnknownURN, err)
}

// fail retries while counted < maxAttempts and exhausts the message afterwards.
func (c *Consumer) fail(ctx context.Context, d *delivery, reason envelope.Reason, cause error) {
	if d.counted < c.maxAttempts {
		c.retry(ctx, d, cause)
		return
	}
	c.exhaust(ctx, d, reason, cause)
}

// retry makes another delivery: a negative ack, or a republish of the message with
// bq-attempts (and the body's attempts) set to counted, acknowledged only once sent.
func (c *Consumer) retry(ctx context.Context, d *delivery, cause error) {
	if c.nackRetry {
		c.settler.Nack(d.msg)
		c.observe(Event{Kind: EventRetried, Topic: d.msg.Topic(), URN: d.urn, Attempt: d.counted, Err: cause})
		return
	}
	topic, err := dlq.ParentTopic(d.msg.Topic())
	if err != nil {
		c.nackAfter(d, &SendError{Op: ErrRepublish, Topic: d.msg.Topic(), Err: err}, nil)
		return
	}
	payload := d.msg.Payload()
	if d.env != nil {
		payload, err = d.env.WithAttempts(d.counted).Encode()
		if err != nil {
			c.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, nil)
			return
		}
	}
	props := maps.Clone(d.props)
	if props == nil {
		props = map[string]string{}
	}
	maps.Copy(props, d.extraProps)
	props[PropAttempts] = strconv.Itoa(d.counted)
	delete(props, PropDelay) // set again below when this retry is delayed
	pm := &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	delay := c.cfg.policy.Backoff.Delay(d.counted)
	if d.delay > 0 {
		delay = d.delay
	}
	if delay > 0 {
		if c.brokerDelay {
			pm.DeliverAfter = delay
			props[PropDelay] = strconv.FormatInt(delay.Milliseconds(), 10)
		} else if werr := retry.Wait(ctx, delay); werr != nil {
			c.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: werr}, nil)
			return
		}
	}
	if err := c.send(ctx, topic, pm); err != nil {
		c.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, nil)
		return
	}
	c.observe(Event{Kind: EventRetried, Topic: d.msg.Topic(), URN: d.urn, Attempt: d.counted, Err: cause})
	c.ack(d)
}

// exhaust settles a message that used up its attempts: the annotated copy to the
// dead-letter topic, or an ack with a WARN when dead-lettering is off.
func (c *Consumer) exhaust(ctx context.Context, d *delivery, reason envelope.Reason, cause error) {
	dlt, on := c.deadLetterTopic(d)
	if !on {
		c.drop(d, reason, &ExhaustedError{Reason: reason, Attempts: d.counted, Err: cause})
		return
	}
	if d.env == nil {
		// A payload that is not an envelope (the reactive Source with another codec; the
		// Consumer sends poison through poison instead): byte for byte, with its properties.
		props := maps.Clone(d.props)
		if props == nil {
			props = map[string]string{}
		}
		props[PropAttempts] = strconv.Itoa(d.counted)
		delete(props, PropDelay) // the copy is not delayed
		pm := &apulsar.ProducerMessage{Payload: d.msg.Payload(), Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
		c.deadLetter(ctx, d, pm, reason, cause)
		return
	}
	queue, _ := dlq.QueueName(d.msg.Topic())
	cp := d.env.ToDeadLetter(envelope.DeadLetterInfo{Reason: reason, Cause: cause, Queue: queue, Attempts: d.counted})
	body, err := cp.Encode()
	if err != nil {
		c.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	props := maps.Clone(d.props)
	if props == nil {
		props = map[string]string{}
	}
	maps.Copy(props, ProjectProperties(cp))
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	c.deadLetter(ctx, d, pm, reason, cause)
}

// deadLetter writes pm to the message's dead-letter topic and acks the original once the
// write succeeded; a failed write is negatively acknowledged, never acknowledged. With
// dead-lettering off the message is acked and the drop reported.
func (c *Consumer) deadLetter(ctx context.Context, d *delivery, pm *apulsar.ProducerMessage, reason envelope.Reason, cause error) {
	dlt, on := c.deadLetterTopic(d)
	if !on {
		c.drop(d, reason, cause)
		return
	}
	if len(d.extraProps) > 0 {
		if pm.Properties == nil {
			pm.Properties = map[string]string{}
		}
		maps.Copy(pm.Properties, d.extraProps)
	}
	if err := c.send(ctx, dlt, pm); err != nil {
		c.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	c.cfg.logger.Info("message dead-lettered", zap.String("topic", d.msg.Topic()), zap.String("dead_letter_topic", dlt),
		zap.String("reason", string(reason)), zap.Int("attempt", d.counted))
	c.observe(Event{Kind: EventDeadLettered, Topic: d.msg.Topic(), URN: d.urn, Attempt: d.counted, Reason: reason, Err: cause})
	c.ack(d)
}

// drop acknowledges a message nobody handled, with a WARN and an error report.
func (c *Consumer) drop(d *delivery, reason envelope.Reason, err error) {
	c.cfg.logger.Warn("message dropped: dead-lettering is off", zap.String("topic", d.msg.Topic()),
		zap.String("urn", d.urn), zap.String("reason", string(reason)), zap.Int("attempt", d.counted), zap.Error(err))
	if _, isExhausted := err.(*ExhaustedError); isExhausted { //nolint:errorlint // built by the caller, never wrapped
		c.report(err, d.env, d.msg)
	}
	c.observe(Event{Kind: EventDropped, Topic: d.msg.Topic(), URN: d.urn, Attempt: d.counted, Reason: reason, Err: err})
	c.ack(d)
}

// deadLetterTopic returns the message's dead-letter topic, and false when dead-lettering
// is off for its queue (or its topic name cannot be parsed, which is logged).
func (c *Consumer) deadLetterTopic(d *delivery) (string, bool) {
	dlt, on, err := c.cfg.deadLetter.TopicFor(d.msg.Topic())
	if err != nil {
		c.cfg.logger.Error("cannot name the dead-letter topic", zap.String("topic", d.msg.Topic()), zap.Error(err))
		return "", false
	}
	return dlt, on
}

func (c *Consumer) send(ctx context.Context, topic string, pm *apulsar.ProducerMessage) error {
	s, err := c.senders.get(ctx, topic)
	if err != nil {
		return err
	}
	if _, err := s.Send(ctx, pm); err != nil {
		if ctx.Err() == nil {
			// The producer may be unusable (a send timeout after the broker refused it, a
			// closed or fenced producer): the next settlement creates a fresh one.
			c.senders.evict(topic, s)
		}
		return fmt.Errorf("pulsar: send to %q: %w", topic, err)
	}
	return nil
}

func (c *Consumer) ack(d *delivery) {
	if err := c.settler.Ack(d.msg); err != nil {
		c.cfg.logger.Warn("ack failed", zap.String("topic", d.msg.Topic()), zap.Error(err))
		c.report(&SettleError{Err: err}, d.env, d.msg)
		return
	}
	d.acked = true
}

// nackAfter negatively acknowledges after a failed republish or dead-letter write, and
// reports the send error joined with the failure being settled.
func (c *Consumer) nackAfter(d *delivery, serr *SendError, cause error) {
	c.settler.Nack(d.msg)
	c.cfg.logger.Warn("settlement send failed; message negatively acknowledged", zap.String("topic", d.msg.Topic()),
		zap.String("to", serr.Topic), zap.Error(serr))
	var err error = serr
	if cause != nil {
		err = joinErrors(cause, serr)
	}
	c.report(err, d.env, d.msg)
}

func (c *Consumer) mismatch(propURN, bodyURN string, d *delivery) {
	if c.cfg.onMismatch == nil {
		return
	}
	if perr := c.safeHook("OnRoutingMismatch hook", func() { c.cfg.onMismatch(propURN, bodyURN, d.env, d.msg) }); perr != nil {
		c.cfg.logger.Warn("routing mismatch hook panicked", zap.Error(perr))
	}
}

func (c *Consumer) report(err error, env *envelope.Envelope, msg apulsar.Message) {
	if c.cfg.onError == nil {
		return
	}
	if perr := c.safeHook("OnError hook", func() { c.cfg.onError(err, env, msg) }); perr != nil {
		c.cfg.logger.Error("error hook panicked", zap.Error(perr))
	}
}

func (c *Consumer) observe(e Event) {
	if c.cfg.observer == nil {
		return
	}
	if perr := c.safeHook("observer", func() { c.cfg.observer.Observe(e) }); perr != nil {
		c.cfg.logger.Error("observer panicked", zap.Error(perr))
	}
}

func (*Consumer) safeHook(where string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: where, Value: r}
		}
	}()
	f()
	return nil
}
