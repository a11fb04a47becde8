// Package pulsar (imported as engine) is the one delivery engine of the Pulsar binding: the receive pump, the
// contract's admission of a message (schema-version gate, classification, attempts
// reconciliation, routing) and its settlement (ack, retry by republish or negative ack,
// dead letter, negative ack after a failed write), the producer cache of the settlement
// writes, and the health state. The plain Consumer (package pulsar) and the messaging
// connector's Source (package pulsar/connector) are two fronts on it, so that the same input
// is settled the same way by both.
//
// A failed republish or dead-letter write is never followed by an ack: the original is
// negatively acknowledged and comes back.
package pulsar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Receive backoff: the pause after a transient receive error starts at ReceiveBackoffMin and
// doubles up to ReceiveBackoffMax; a successful receive resets it.
const (
	ReceiveBackoffMin = 100 * time.Millisecond
	ReceiveBackoffMax = 10 * time.Second
)

// Config configures an [Engine].
type Config struct {
	// Subscription names the subscription in events and logs ("" when unknown).
	Subscription string
	// MaxAttempts is the number of deliveries in total, the first included (≥ 1).
	MaxAttempts int
	// Policy is the retry policy: its Strategy and Backoff are used.
	Policy retry.Policy
	// BrokerDelay is true when the subscription type honours DeliverAfter (Shared,
	// Key_Shared).
	BrokerDelay bool
	// DeadLetter is the dead-letter configuration.
	DeadLetter dlq.Config
	// SettleRejects settles gate rejections and poison at admission (the contract's
	// pipeline); false leaves a poison body to the front (Env nil, Poison set).
	SettleRejects bool
	// Gate applies the schema-version gate at admission.
	Gate bool
	// Logger receives the engine's logs; never nil.
	Logger *zap.Logger
	// Observer receives the pipeline's events; nil for none.
	Observer Observer
	// OnError receives failures (see the consumer's error hook); nil for none.
	OnError func(err error, env *envelope.Envelope, msg apulsar.Message)
	// OnMismatch is called when a usable bq-job property differs from the body's URN.
	OnMismatch func(propURN, bodyURN string, env *envelope.Envelope, msg apulsar.Message)
	// DeliveryHooks open a context per delivery and receive its settlement.
	DeliveryHooks []DeliveryHook
	// Senders creates the producer of a topic for retries and dead letters.
	Senders func(topic string) (Sender, func(), error)
	// Retention makes sure the retention subscription of a dead-letter topic exists (topic
	// is the one the message was received on); it is called before the first write to each
	// dead-letter topic, and again after a failure. Nil: no retention subscription.
	Retention func(ctx context.Context, topic, deadLetterTopic string) error
	// MaxMessageSize bounds what a settlement writes: a dead-letter copy larger than it
	// (properties included) is replaced by a truncated copy, and a retry copy larger than it
	// goes to the dead-letter path. 0 means [DefaultMaxMessageSize].
	MaxMessageSize int
	// ExtraSettle, when set, is called after every successful settlement write or ack,
	// and with the error of every failed one (health of a front).
	ExtraSettle func(err error)
}

// DefaultMaxMessageSize is the default bound of a settlement write: Apache Pulsar's default
// maxMessageSize (5 MiB, metadata included) less 64 KiB of headroom for the message's
// metadata.
const DefaultMaxMessageSize = 5<<20 - 64<<10

// Engine admits and settles the messages of one subscription. It is safe for concurrent
// use: deliveries are independent.
type Engine struct {
	cfg     Config
	settler Settler
	senders *senderCache
	health  healthState

	retained sync.Map // dead-letter topic → struct{}: retention subscription ensured
	timers   timerSet // delayed negative acks
}

// New returns an engine that settles through settler.
func New(cfg Config, settler Settler) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = retry.DefaultMaxAttempts
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	e := &Engine{cfg: cfg, settler: settler}
	e.senders = newSenderCache(cfg.Senders)
	e.health.init()
	return e
}

// MaxAttempts returns the number of deliveries in total.
func (e *Engine) MaxAttempts() int { return e.cfg.MaxAttempts }

// Logger returns the engine's logger.
func (e *Engine) Logger() *zap.Logger { return e.cfg.Logger }

