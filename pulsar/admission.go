package pulsar

import (
	"context"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// Delivery is one received message on its way through admission and settlement: what
// [Consumer.Next] returns, and what [Consumer.Run] hands to a handler as its arguments. It
// is settled exactly once, by one of its methods ([Delivery.Ack], [Delivery.Fail],
// [Delivery.RetryAfter], [Delivery.DeadLetter], [Delivery.Nack]); a second settlement
// returns [ErrSettled]. Its methods are safe for concurrent use.
type Delivery struct {
	eng   *engine
	owner *Consumer // the consumer whose Next returned it; nil under Run
	msg   apulsar.Message
	props map[string]string  // the message's properties (the client's map: never modified)
	env   *envelope.Envelope // decoded, attempts set to reconciled; nil for poison
	// poison is the classification error when env is nil.
	poison error
	// urn is the routing URN (a usable bq-job property wins over the body's URN).
	urn string
	// reconciled is the number of earlier deliveries; counted = reconciled + 1.
	reconciled, counted int
	// ctx is the delivery's context (the one the delivery hooks returned). It lives as long
	// as the delivery, which is what a context in a struct is for here: the settlement that
	// follows the handler runs with it.
	ctx context.Context //nolint:containedctx // delivery-scoped, see above

	delay      time.Duration     // a retry delay overriding the policy's backoff
	extraProps map[string]string // added to a republished or dead-lettered copy
	finishers  []func(Event)
	finished   bool
	acked      bool
	claimed    atomic.Bool // a settlement method was called (pulled deliveries only)
	failure    error       // the settlement's failure, when it ended nacked

	// txn is the delivery's transaction (WithTransactions), opened at txnStart; nil without.
	txn      apulsar.Transaction
	txnStart time.Time
	txns     *txnState // the publishes held back by txn (nil without)
}

// deliverySlot keeps the last delivery of one goroutine of Run (the receive loop, or one
// worker of the pool) for that goroutine's next message. A delivery whose settlement
// acknowledged it synchronously is held by nothing else, so it is reused rather than left to
// the garbage collector. A slot belongs to its goroutine alone: it has no lock, and it is
// cheaper than a sync.Pool, whose Get and Put pin the goroutine to its processor.
type deliverySlot struct{ spare *Delivery }

// take returns the slot's spare delivery, or a new one (always a new one for a nil slot).
func (s *deliverySlot) take() *Delivery {
	if s == nil || s.spare == nil {
		return new(Delivery)
	}
	d := s.spare
	s.spare = nil
	return d
}

// keep gives d back to s for reuse. The caller must hold the only reference: call it after
// a synchronous settlement that acknowledged the message, never for a delivery a timer, a
// hook or a reactive message may still use. A delivery that is not acknowledged, or not
// finished, is left to the garbage collector.
func (s *deliverySlot) keep(d *Delivery) {
	if s == nil || d == nil || !d.acked || !d.finished {
		return
	}
	clear(d.finishers)
	fins := d.finishers[:0]
	*d = Delivery{}
	d.finishers = fins
	s.spare = d
}

// failOptions adjust the settlement of a failed delivery.
type failOptions struct {
	// Delay replaces the policy's backoff for the retry (0: the policy's).
	Delay time.Duration
	// Properties are added to a republished or dead-lettered copy.
	Properties map[string]string
}

// admit runs the contract's admission on msg: the delivery hooks, the schema-version gate,
// classification, attempts reconciliation and routing. It returns nil when the message was
// settled here (a gate rejection or, with SettleRejects, poison).
// With owner set (a pulled delivery), the delivery is registered with it before anything
// can settle it; without, it comes from slot (see deliverySlot; nil for a new one).
func (e *engine) admit(ctx context.Context, msg apulsar.Message, owner *Consumer, slot *deliverySlot) *Delivery {
	var d *Delivery
	if owner == nil {
		d = slot.take()
		fins := d.finishers[:0]
		d.eng, d.owner, d.msg, d.props, d.finishers = e, nil, msg, msg.Properties(), fins
	} else {
		// Pulled: the caller keeps it as long as it likes, so it is never recycled.
		d = &Delivery{eng: e, owner: owner, msg: msg, props: msg.Properties()}
		owner.pulled(d)
	}
	if owner != nil {
		ctx = withConsumerInfo(ctx, e.info) // Run's ctx carries it already (see process)
	}
	d.ctx, d.finishers = e.cfg.Hooks.startDelivery(ctx, msg, d.finishers)
	e.observe(d, Event{Kind: EventReceived})
	if e.cfg.Txns != nil && !e.openTxn(d) {
		return nil
	}

	if e.cfg.Gate {
		if v, ok := d.props[PropSchemaVersion]; ok {
			if err := GateVerdict(v, true); err != nil {
				e.gateReject(d, err)
				return nil
			}
		}
	}
	attemptsProp, hasAttempts := d.props[PropAttempts]
	env, perr := envelope.Classify(msg.Payload())
	if perr != nil {
		d.reconciled, d.counted = Reconcile(attemptsProp, hasAttempts, 0, msg.RedeliveryCount())
		d.poison = perr
		if e.cfg.SettleRejects {
			e.poisoned(d, perr)
			return nil
		}
		return d
	}
	d.reconciled, d.counted = Reconcile(attemptsProp, hasAttempts, env.Attempts, msg.RedeliveryCount())
	if env.Attempts != d.reconciled {
		env = env.WithAttempts(d.reconciled)
	}
	d.env = env
	bodyURN := env.URN()
	d.urn = bodyURN
	if pj, ok := binding.RoutedJob(d.props); ok {
		d.urn = pj
		if e.observing() && pj != bodyURN { // the comparison only serves the event
			e.observe(d, Event{Kind: EventRoutingMismatch})
		}
	}
	return d
}

// finish reports the delivery's settlement once: ev, a settlement's Event (by pointer: the
// common case, an ack nobody observes, copies nothing), to the Event hooks and to the
// settlement functions of the Delivery hooks.
func (e *engine) finish(d *Delivery, ev *Event) {
	if d.finished {
		return
	}
	d.finished = true
	if d.txn != nil && !d.acked {
		e.abortTxn(d.ctx, d) // a settlement that does not acknowledge ends its transaction unfulfilled
	}
	if ev.Kind == EventNacked {
		d.failure = ev.Err
	}
	if d.owner != nil {
		defer d.owner.settledPull(d)
	}
	if e.cfg.Hooks == nil {
		return
	}
	e.cfg.Hooks.settled(e.complete(d, *ev), d.finishers)
}

// handled records a handler's result (its event and, for a failure, a log line) before
// settlement.
func (e *engine) handled(d *Delivery, err error, latency time.Duration) {
	if _, warn := directiveOf(err); err == nil || warn { // a warning is a success, reported by its settlement
		e.observe(d, Event{Kind: EventHandled, Latency: latency})
		return
	}
	e.observe(d, Event{Kind: EventFailed, Latency: latency, Err: err})
	e.cfg.Logger.Warn("handler failed", zap.String("urn", d.urn), zap.Int("attempt", d.counted),
		zap.String("message_id", messageID(d)), zap.Error(err))
}

// observing reports whether an Event hook is set (so that a front can skip the clock).
func (e *engine) observing() bool { return e.cfg.Hooks.observing() }

func messageID(d *Delivery) string {
	if d.env != nil {
		return d.env.Meta.ID
	}
	return ""
}
