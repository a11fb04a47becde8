package pulsar

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// Hooks are the functions a [Consumer], a [Publisher] and the connector's sources and sinks
// (package pulsar/connector) call as their work goes on: for tracing, metrics, error
// reports and handler middleware, without the SDK importing any of them. Set the fields you
// need and leave the others nil, as with net/http/httptrace.ClientTrace; give them with
// [WithHooks]. A field that does not apply to what it is given to (Delivery to a
// publisher, say) is never called.
//
// Hooks are called synchronously from the goroutine doing the work, possibly from several
// goroutines at once: they must be fast and safe for concurrent use. A panic in a hook is
// recovered and logged, and changes nothing else (a Delivery hook that panics leaves the
// delivery with the context it had, a Publish hook that panics leaves the message as it
// was).
type Hooks struct {
	// Delivery is called for every received message, before the schema-version gate, with
	// the consumer's context (under [Consumer.Next], the ctx given to Next), which names
	// the consumer ([ConsumerInfoFrom]: its subscription, known before anything else runs). It returns the
	// context the delivery runs with (the handler, the Handler hooks, the settlement writes
	// and the Context of the delivery's events; nil keeps ctx), and a function called
	// exactly once with the delivery's settlement (nil for none): an [Event] whose Kind is
	// [EventAcked], [EventRetried], [EventDeadLettered], [EventDropped] or [EventNacked].
	// Tracing opens a consumer span here and ends it in the settlement.
	Delivery func(ctx context.Context, msg apulsar.Message) (context.Context, func(settled Event))

	// Handler wraps every handler registered with [Handle]: it receives the context, the
	// envelope and the Pulsar message of every delivery before the handler does, and the
	// handler's outcome (the returned error, possibly a [DeadLetter] or [RetryAfter]
	// outcome) on the way back. A wrapper that returns without calling next decides the
	// outcome itself: nil acknowledges the message, an error settles it as a failed
	// delivery. Idempotency and payload validation are written as Handler hooks (packages
	// idempotency and schema).
	Handler func(next HandlerFunc) HandlerFunc

	// Event receives every [Event] of the consume pipeline: each step of a delivery (its
	// receipt, the handler's result, a poison body, a gate rejection, an unknown URN, a
	// routing mismatch, a truncated dead-letter copy), each settlement (acked, retried,
	// dead-lettered, dropped, nacked: the same Event the Delivery hook's function gets,
	// given to Event first), and the failures outside a delivery ([EventError]). Metrics
	// count them; an application reacts to the failures it cares about here.
	Event func(Event)

	// Publish is called for every message a [Publisher] (or the connector's sink) sends,
	// and for every retry republish and dead-letter copy a [Consumer] (or the connector's
	// source) writes, after the message is built and before it is handed to the producer,
	// with the context of the call (for a consumer's write, the delivery's context). It
	// returns a function called exactly once with the outcome of the send (nil for none).
	// Tracing opens a producer span here and injects its context into the message's
	// properties. The message is the publisher's to reuse once the outcome function has
	// returned: a hook must not keep m or m.Message beyond that.
	Publish func(ctx context.Context, m *OutgoingMessage) func(id apulsar.MessageID, err error)
}

// ConsumerInfo names the consumer a delivery belongs to, for the hooks and handlers that
// need it before any [Event] says so (a tracing sampler deciding at span start, say): read
// it with [ConsumerInfoFrom].
type ConsumerInfo struct {
	// Subscription is the subscription's name ("" for a wrapped consumer without
	// [WithSubscription]).
	Subscription string
	// Type is the subscription's type as declared with [WithSubscription] (Exclusive when
	// undeclared).
	Type apulsar.SubscriptionType
}

// consumerInfoKey is the context key of a delivery's [ConsumerInfo].
type consumerInfoKey struct{}