// Delivery is one received message on its way through admission and settlement.
type Delivery struct {
	// Msg is the Pulsar message.
	Msg apulsar.Message
	// Props are its properties (the client's map: never modified).
	Props map[string]string
	// Env is the decoded envelope with attempts set to Reconciled; nil for poison.
	Env *envelope.Envelope
	// Poison is the classification error when Env is nil.
	Poison error
	// URN is the routing URN (a usable bq-job property wins over the body's URN).
	URN string
	// Reconciled is the number of earlier deliveries; Counted = Reconciled + 1.
	Reconciled, Counted int
	// Ctx is the delivery's context (the one the delivery hooks returned). It lives as long
	// as the delivery, which is what a context in a struct is for here: the settlement that
	// follows the handler runs with it.
	Ctx context.Context //nolint:containedctx // delivery-scoped, see above

	delay      time.Duration     // a retry delay overriding the policy's backoff
	extraProps map[string]string // added to a republished or dead-lettered copy
	finishers  []func(Settlement)
	finished   bool
	acked      bool
}

// Acked reports whether the delivery's settlement acknowledged the message.
func (d *Delivery) Acked() bool { return d.acked }

// deliveries recycles the deliveries that [Engine.Release] is given.
var deliveries = sync.Pool{New: func() any { return new(Delivery) }}

// Release hands a settled delivery back for reuse by a later [Engine.Admit]. The caller
// must hold the only reference: call it after a synchronous settlement that acknowledged
// the message (Acked), never for a delivery a timer, a hook or a reactive message may still
// use. A delivery that is not acknowledged is left to the garbage collector.
func (*Engine) Release(d *Delivery) {
	if d == nil || !d.acked || !d.finished {
		return
	}
	clear(d.finishers)
	*d = Delivery{finishers: d.finishers[:0]}
	deliveries.Put(d)
}

// FailOptions adjust the settlement of a failed delivery.
type FailOptions struct {
	// Delay replaces the policy's backoff for the retry (0: the policy's).
	Delay time.Duration
	// Properties are added to a republished or dead-lettered copy.
	Properties map[string]string
}

// Admit runs the contract's admission on msg: the delivery hooks, the schema-version gate,
// classification, attempts reconciliation and routing. It returns nil when the message was
// settled here (a gate rejection or, with SettleRejects, poison).
func (e *Engine) Admit(ctx context.Context, msg apulsar.Message) *Delivery {
	d, _ := deliveries.Get().(*Delivery) // the pool holds *Delivery only
	fins := d.finishers[:0]
	*d = Delivery{Msg: msg, Props: msg.Properties(), finishers: fins}
	d.Ctx = e.startDelivery(ctx, d)
	if e.cfg.Observer != nil { // no event to build without an observer
		e.observe(d, Event{Kind: EventReceived, Topic: msg.Topic()})
	}

	if e.cfg.Gate {
		if v, ok := d.Props[PropSchemaVersion]; ok {
			if err := GateVerdict(v, true); err != nil {
				e.gateReject(d, err)
				return nil
			}
		}
	}
	attemptsProp, hasAttempts := d.Props[PropAttempts]
	env, perr := envelope.Classify(msg.Payload())
	if perr != nil {
		d.Reconciled, d.Counted = Reconcile(attemptsProp, hasAttempts, 0, msg.RedeliveryCount())
		d.Poison = perr
		if e.cfg.SettleRejects {
			e.poisoned(d, perr)
			return nil
		}
		return d
	}
	d.Reconciled, d.Counted = Reconcile(attemptsProp, hasAttempts, env.Attempts, msg.RedeliveryCount())
	if env.Attempts != d.Reconciled {
		env = env.WithAttempts(d.Reconciled)
	}
	d.Env = env
	bodyURN := env.URN()
	d.URN = bodyURN
	if pj, ok := d.Props[PropJob]; ok && !envelope.IsBlank(pj) {
		d.URN = pj
		if pj != bodyURN {
			e.mismatch(pj, bodyURN, d)
		}
	}
	return d
}

// startDelivery runs the delivery hooks, each with the context the one before returned, and
// returns the last context.
func (e *Engine) startDelivery(ctx context.Context, d *Delivery) context.Context {
	for _, h := range e.cfg.DeliveryHooks {
		next, fin, perr := callDeliveryHook(ctx, h, d.Msg)
		if perr != nil {
			e.cfg.Logger.Error("delivery hook panicked", zap.Error(perr))
			continue
		}
		if next != nil {
			ctx = next //nolint:fatcontext // the hooks nest by design: each wraps the context of the one before
		}
		if fin != nil {
			d.finishers = append(d.finishers, fin)
		}
	}
	return ctx
}

