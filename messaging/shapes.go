package messaging

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// The registrations of this file are the MicroProfile Reactive Messaging
// method shapes that have no per-message Go function: payload streams
// (ProducePayloads, SubscribePayloads, TransformPayloads), a generator of
// whole messages (GenerateMessage) and a message-level flat-map
// (FlatMapMessage).

// ProducePayloads registers p as the upstream of channel out, each payload
// wrapped in a new message without metadata or settlement (MP RM
// "@Outgoing Publisher<O> m()"). It is subscribed once at Start and cut at
// Shutdown. ProducePayloads takes no ack strategy.
func ProducePayloads[T any](r *Runtime, out string, p reactive.Publisher[T], o ...StageOption) {
	mustRuntime(r)
	mustFunc("publisher", p)
	opts := stageOpts(o)
	n := &node{shape: shapeProducePayloads, name: siteName("ProducePayloads", "", out, opts), out: newOutPort[T](out), opts: opts}
	n.output = func(_ context.Context, b *builder) (any, error) {
		pub, stop := entryGate(payloadMessages(p))
		b.entries = append(b.entries, stop)
		return pub, nil
	}
	r.register(n)
}

// payloadMessages wraps every payload of p in a new message.
func payloadMessages[T any](p reactive.Publisher[T]) reactive.Publisher[Message[T]] {
	return reactive.Map(p, func(v T) (Message[T], error) { return NewMessage(v), nil })
}

// entryGate puts an entry gate in front of src: src is subscribed once the gate
// has a subscriber, and stop cuts it (Shutdown step 2).
func entryGate[T any](src reactive.Publisher[Message[T]]) (pub reactive.Publisher[Message[T]], stop func()) {
	g := identityGate[Message[T]](nil)
	return connectLazily[Message[T]](g, func() { src.Subscribe(g) }), g.Stop
}

// GenerateMessage registers f as the upstream of channel out: f is called
// once per downstream request (never concurrently) and its message is sent
// as it is, with its metadata and its own Ack and Nack (MP RM
// "@Outgoing Message<O> m()"). io.EOF completes the stream; any other error,
// a panic or a nil message fails it. GenerateMessage takes no ack strategy.
func GenerateMessage[T any](r *Runtime, out string, f func(ctx context.Context) (Message[T], error), o ...StageOption) {
	mustRuntime(r)
	mustFunc("generate function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeGenerateMessage, name: siteName("GenerateMessage", "", out, opts), out: newOutPort[T](out), opts: opts}
	n.output = func(_ context.Context, b *builder) (any, error) {
		pub, stop := entryGate(generated(n.name, f, func(err error) { b.failed(n, err) }))
		b.entries = append(b.entries, stop)
		return pub, nil
	}
	r.register(n)
}

// generated is the publisher of GenerateMessage (and of Generate, with f
// wrapping payloads): one call of f per requested element.
func generated[T any](name string, f func(ctx context.Context) (Message[T], error), failed func(error)) reactive.Publisher[Message[T]] {
	return reactive.FromFunc(func(ctx context.Context) (Message[T], error) {
		var m Message[T]
		err := callSafely(name, func() (err error) { m, err = f(ctx); return err })
		if err == nil && isNilValue(m) {
			err = fmt.Errorf("%w from %s", ErrNilMessage, name)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				failed(err)
			}
			return nil, err
		}
		return m, nil
	})
}

// SubscribePayloads registers s as the subscriber of the payloads of
// channel in (MP RM "@Incoming Subscriber<I> m()"), subscribed once at
// Start; demand passes through untouched. Default ack: Post (the message is
// acked when OnNext returned); allowed: None, Pre (acked before OnNext),
// Post. A Cancel by s outside Shutdown makes the channel not live.
func SubscribePayloads[T any](r *Runtime, in string, s reactive.Subscriber[T], o ...StageOption) {
	mustRuntime(r)
	mustFunc("subscriber", s)
	opts := stageOpts(o)
	n := &node{shape: shapeSubscribePayloads, name: siteName("SubscribePayloads", in, "", opts), in: newInPort[T](in), opts: opts}
	n.consume = func(ctx context.Context, b *builder, up any) {
		w := &ackSubscriber[T]{s: payloadSubscriber[T]{s: s}, ack: n.ack, obs: b.state(in), who: "SubscribePayloads subscriber", settle: func(m Message[T]) {
			b.acked(n, m.Ack(ctx))
		}}
		b.cancels = append(b.cancels, w.cancel)
		asPub[T](up).Subscribe(w)
	}
	r.register(n)
}

