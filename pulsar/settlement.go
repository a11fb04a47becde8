package pulsar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// settle settles an outcome; it is the package's one mapping of outcomes, behind
// [Consumer.Run] and the [Delivery] methods alike. nil acknowledges; a *DeadLetterError
// dead-letters at once; a *RetryAfterError fails with its delay; any other error fails
// (retry while deliveries are left, then the dead-letter copy). The reason is poison when
// err matches envelope.ErrPoison (the payload cannot be decoded; a body that is not an envelope
// then gets the raw copy at once), failed otherwise. The delivery's copy properties go on
// every copy.
func (e *engine) settle(d *Delivery, err error) {
	if err == nil {
		_ = e.acknowledge(d) // a failed ack is reported, recorded in health and settled nacked
		return
	}
	dv, warn := directiveOf(err)
	if d.txn != nil && !warn && !e.renewTxn(d) {
		return // the handler's writes are discarded; no transaction for the settlement: nacked
	}
	if dv != nil {
		if warn {
			e.warnAck(d, dv)
		} else {
			e.deferDelivery(d, dv)
		}
		return
	}
	reason := envelope.ReasonFailed
	if errors.Is(err, envelope.ErrPoison) {
		reason = envelope.ReasonPoison
	}
	o := failOptions{Properties: d.extraProps}
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		e.deadLetterNow(d, reason, err, o)
		return
	}
	if d.env == nil && reason == envelope.ReasonPoison {
		e.poisonNow(d, err, o)
		return
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.Delay > 0 {
		o.Delay = ra.Delay
	}
	e.fail(d, reason, err, o)
}

// acknowledge acknowledges a delivery that succeeded (or that a front's policy acks).
func (e *engine) acknowledge(d *Delivery) error {
	err := e.ack(d)
	if err == nil {
		e.finish(d, &Event{Kind: EventAcked})
	}
	return err
}

// fail retries while deliveries are left and exhausts the message afterwards.
func (e *engine) fail(d *Delivery, reason envelope.Reason, cause error, o failOptions) {
	d.delay, d.extraProps = o.Delay, o.Properties
	if d.counted < e.cfg.MaxAttempts {
		e.retry(d, cause)
		return
	}
	e.exhaust(d, reason, cause)
}

// deadLetterNow dead-letters the delivery at once, whatever attempts are left (poison gets
// its raw copy).
func (e *engine) deadLetterNow(d *Delivery, reason envelope.Reason, cause error, o failOptions) {
	d.delay, d.extraProps = o.Delay, o.Properties
	if d.env == nil && reason == envelope.ReasonPoison {
		e.poisonCopy(d, cause)
		return
	}
	e.exhaust(d, reason, cause)
}

// poisonNow settles a delivery whose payload is not an acceptable envelope as the contract's
// pipeline does (the raw copy to the dead-letter topic at once, or bounded retries with
// dead-lettering off).
func (e *engine) poisonNow(d *Delivery, cause error, o failOptions) {
	d.extraProps = o.Properties
	e.poisoned(d, cause)
}

// nack negatively acknowledges the message: the broker redelivers it.
func (e *engine) nack(d *Delivery, err error) {
	e.settler.Nack(d.msg)
	e.finish(d, &Event{Kind: EventNacked, Err: err})
}

// gateReject settles a message whose bq-schema-version property was rejected: on its first
// delivery, without counting attempts, as a raw copy (payload and properties unchanged, no
// dead_letter block) to the dead-letter topic, or acked with a WARN when dead-lettering is
// off. A failed write is negatively acknowledged.
func (e *engine) gateReject(d *Delivery, err error) {
	e.observe(d, Event{Kind: EventGateRejected, Err: err})
	pm := &apulsar.ProducerMessage{
		Payload:     d.msg.Payload(),
		Properties:  maps.Clone(d.props),
		Key:         d.msg.Key(),
		OrderingKey: d.msg.OrderingKey(),
	}
	e.deadLetter(d, pm, "", err)
}