func callDeliveryHook(ctx context.Context, h DeliveryHook, msg apulsar.Message) (next context.Context, fin func(Settlement), err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: "delivery hook", Value: r}
		}
	}()
	next, fin = h(ctx, msg)
	return next, fin, nil
}

// finish reports the delivery's settlement to the hooks, once.
func (e *Engine) finish(d *Delivery, s Settlement) {
	if d.finished {
		return
	}
	d.finished = true
	if s.URN == "" {
		s.URN = d.URN
	}
	if s.Attempt == 0 {
		s.Attempt = d.Counted
	}
	for i := len(d.finishers) - 1; i >= 0; i-- {
		f := d.finishers[i]
		if perr := SafeCall("delivery hook's settlement", func() { f(s) }); perr != nil {
			e.cfg.Logger.Error("delivery hook's settlement panicked", zap.Error(perr))
		}
	}
}

// Handled records a handler's result (observer event, log, error hook) before settlement.
func (e *Engine) Handled(d *Delivery, err error, latency time.Duration) {
	if err == nil {
		e.observe(d, Event{Kind: EventHandled, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Latency: latency})
		return
	}
	e.observe(d, Event{Kind: EventFailed, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Latency: latency, Err: err})
	e.cfg.Logger.Warn("handler failed", zap.String("urn", d.URN), zap.Int("attempt", d.Counted),
		zap.String("message_id", messageID(d)), zap.Error(err))
	e.Report(&HandlerError{URN: d.URN, Attempt: d.Counted, Err: err}, d.Env, d.Msg)
}

// Observing reports whether an observer is set (so that a front can skip the clock).
func (e *Engine) Observing() bool { return e.cfg.Observer != nil }

func messageID(d *Delivery) string {
	if d.Env != nil {
		return d.Env.Meta.ID
	}
	return ""
}

// Settle settles a handler's outcome: nil acknowledges; a *DeadLetterError dead-letters at
// once with reason failed; a *RetryAfterError fails with its delay; any other error fails
// with reason failed (retry while deliveries are left, then the dead-letter copy).
func (e *Engine) Settle(d *Delivery, err error) {
	if err == nil {
		_ = e.AckHandled(d) // a failed ack is reported, recorded in health and settled nacked
		return
	}
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		e.DeadLetterNow(d, envelope.ReasonFailed, err, FailOptions{})
		return
	}
	var opts FailOptions
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.Delay > 0 {
		opts.Delay = ra.Delay
	}
	e.Fail(d, envelope.ReasonFailed, err, opts)
}

// AckHandled acknowledges a successfully handled delivery.
func (e *Engine) AckHandled(d *Delivery) error {
	err := e.ack(d)
	if err == nil {
		e.finish(d, Settlement{Outcome: OutcomeAcked})
	}
	return err
}

// Fail retries while deliveries are left and exhausts the message afterwards.
func (e *Engine) Fail(d *Delivery, reason envelope.Reason, cause error, o FailOptions) {
	d.delay, d.extraProps = o.Delay, o.Properties
	if d.Counted < e.cfg.MaxAttempts {
		e.retry(d, cause)
		return
	}
	e.exhaust(d, reason, cause)
}

// DeadLetterNow dead-letters the delivery at once, whatever attempts are left (poison gets
// its raw copy).
func (e *Engine) DeadLetterNow(d *Delivery, reason envelope.Reason, cause error, o FailOptions) {
	d.delay, d.extraProps = o.Delay, o.Properties
	if d.Env == nil && reason == envelope.ReasonPoison {
		e.poisonCopy(d, cause)
		return
	}
	e.exhaust(d, reason, cause)
}

// Poison settles a delivery whose payload is not an acceptable envelope as the contract's
// pipeline does (the raw copy to the dead-letter topic at once, or bounded retries with
// dead-lettering off).
func (e *Engine) Poison(d *Delivery, cause error, o FailOptions) {
	d.extraProps = o.Properties
	e.poisoned(d, cause)
}

// Drop acknowledges a delivery nobody handled, with a WARN and an error report.
func (e *Engine) Drop(d *Delivery, reason envelope.Reason, err error) { e.drop(d, reason, err) }