// payloadSubscriber passes the payloads of messages to s.
type payloadSubscriber[T any] struct{ s reactive.Subscriber[T] }

func (p payloadSubscriber[T]) OnSubscribe(s reactive.Subscription) { p.s.OnSubscribe(s) }
func (p payloadSubscriber[T]) OnNext(m Message[T])                 { p.s.OnNext(m.Payload()) }
func (p payloadSubscriber[T]) OnError(err error)                   { p.s.OnError(err) }
func (p payloadSubscriber[T]) OnComplete()                         { p.s.OnComplete() }

// TransformPayloads registers f, called once at Start with the stream of
// the payloads of in; the payloads of the publisher it returns are sent to
// out in new messages without metadata (MP RM "Publisher<O> m(Publisher<I>)"
// and "@Incoming @Outgoing Processor<I,O> m()": pass a reactive.Processor p
// as func(up) { up.Subscribe(p); return p }). A payload stream carries no
// settlement, so Post is impossible. Default ack: Pre (acked as the message
// enters f's stream); allowed: None, Pre.
func TransformPayloads[I, O any](r *Runtime, in, out string, f func(reactive.Publisher[I]) reactive.Publisher[O], o ...StageOption) {
	mustRuntime(r)
	mustFunc("transform function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeTransformPayloads, name: siteName("TransformPayloads", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		up, err := b.input(ctx, n)
		if err != nil {
			return nil, err
		}
		p, err := newTransformPayloadsProcessor(n.name, n.ack, b.state(in), func(m Message[I]) {
			b.acked(n, m.Ack(ctx))
		}, f)
		if err != nil {
			return nil, err
		}
		return connectLazily[Message[O]](p, func() { asPub[I](up).Subscribe(p) }), nil
	}
	r.register(n)
}

func newTransformPayloadsProcessor[I, O any](name string, ack AckStrategy, obs *chanState, ackFn func(Message[I]), f func(reactive.Publisher[I]) reactive.Publisher[O]) (*opProcessor[I, O], error) {
	return newTransformProcessor(name, ack, obs, ackFn, func(up reactive.Publisher[Message[I]]) reactive.Publisher[Message[O]] {
		pub := f(reactive.Map(up, func(m Message[I]) (I, error) { return m.Payload(), nil }))
		if pub == nil {
			return nil
		}
		return payloadMessages(pub)
	})
}

// FlatMapMessage registers a processor mapping every message of in to a
// publisher of messages sent to out, one publisher after the other (MP RM
// "Publisher<Message<O>> m(Message<I>)"). Default ack: Manual (f settles the
// input, e.g. by deriving the outputs with WithPayload, or acks it itself;
// a panic or a nil publisher of f nacks the unsettled input); allowed: None,
// Pre, Manual.
func FlatMapMessage[I, O any](r *Runtime, in, out string, f func(ctx context.Context, m Message[I]) reactive.Publisher[Message[O]], o ...StageOption) {
	mustRuntime(r)
	mustFunc("flatMap function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeFlatMapMessage, name: siteName("FlatMapMessage", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		up, err := b.input(ctx, n)
		if err != nil {
			return nil, err
		}
		p := newFlatMapMessageProcessor(ctx, b.env(n), b.state(in), f)
		return connectLazily[Message[O]](p, func() { asPub[I](up).Subscribe(p) }), nil
	}
	r.register(n)
}

func newFlatMapMessageProcessor[I, O any](ctx context.Context, s stageEnv, obs *chanState, f func(ctx context.Context, m Message[I]) reactive.Publisher[Message[O]]) *opProcessor[I, O] {
	head := newGate(func(m Message[I]) (Message[I], bool) {
		if s.ack == AckPre {
			s.settled("ack", m.Ack(ctx))
		}
		return m, true
	}, nil, obs)
	tail := reactive.FlatMap[Message[I], Message[O]](head, func(m Message[I]) reactive.Publisher[Message[O]] {
		var pub reactive.Publisher[Message[O]]
		err := callSafely(s.name, func() error { pub = f(MessageContext(ctx, m.Metadata()), m); return nil })
		if err == nil && isNilValue(pub) {
			err = fmt.Errorf("%w: %s returned a nil publisher", ErrNilArgument, s.name)
		}
		if err != nil {
			s.failed(err)
			if s.ack == AckManual {
				s.settled("nack", nackFor(ctx, m, err))
			}
			return reactive.Empty[Message[O]]()
		}
		return pub
	})
	return &opProcessor[I, O]{head: head, tail: tail}
}