// poisoned settles poison: the ADR-0035 copy at once, or, with dead-lettering off, bounded
// retries of the payload byte for byte and then an ack with a WARN.
func (e *engine) poisoned(d *Delivery, perr error) {
	e.observe(d, Event{Kind: EventPoison, Err: perr})
	e.cfg.Logger.Warn("poison message", zap.String("topic", d.msg.Topic()), zap.Int("attempt", d.counted), zap.Error(perr))
	if _, on := e.deadLetterTopic(d); !on {
		e.fail(d, envelope.ReasonPoison, perr, failOptions{Properties: d.extraProps})
		return
	}
	e.poisonCopy(d, perr)
}

func (e *engine) poisonCopy(d *Delivery, perr error) {
	dlt, _ := e.deadLetterTopic(d)
	queue, _ := dlq.QueueName(d.msg.Topic())
	info := envelope.DeadLetterInfo{Reason: envelope.ReasonPoison, Cause: perr, Queue: queue, Attempts: d.counted}
	body, err := envelope.PoisonCopy(d.msg.Payload(), info)
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, perr)
		return
	}
	props := copyProps(d.props)
	props[PropAttempts] = strconv.Itoa(d.counted)
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	e.deadLetterFit(d, pm, info, envelope.ReasonPoison, perr)
}

// deferDelivery republishes a deferred delivery without counting it: bq-attempts (and the
// body's attempts) stay at reconciled, whatever the retry strategy (a negative ack would
// raise the redelivery count, which reconciliation counts).
func (e *engine) deferDelivery(d *Delivery, de *directive) {
	d.delay = de.delay
	e.republish(d, de, d.reconciled)
}

// warnAck acknowledges a delivery that succeeded with a warning, and reports the warning.
func (e *engine) warnAck(d *Delivery, we *directive) {
	e.cfg.Logger.Warn("delivery acknowledged with a warning", zap.String("topic", d.msg.Topic()),
		zap.String("urn", d.urn), zap.String("message_id", messageID(d)), zap.Error(we))
	e.observe(d, Event{Kind: EventError, Err: we})
	e.health.warn(we.Error())
	if e.ack(d) == nil {
		e.finish(d, &Event{Kind: EventAcked, Err: we})
	}
}

// retry makes another delivery: a negative ack (after the delay, if any), or a republish of
// the message with bq-attempts (and the body's attempts) set to counted, acknowledged only
// once sent. Under the nack strategy a message whose count is carried by bq-attempts rather
// than by Pulsar's redelivery count (a deferred message's republished copy, or a copy
// republished by another SDK) is republished too: a negative ack would not raise its count
// (reconciliation takes the larger of the two), so the retry would not be counted.
func (e *engine) retry(d *Delivery, cause error) {
	if e.cfg.Policy.Strategy == retry.Nack && int64(d.msg.RedeliveryCount()) >= int64(d.reconciled) {
		if d.delay > 0 {
			e.timers.after(d.delay, func() { e.settler.Nack(d.msg) }, func() { e.settler.Nack(d.msg) })
		} else {
			e.settler.Nack(d.msg)
		}
		e.finish(d, &Event{Kind: EventRetried, Err: cause})
		return
	}
	e.republish(d, cause, d.counted)
}