// Nack negatively acknowledges the message: the broker redelivers it.
func (e *Engine) Nack(d *Delivery, err error) {
	e.settler.Nack(d.Msg)
	e.finish(d, Settlement{Outcome: OutcomeNacked, Err: err})
}

// AckRaw acknowledges without a handler outcome (a front's own policy, e.g. ignore).
func (e *Engine) AckRaw(d *Delivery) error {
	err := e.ack(d)
	if err == nil {
		e.finish(d, Settlement{Outcome: OutcomeAcked})
	}
	return err
}

// gateReject settles a message whose bq-schema-version property was rejected: on its first
// delivery, without counting attempts, as a raw copy (payload and properties unchanged, no
// dead_letter block) to the dead-letter topic, or acked with a WARN when dead-lettering is
// off. A failed write is negatively acknowledged.
func (e *Engine) gateReject(d *Delivery, err error) {
	e.observe(d, Event{Kind: EventGateRejected, Topic: d.Msg.Topic(), Err: err})
	e.Report(err, nil, d.Msg)
	pm := &apulsar.ProducerMessage{
		Payload:     d.Msg.Payload(),
		Properties:  maps.Clone(d.Props),
		Key:         d.Msg.Key(),
		OrderingKey: d.Msg.OrderingKey(),
	}
	e.deadLetter(d, pm, "", err)
}

// poisoned settles poison: the ADR-0035 copy at once, or, with dead-lettering off, bounded
// retries of the payload byte for byte and then an ack with a WARN.
func (e *Engine) poisoned(d *Delivery, perr error) {
	e.observe(d, Event{Kind: EventPoison, Topic: d.Msg.Topic(), Attempt: d.Counted, Err: perr})
	e.cfg.Logger.Warn("poison message", zap.String("topic", d.Msg.Topic()), zap.Int("attempt", d.Counted), zap.Error(perr))
	e.Report(perr, nil, d.Msg)
	if _, on := e.deadLetterTopic(d); !on {
		e.Fail(d, envelope.ReasonPoison, perr, FailOptions{Properties: d.extraProps})
		return
	}
	e.poisonCopy(d, perr)
}

func (e *Engine) poisonCopy(d *Delivery, perr error) {
	dlt, _ := e.deadLetterTopic(d)
	queue, _ := dlq.QueueName(d.Msg.Topic())
	info := envelope.DeadLetterInfo{Reason: envelope.ReasonPoison, Cause: perr, Queue: queue, Attempts: d.Counted}
	body, err := envelope.PoisonCopy(d.Msg.Payload(), info)
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, perr)
		return
	}
	props := copyProps(d.Props)
	props[PropAttempts] = strconv.Itoa(d.Counted)
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.Msg.Key(), OrderingKey: d.Msg.OrderingKey()}
	e.deadLetterFit(d, pm, info, envelope.ReasonPoison, perr)
}

// retry makes another delivery: a negative ack (after the delay, if any), or a republish of
// the message with bq-attempts (and the body's attempts) set to counted, acknowledged only
// once sent.
func (e *Engine) retry(d *Delivery, cause error) {
	if e.cfg.Policy.Strategy == retry.Nack {
		e.observe(d, Event{Kind: EventRetried, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Err: cause})
		if d.delay > 0 {
			e.timers.after(d.delay, func() { e.settler.Nack(d.Msg) }, func() { e.settler.Nack(d.Msg) })
		} else {
			e.settler.Nack(d.Msg)
		}
		e.finish(d, Settlement{Outcome: OutcomeRetried, Err: cause})
		return
	}
	topic, err := dlq.ParentTopic(d.Msg.Topic())
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: d.Msg.Topic(), Err: err}, cause)
		return
	}
	payload := d.Msg.Payload()
	if d.Env != nil {
		payload, err = d.Env.WithAttempts(d.Counted).Encode()
		if err != nil {
			e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, cause)
			return
		}
	}
	props := copyProps(d.Props)
	maps.Copy(props, d.extraProps)
	props[PropAttempts] = strconv.Itoa(d.Counted)
	delete(props, PropDelay) // set again below when this retry is delayed
	pm := &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: d.Msg.Key(), OrderingKey: d.Msg.OrderingKey()}
	delay := e.cfg.Policy.Backoff.Delay(d.Counted)
	if d.delay > 0 {
		delay = d.delay
	}
	if delay > 0 {
		if e.cfg.BrokerDelay {
			pm.DeliverAfter = delay
			props[PropDelay] = strconv.FormatInt(delay.Milliseconds(), 10)
		} else if werr := retry.Wait(d.Ctx, delay); werr != nil {
			e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: werr}, cause)
			return
		}
	}
	if size := messageSize(pm); size > e.cfg.MaxMessageSize {
		e.cfg.Logger.Error("retry copy too large for the broker; dead-lettering instead", zap.String("topic", d.Msg.Topic()),
			zap.Int("size", size), zap.Int("limit", e.cfg.MaxMessageSize))
		e.exhaust(d, envelope.ReasonFailed, cause)
		return
	}
	if err := e.send(d.Ctx, topic, pm); err != nil {
		if PermanentForMessage(err) {
			// The queue will never take this copy (too big, not allowed, terminated): no
			// retry can help, so the message goes to its dead-letter topic.
			e.cfg.Logger.Error("retry republish refused for good; dead-lettering instead", zap.String("topic", topic), zap.Error(err))
			e.Report(&SendError{Op: ErrRepublish, Topic: topic, Err: err}, d.Env, d.Msg)
			e.exhaust(d, envelope.ReasonFailed, joinErrors(cause, err))
			return
		}
		e.nackAfter(d, &SendError{Op: ErrRepublish, Topic: topic, Err: err}, cause)
		return
	}
	e.observe(d, Event{Kind: EventRetried, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Err: cause})
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, Settlement{Outcome: OutcomeRetried, Err: cause})
	}
}