// ConsumerInfoFrom returns the consumer of the delivery whose context ctx is, or derives
// from: the context a [Hooks] Delivery function is given, a handler's and a Handler hook's
// context, and a pulled [Delivery]'s Context. ok is false for any other context.
func ConsumerInfoFrom(ctx context.Context) (info ConsumerInfo, ok bool) {
	if ctx == nil {
		return ConsumerInfo{}, false
	}
	p, ok := ctx.Value(consumerInfoKey{}).(*ConsumerInfo)
	if !ok || p == nil {
		return ConsumerInfo{}, false
	}
	return *p, true
}

// withConsumerInfo returns ctx carrying info (ConsumerInfoFrom), or ctx itself when it
// already carries it.
func withConsumerInfo(ctx context.Context, info *ConsumerInfo) context.Context {
	if p, _ := ctx.Value(consumerInfoKey{}).(*ConsumerInfo); p == info {
		return ctx
	}
	return context.WithValue(ctx, consumerInfoKey{}, info)
}

// OutgoingMessage is a message about to be sent by a [Publisher] (or the connector's sink),
// as a [Hooks] Publish function sees it.
type OutgoingMessage struct {
	// Topic is the destination topic.
	Topic string
	// Envelope is the envelope being sent (nil for a sink payload that is not an envelope);
	// for a consumer's retry or dead-letter write it is the delivery's envelope, which the
	// copy repeats with another attempts count and, for a dead letter, its annotations
	// (nil for poison). Do not modify it.
	Envelope *envelope.Envelope
	// Partitioned is true when Topic is a partitioned topic, whose producer picks the
	// partition after the hooks ran: the outcome's MessageID names it (PartitionIdx). A
	// [Publisher] asks the broker once, at [NewPublisher] and only with a Publish hook; a
	// Publisher over a wrapped producer cannot tell and says false, and so do the
	// connector's sink and a consumer's dead-letter write. A consumer's retry is true when the message came from a
	// partition.
	Partitioned bool
	// Message is the Pulsar message: its Properties already hold the bq-* projection and
	// the caller's headers. A hook may add properties (a W3C traceparent, say); a property
	// already present was given by the caller and should be left as it is.
	Message *apulsar.ProducerMessage
}

// WithHooks adds h to a consumer's or a publisher's hooks (see [Hooks]). Several WithHooks
// compose, field by field, in the order given: Delivery functions nest (the first is called
// first and its context passed to the next; their settlement functions run in reverse
// order), Handler wrappers nest with the first outermost (WithHooks(a), WithHooks(b) runs
// a's, then b's, then the handler, and the outcome goes back through b's, then a's), Event
// functions are called one after the other, and Publish functions are called in order and
// their outcome functions in reverse order. Nil fields are skipped. Default: none.
func WithHooks(h Hooks) CommonOption {
	return commonSet(nil, func(c *commonConfig) { c.hooks = append(c.hooks, h) })
}

// hookSet is the one place the package calls hooks: the non-nil fields of every [Hooks]
// given, in order, each call recovered from a panic. A nil *hookSet has no hooks.
type hookSet struct {
	delivery []func(context.Context, apulsar.Message) (context.Context, func(Event))
	handler  []func(HandlerFunc) HandlerFunc
	event    []func(Event)
	publish  []func(context.Context, *OutgoingMessage) func(apulsar.MessageID, error)
	logger   *zap.Logger
}

// newHookSet collects the fields of hs; it returns nil when none is set, so that the hot
// paths test one pointer.
func newHookSet(hs []Hooks, logger *zap.Logger) *hookSet {
	s := &hookSet{logger: logger}
	for _, h := range hs {
		if h.Delivery != nil {
			s.delivery = append(s.delivery, h.Delivery)
		}
		if h.Handler != nil {
			s.handler = append(s.handler, h.Handler)
		}
		if h.Event != nil {
			s.event = append(s.event, h.Event)
		}
		if h.Publish != nil {
			s.publish = append(s.publish, h.Publish)
		}
	}
	if len(s.delivery)+len(s.handler)+len(s.event)+len(s.publish) == 0 {
		return nil
	}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	return s
}