// republish sends the message again to its parent topic with bq-attempts (and the body's
// attempts) set to attempts, and acknowledges it once sent.
func (e *engine) republish(d *Delivery, cause error, attempts int) {
	topic, err := dlq.ParentTopic(d.msg.Topic())
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: d.msg.Topic(), Err: err}, cause)
		return
	}
	payload := d.msg.Payload()
	if d.env != nil {
		payload, err = d.env.WithAttempts(attempts).Encode()
		if err != nil {
			e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, cause)
			return
		}
	}
	props := copyProps(d.props)
	maps.Copy(props, d.extraProps)
	props[PropAttempts] = strconv.Itoa(attempts)
	delete(props, PropDelay) // set again below when this retry is delayed
	pm := &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	delay := e.cfg.Policy.Backoff.Delay(d.counted)
	if d.delay > 0 {
		delay = d.delay
	}
	if delay > 0 {
		if e.cfg.BrokerDelay {
			pm.DeliverAfter = delay
			props[PropDelay] = strconv.FormatInt(delay.Milliseconds(), 10)
		} else if werr := retry.Wait(d.ctx, delay); werr != nil {
			e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: werr}, cause)
			return
		}
	}
	if size := messageSize(pm); size > e.cfg.MaxMessageSize {
		e.cfg.Logger.Error("retry copy too large for the broker; dead-lettering instead", zap.String("topic", d.msg.Topic()),
			zap.Int("size", size), zap.Int("limit", e.cfg.MaxMessageSize))
		e.exhaust(d, envelope.ReasonFailed, cause)
		return
	}
	if err := e.send(d, topic, pm, isPartition(d.msg.Topic())); err != nil {
		if permanentForMessage(err) {
			// The queue will never take this copy (too big, not allowed, terminated): no
			// retry can help, so the message goes to its dead-letter topic.
			e.cfg.Logger.Error("retry republish refused for good; dead-lettering instead", zap.String("topic", topic), zap.Error(err))
			e.observe(d, Event{Kind: EventError, Err: &SendError{Op: ErrRepublish, Topic: topic, Err: err}})
			e.exhaust(d, envelope.ReasonFailed, joinErrors(cause, err))
			return
		}
		e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, cause)
		return
	}
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, &Event{Kind: EventRetried, Err: cause})
	}
}

// exhaust settles a message that used up its attempts: the annotated copy to the
// dead-letter topic, or an ack with a WARN when dead-lettering is off.
func (e *engine) exhaust(d *Delivery, reason envelope.Reason, cause error) {
	dlt, on := e.deadLetterTopic(d)
	if !on {
		e.drop(d, reason, &ExhaustedError{Reason: reason, Attempts: d.counted, Err: cause})
		return
	}
	if d.env == nil {
		// A payload that is not an envelope (a Source with another codec): byte for byte,
		// with its properties.
		props := copyProps(d.props)
		props[PropAttempts] = strconv.Itoa(d.counted)
		delete(props, PropDelay) // the copy is not delayed
		pm := &apulsar.ProducerMessage{Payload: d.msg.Payload(), Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
		e.deadLetter(d, pm, reason, cause)
		return
	}
	queue, _ := dlq.QueueName(d.msg.Topic())
	info := envelope.DeadLetterInfo{Reason: reason, Cause: cause, Queue: queue, Attempts: d.counted}
	cp := d.env.ToDeadLetter(info)
	body, err := cp.Encode()
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	props := copyProps(d.props)
	routed, hasRouted := binding.RoutedJob(props)
	binding.Project(props, cp)
	if hasRouted {
		props[PropJob] = routed // the routing decision survives the dead-letter topic
	}
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.msg.Key(), OrderingKey: d.msg.OrderingKey()}
	e.deadLetterFit(d, pm, info, reason, cause)
}

// deadLetterFit writes a built dead-letter copy that may be too large for the broker: a
// copy over MaxMessageSize, or one the broker refuses as too big, is replaced by a
// truncated, marked copy of the original payload (envelope.TruncatedCopy) that fits, which
// is reported (ERROR log, EventTruncated with an error matching ErrTruncated) and written.
func (e *engine) deadLetterFit(d *Delivery, pm *apulsar.ProducerMessage, info envelope.DeadLetterInfo, reason envelope.Reason, cause error) {
	// The properties are kept as they are; the payload gets what is left, and at least
	// 16 KiB (the original was accepted with the same properties, so they fit).
	limit := max(e.cfg.MaxMessageSize-propsSize(pm.Properties), 16<<10)
	if len(pm.Payload) > limit {
		if !e.truncate(d, pm, info, limit, cause) {
			return
		}
	}
	e.deadLetterWith(d, pm, reason, cause, func(err error) bool {
		// The broker's limit is below ours: truncate to a quarter of it and try once more.
		return isTooBig(err) && e.truncate(d, pm, info, min(limit, len(pm.Payload))/4, cause)
	})
}