// exhaust settles a message that used up its attempts: the annotated copy to the
// dead-letter topic, or an ack with a WARN when dead-lettering is off.
func (e *Engine) exhaust(d *Delivery, reason envelope.Reason, cause error) {
	dlt, on := e.deadLetterTopic(d)
	if !on {
		e.drop(d, reason, &ExhaustedError{Reason: reason, Attempts: d.Counted, Err: cause})
		return
	}
	if d.Env == nil {
		// A payload that is not an envelope (a Source with another codec): byte for byte,
		// with its properties.
		props := copyProps(d.Props)
		props[PropAttempts] = strconv.Itoa(d.Counted)
		delete(props, PropDelay) // the copy is not delayed
		pm := &apulsar.ProducerMessage{Payload: d.Msg.Payload(), Properties: props, Key: d.Msg.Key(), OrderingKey: d.Msg.OrderingKey()}
		e.deadLetter(d, pm, reason, cause)
		return
	}
	queue, _ := dlq.QueueName(d.Msg.Topic())
	info := envelope.DeadLetterInfo{Reason: reason, Cause: cause, Queue: queue, Attempts: d.Counted}
	cp := d.Env.ToDeadLetter(info)
	body, err := cp.Encode()
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	props := copyProps(d.Props)
	routed, hasRouted := props[PropJob]
	maps.Copy(props, ProjectProperties(cp))
	if hasRouted && !envelope.IsBlank(routed) {
		props[PropJob] = routed // the routing decision survives the dead-letter topic
	}
	delete(props, PropDelay) // the copy is not delayed
	pm := &apulsar.ProducerMessage{Payload: body, Properties: props, Key: d.Msg.Key(), OrderingKey: d.Msg.OrderingKey()}
	e.deadLetterFit(d, pm, info, reason, cause)
}

// deadLetterFit writes a built dead-letter copy that may be too large for the broker: a
// copy over MaxMessageSize, or one the broker refuses as too big, is replaced by a
// truncated, marked copy of the original payload (envelope.TruncatedCopy) that fits, which
// is reported (ERROR log, *TruncatedError to the error hook, EventTruncated) and written.
func (e *Engine) deadLetterFit(d *Delivery, pm *apulsar.ProducerMessage, info envelope.DeadLetterInfo, reason envelope.Reason, cause error) {
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
func (e *Engine) truncate(d *Delivery, pm *apulsar.ProducerMessage, info envelope.DeadLetterInfo, limit int, cause error) bool {
	dlt, _ := e.deadLetterTopic(d)
	body, err := envelope.TruncatedCopy(d.Msg.Payload(), info, limit)
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return false
	}
	terr := &TruncatedError{Topic: dlt, FullSize: len(pm.Payload), Limit: limit, OriginalSize: len(d.Msg.Payload())}
	e.cfg.Logger.Error("dead-letter copy too large; writing a truncated copy", zap.String("topic", d.Msg.Topic()),
		zap.String("dead_letter_topic", dlt), zap.Int("size", terr.FullSize), zap.Int("limit", limit),
		zap.Int("original_size", terr.OriginalSize))
	e.Report(terr, d.Env, d.Msg)
	e.health.warn(terr.Error())
	e.observe(d, Event{Kind: EventTruncated, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Reason: info.Reason, Err: terr})
	pm.Payload = body
	return true
}