// recovered runs f, logging its panic as what panicked; it reports whether f returned.
func (s *hookSet) recovered(what string, f func()) bool {
	if perr := safeCall(what, f); perr != nil {
		s.logger.Error(what+" panicked", zap.Error(perr))
		return false
	}
	return true
}

// publishes reports whether a Publish hook is set.
func (s *hookSet) publishes() bool { return s != nil && len(s.publish) > 0 }

// observing reports whether an Event hook is set (so that a caller can skip building an
// event, or reading the clock, for nobody).
func (s *hookSet) observing() bool { return s != nil && len(s.event) > 0 }

// emit hands ev to every Event hook.
func (s *hookSet) emit(ev Event) {
	if s == nil {
		return
	}
	for _, f := range s.event {
		s.recovered("event hook", func() { f(ev) })
	}
}

// startDelivery runs the Delivery hooks, each with the context the one before returned,
// appends their settlement functions to fins, and returns the last context.
func (s *hookSet) startDelivery(ctx context.Context, msg apulsar.Message, fins []func(Event)) (context.Context, []func(Event)) {
	if s == nil {
		return ctx, fins // small enough to be inlined: a consumer without Delivery hooks pays no call
	}
	return s.runDelivery(ctx, msg, fins)
}

// runDelivery is startDelivery's work when Delivery hooks are set.
func (s *hookSet) runDelivery(ctx context.Context, msg apulsar.Message, fins []func(Event)) (context.Context, []func(Event)) {
	for _, h := range s.delivery {
		next, fin, perr := callDelivery(ctx, h, msg)
		if perr != nil {
			s.logger.Error("delivery hook panicked", zap.Error(perr))
			continue
		}
		if next != nil {
			ctx = next //nolint:fatcontext // the hooks nest by design: each wraps the context of the one before
		}
		if fin != nil {
			fins = append(fins, fin)
		}
	}
	return ctx, fins
}

// callDelivery calls a Delivery hook, returning its panic as a *PanicError.
func callDelivery(ctx context.Context, h func(context.Context, apulsar.Message) (context.Context, func(Event)),
	msg apulsar.Message,
) (next context.Context, fin func(Event), err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: "delivery hook", Value: r}
		}
	}()
	next, fin = h(ctx, msg)
	return next, fin, nil
}

// settled reports a delivery's settlement: to the Event hooks, then to the settlement
// functions of its Delivery hooks, in reverse order.
func (s *hookSet) settled(ev Event, fins []func(Event)) {
	if s == nil {
		return
	}
	s.emit(ev)
	for i := len(fins) - 1; i >= 0; i-- {
		f := fins[i]
		s.recovered("delivery hook's settlement", func() { f(ev) })
	}
}

// wrap wraps h in the Handler hooks, the first outermost.
func (s *hookSet) wrap(h HandlerFunc) HandlerFunc {
	if s == nil {
		return h
	}
	for i := len(s.handler) - 1; i >= 0; i-- {
		h = s.handler[i](h)
	}
	return h
}

// publishing calls the Publish hooks on m in order and returns the function that calls
// their outcome functions in reverse order (nil when there is nothing to call).
func (s *hookSet) publishing(ctx context.Context, m *OutgoingMessage) func(apulsar.MessageID, error) {
	if s == nil || len(s.publish) == 0 {
		return nil
	}
	var dones []func(apulsar.MessageID, error)
	for _, h := range s.publish {
		var done func(apulsar.MessageID, error)
		if s.recovered("publish hook", func() { done = h(ctx, m) }) && done != nil {
			dones = append(dones, done)
		}
	}
	if len(dones) == 0 {
		return nil
	}
	return func(id apulsar.MessageID, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			s.recovered("publish hook's outcome", func() { dones[i](id, err) })
		}
	}
}

// publishHooks returns the hook set of a publisher: hs's Publish hooks, nil without one.
func publishHooks(hs []Hooks, logger *zap.Logger) *hookSet {
	s := newHookSet(hs, logger)
	if s == nil || len(s.publish) == 0 {
		return nil
	}
	return s
}