// truncate replaces pm's payload by the truncated copy of the original within limit and
// reports it; false when even that cannot be built (the message is then nacked).
func (e *engine) truncate(d *Delivery, pm *apulsar.ProducerMessage, info envelope.DeadLetterInfo, limit int, cause error) bool {
	dlt, _ := e.deadLetterTopic(d)
	body, err := envelope.TruncatedCopy(d.msg.Payload(), info, limit)
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return false
	}
	terr := &truncatedError{topic: dlt, fullSize: len(pm.Payload), limit: limit, origin: len(d.msg.Payload())}
	e.cfg.Logger.Error("dead-letter copy too large; writing a truncated copy", zap.String("topic", d.msg.Topic()),
		zap.String("dead_letter_topic", dlt), zap.Int("size", terr.fullSize), zap.Int("limit", limit),
		zap.Int("original_size", terr.origin))
	e.health.warn(terr.Error())
	e.observe(d, Event{Kind: EventTruncated, Reason: info.Reason, Err: terr})
	pm.Payload = body
	return true
}

// deadLetter writes pm to the message's dead-letter topic and acks the original once the
// write succeeded; a failed write is negatively acknowledged, never acknowledged. With
// dead-lettering off the message is acked and the drop reported.
func (e *engine) deadLetter(d *Delivery, pm *apulsar.ProducerMessage, reason envelope.Reason, cause error) {
	e.deadLetterWith(d, pm, reason, cause, nil)
}

// deadLetterWith is deadLetter with a second chance: when the write fails and again(err)
// says so (having changed pm), it is tried once more.
func (e *engine) deadLetterWith(d *Delivery, pm *apulsar.ProducerMessage, reason envelope.Reason, cause error, again func(error) bool) {
	dlt, on := e.deadLetterTopic(d)
	if !on {
		e.drop(d, reason, cause)
		return
	}
	if len(d.extraProps) > 0 {
		if pm.Properties == nil {
			pm.Properties = map[string]string{}
		}
		maps.Copy(pm.Properties, d.extraProps)
	}
	if err := e.ensureRetention(d.ctx, d.msg.Topic(), dlt); err != nil {
		e.settleResult(err)
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	err := e.send(d, dlt, pm, false)
	if err != nil && again != nil && again(err) {
		err = e.send(d, dlt, pm, false)
	}
	if d.finished {
		return // again settled it (a copy that cannot be built is nacked)
	}
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	e.cfg.Logger.Info("message dead-lettered", zap.String("topic", d.msg.Topic()), zap.String("dead_letter_topic", dlt),
		zap.String("reason", string(reason)), zap.Int("attempt", d.counted))
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, &Event{Kind: EventDeadLettered, Reason: reason, Err: cause})
	}
}

// ensureRetention makes sure the retention subscription of dlt exists, once per topic.
func (e *engine) ensureRetention(ctx context.Context, topic, dlt string) error {
	if e.cfg.Retention == nil {
		return nil
	}
	if _, ok := e.retained.Load(dlt); ok {
		return nil
	}
	if err := e.cfg.Retention(ctx, topic, dlt); err != nil {
		return err
	}
	e.retained.Store(dlt, struct{}{})
	return nil
}

// drop acknowledges a message nobody handled, with a WARN; its EventDropped carries err.
func (e *engine) drop(d *Delivery, reason envelope.Reason, err error) {
	e.cfg.Logger.Warn("message dropped: dead-lettering is off", zap.String("topic", d.msg.Topic()),
		zap.String("urn", d.urn), zap.String("reason", string(reason)), zap.Int("attempt", d.counted), zap.Error(err))
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, &Event{Kind: EventDropped, Reason: reason, Err: err})
	}
}

// deadLetterTopic returns the message's dead-letter topic, and false when dead-lettering
// is off for its queue (or its topic name cannot be parsed, which is logged).
func (e *engine) deadLetterTopic(d *Delivery) (string, bool) {
	dlt, on, err := e.cfg.DeadLetter.TopicFor(d.msg.Topic())
	if err != nil {
		e.cfg.Logger.Error("cannot name the dead-letter topic", zap.String("topic", d.msg.Topic()), zap.Error(err))
		return "", false
	}
	return dlt, on
}