// deadLetter writes pm to the message's dead-letter topic and acks the original once the
// write succeeded; a failed write is negatively acknowledged, never acknowledged. With
// dead-lettering off the message is acked and the drop reported.
func (e *Engine) deadLetter(d *Delivery, pm *apulsar.ProducerMessage, reason envelope.Reason, cause error) {
	e.deadLetterWith(d, pm, reason, cause, nil)
}

// deadLetterWith is deadLetter with a second chance: when the write fails and again(err)
// says so (having changed pm), it is tried once more.
func (e *Engine) deadLetterWith(d *Delivery, pm *apulsar.ProducerMessage, reason envelope.Reason, cause error, again func(error) bool) {
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
	if err := e.ensureRetention(d.Ctx, d.Msg.Topic(), dlt); err != nil {
		e.settleResult(err)
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	err := e.send(d.Ctx, dlt, pm)
	if err != nil && again != nil && again(err) {
		err = e.send(d.Ctx, dlt, pm)
	}
	if d.finished {
		return // again settled it (a copy that cannot be built is nacked)
	}
	if err != nil {
		e.nackAfter(d, &SendError{Op: ErrDeadLetterWrite, Topic: dlt, Err: err}, cause)
		return
	}
	e.cfg.Logger.Info("message dead-lettered", zap.String("topic", d.Msg.Topic()), zap.String("dead_letter_topic", dlt),
		zap.String("reason", string(reason)), zap.Int("attempt", d.Counted))
	e.observe(d, Event{Kind: EventDeadLettered, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Reason: reason, Err: cause})
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, Settlement{Outcome: OutcomeDeadLettered, Reason: reason, Err: cause})
	}
}

// ensureRetention makes sure the retention subscription of dlt exists, once per topic.
func (e *Engine) ensureRetention(ctx context.Context, topic, dlt string) error {
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

// drop acknowledges a message nobody handled, with a WARN and an error report.
func (e *Engine) drop(d *Delivery, reason envelope.Reason, err error) {
	e.cfg.Logger.Warn("message dropped: dead-lettering is off", zap.String("topic", d.Msg.Topic()),
		zap.String("urn", d.URN), zap.String("reason", string(reason)), zap.Int("attempt", d.Counted), zap.Error(err))
	if _, isExhausted := err.(*ExhaustedError); isExhausted { //nolint:errorlint // built by the caller, never wrapped
		e.Report(err, d.Env, d.Msg)
	}
	e.observe(d, Event{Kind: EventDropped, Topic: d.Msg.Topic(), URN: d.URN, Attempt: d.Counted, Reason: reason, Err: err})
	if aerr := e.ack(d); aerr == nil {
		e.finish(d, Settlement{Outcome: OutcomeDropped, Reason: reason, Err: err})
	}
}

// deadLetterTopic returns the message's dead-letter topic, and false when dead-lettering
// is off for its queue (or its topic name cannot be parsed, which is logged).
func (e *Engine) deadLetterTopic(d *Delivery) (string, bool) {
	dlt, on, err := e.cfg.DeadLetter.TopicFor(d.Msg.Topic())
	if err != nil {
		e.cfg.Logger.Error("cannot name the dead-letter topic", zap.String("topic", d.Msg.Topic()), zap.Error(err))
		return "", false
	}
	return dlt, on
}

// DeadLetterOn reports whether the delivery's queue dead-letters.
func (e *Engine) DeadLetterOn(d *Delivery) bool {
	_, on := e.deadLetterTopic(d)
	return on
}

func (e *Engine) send(ctx context.Context, topic string, pm *apulsar.ProducerMessage) error {
	s, release, err := e.senders.get(ctx, topic)
	if err != nil {
		e.settleResult(err)
		return err
	}
	_, err = s.Send(ctx, pm)
	if err != nil && ctx.Err() == nil && ProducerBroken(err) {
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

func (e *Engine) ack(d *Delivery) error {
	if err := e.settler.Ack(d.Msg); err != nil {
		e.cfg.Logger.Warn("ack failed", zap.String("topic", d.Msg.Topic()), zap.Error(err))
		serr := &SettleError{Err: err}
		e.health.failing("ack", err)
		e.Report(serr, d.Env, d.Msg)
		e.finish(d, Settlement{Outcome: OutcomeNacked, Err: serr})
		if e.cfg.ExtraSettle != nil {
			e.cfg.ExtraSettle(serr)
		}
		return serr
	}
	e.health.ok("ack")
	d.acked = true
	return nil
}

// settleResult records the outcome of a settlement write in the health state.
func (e *Engine) settleResult(err error) {
	if err != nil {
		e.health.failing("settlement write", err)
	} else {
		e.health.ok("settlement write")
	}
	if e.cfg.ExtraSettle != nil {
		e.cfg.ExtraSettle(err)
	}
}

// nackAfter negatively acknowledges after a failed republish or dead-letter write, and
// reports the send error joined with the failure being settled.
func (e *Engine) nackAfter(d *Delivery, serr *SendError, cause error) {
	e.settler.Nack(d.Msg)
	e.cfg.Logger.Warn("settlement send failed; message negatively acknowledged", zap.String("topic", d.Msg.Topic()),
		zap.String("to", serr.Topic), zap.Error(serr))
	var err error = serr
	if cause != nil {
		err = joinErrors(cause, serr)
	}
	e.Report(err, d.Env, d.Msg)
	e.finish(d, Settlement{Outcome: OutcomeNacked, Err: err})
}

func (e *Engine) mismatch(propURN, bodyURN string, d *Delivery) {
	if e.cfg.OnMismatch == nil {
		return
	}
	if perr := SafeCall("OnRoutingMismatch hook", func() { e.cfg.OnMismatch(propURN, bodyURN, d.Env, d.Msg) }); perr != nil {
		e.cfg.Logger.Warn("routing mismatch hook panicked", zap.Error(perr))
	}
}

// Report calls the error hook, recovering a panic.
func (e *Engine) Report(err error, env *envelope.Envelope, msg apulsar.Message) {
	if e.cfg.OnError == nil {
		return
	}
	if perr := SafeCall("OnError hook", func() { e.cfg.OnError(err, env, msg) }); perr != nil {
		e.cfg.Logger.Error("error hook panicked", zap.Error(perr))
	}
}

// Observe sends ev to the observer with the delivery's context (d may be nil).
func (e *Engine) Observe(d *Delivery, ev Event) { e.observe(d, ev) }

func (e *Engine) observe(d *Delivery, ev Event) {
	if e.cfg.Observer == nil {
		return
	}
	ev.Subscription = e.cfg.Subscription
	if d != nil {
		ev.Context = d.Ctx
	}
	if perr := SafeCall("observer", func() { e.cfg.Observer.Observe(ev) }); perr != nil {
		e.cfg.Logger.Error("observer panicked", zap.Error(perr))
	}
}

// SafeCall runs f and returns its panic as a *PanicError.
func SafeCall(where string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: where, Value: r}
		}
	}()
	f()
	return nil
}

func copyProps(p map[string]string) map[string]string {
	out := make(map[string]string, len(p)+2)
	maps.Copy(out, p)
	return out
}

// Close stops the delayed negative acks (nacking their messages at once) and closes the
// producers the engine created, after waiting for any creation in progress.
func (e *Engine) Close() {
	e.timers.stop()
	e.senders.close()
	e.health.stopped()
}

// Health returns the engine's health.
func (e *Engine) Health() Health { return e.health.get() }

// SetReceiving records the outcome of a receive in the health state.
func (e *Engine) SetReceiving(err error) {
	if err != nil {
		e.health.failing("receive", err)
		return
	}
	e.health.ok("receive")
}

// SetFatal records a fatal failure: not live from now on.
func (e *Engine) SetFatal(err error) { e.health.fatal(err) }

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

// PermanentForMessage reports whether a send error means this message will never be taken
// by that topic, whatever is retried: a *apulsar.Error that retry.IsRetryable (the binding's
// one classifier) does not call retryable, other than the lifecycle results of a closed
// producer or client (which a fresh producer cures). Too big, invalid, not allowed,
// terminated topic, authorisation and fencing are permanent; timeouts, connection errors
// and a full queue are not.
func PermanentForMessage(err error) bool {
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