// send writes pm, one of d's settlement writes (a retry republish or a dead-letter copy),
// to topic, inside d's transaction if it has one, and reports it to the Publish hooks;
// partitioned says that topic is partitioned (OutgoingMessage.Partitioned).
func (e *engine) send(d *Delivery, topic string, pm *apulsar.ProducerMessage, partitioned bool) error {
	ctx := d.ctx
	s, release, err := e.senders.get(ctx, topic)
	if err != nil {
		e.settleResult(err)
		return err
	}
	if txn := txnOf(ctx); txn != nil {
		pm.Transaction = txn // the delivery's transaction (WithTransactions)
	}
	var sent func(apulsar.MessageID, error)
	if e.cfg.Hooks.publishes() {
		// The consumer's own writes are sends too: the Publish hooks see them (a producer
		// span, a sent count) as they see a Publisher's.
		sent = e.cfg.Hooks.publishing(ctx, &OutgoingMessage{Topic: topic, Envelope: d.env, Message: pm, Partitioned: partitioned})
	}
	id, err := s.Send(ctx, pm)
	if sent != nil {
		sent(id, err)
	}
	if err != nil && ctx.Err() == nil && producerBroken(err) {
		// The producer cannot send again (closed, fenced, a send timeout after the broker
		// refused it): the next settlement creates a fresh one. It is closed once every
		// send in progress on it has returned.
		e.senders.evict(topic, s)
	}
	release()
	if err != nil {
		err = fmt.Errorf("pulsar: send to %q: %w", topic, err)
	}
	e.settleResult(err)
	return err
}

func (e *engine) ack(d *Delivery) error {
	if d.txn != nil {
		if err := e.commitAck(d); err != nil {
			return err
		}
		d.acked = true
		return nil
	}
	if err := e.settler.Ack(d.msg); err != nil {
		e.cfg.Logger.Warn("ack failed", zap.String("topic", d.msg.Topic()), zap.Error(err))
		serr := &SettleError{Err: err}
		e.health.failing("ack", err)
		e.finish(d, &Event{Kind: EventNacked, Err: serr})
		return serr
	}
	e.health.ok("ack")
	d.acked = true
	return nil
}

// settleResult records the outcome of a settlement write in the health state.
func (e *engine) settleResult(err error) {
	if err != nil {
		e.health.failing("settlement write", err)
	} else {
		e.health.ok("settlement write")
	}
}

// nackAfter negatively acknowledges after a failed republish or dead-letter write, and
// reports the send error joined with the failure being settled.
func (e *engine) nackAfter(d *Delivery, serr *SendError, cause error) {
	e.settler.Nack(d.msg)
	e.cfg.Logger.Warn("settlement send failed; message negatively acknowledged", zap.String("topic", d.msg.Topic()),
		zap.String("to", serr.Topic), zap.Error(serr))
	var err error = serr
	if cause != nil {
		err = joinErrors(cause, serr)
	}
	e.finish(d, &Event{Kind: EventNacked, Err: err})
}

// messageSize is the size of pm as the broker bounds it, near enough: payload and properties.
func messageSize(pm *apulsar.ProducerMessage) int { return len(pm.Payload) + propsSize(pm.Properties) }

func propsSize(p map[string]string) int {
	n := 0
	for k, v := range p {
		n += len(k) + len(v) + 8 // the key-value framing
	}
	return n
}

func isTooBig(err error) bool {
	var pe *apulsar.Error
	return errors.As(err, &pe) && pe.Result() == apulsar.MessageTooBig
}

// permanentForMessage reports whether a send error means this message will never be taken
// by that topic, whatever is retried: a *apulsar.Error that retry.IsRetryable (the binding's
// one classifier) does not call retryable, other than the lifecycle results of a closed
// producer or client (which a fresh producer cures). Too big, invalid, not allowed,
// terminated topic, authorisation and fencing are permanent; timeouts, connection errors
// and a full queue are not.
func permanentForMessage(err error) bool {
	var pe *apulsar.Error
	if !errors.As(err, &pe) || retry.IsRetryable(err) {
		return false
	}
	switch pe.Result() {
	case apulsar.ProducerClosed, apulsar.AlreadyClosedError, apulsar.ConsumerClosed, apulsar.ProducerNotInitialized:
		return false
	default:
		return true
	}
}
