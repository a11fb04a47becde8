package messaging

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

type shape int

const (
	shapeConsume shape = iota + 1
	shapeConsumeMessage
	shapeSubscribe
	shapeProcess
	shapeProcessMessage
	shapeFlatMap
	shapeTransform
	shapeProduce
	shapeGenerate
	shapeChannel
	shapeEmitter
	shapeProducePayloads
	shapeGenerateMessage
	shapeSubscribePayloads
	shapeTransformPayloads
	shapeFlatMapMessage
)

// allowedAcks and defaultAck are the acknowledgement table of the stage
// shapes (see the package doc): payload functions default to a strategy in
// which the runtime settles, message functions to Manual (the MicroProfile
// Reactive Messaging 2.0 rule). Shapes without an entry (no input) refuse
// every WithAck at Start.
var (
	allowedAcks = map[shape][]AckStrategy{
		shapeSubscribePayloads: {AckNone, AckPre, AckPost},
		shapeTransformPayloads: {AckNone, AckPre},
		shapeFlatMapMessage:    {AckNone, AckPre, AckManual},
		shapeConsume:           {AckNone, AckPre, AckPost},
		shapeConsumeMessage:    {AckNone, AckPre, AckPost, AckManual},
		shapeSubscribe:         {AckNone, AckPre, AckPost, AckManual},
		shapeProcess:           {AckNone, AckPre, AckPost},
		shapeProcessMessage:    {AckNone, AckPre, AckManual},
		shapeFlatMap:           {AckNone, AckPre},
		shapeTransform:         {AckNone, AckPre, AckManual},
		shapeChannel:           {AckManual},
	}
	defaultAck = map[shape]AckStrategy{
		shapeConsume: AckPost, shapeConsumeMessage: AckManual, shapeSubscribe: AckManual,
		shapeProcess: AckPost, shapeProcessMessage: AckManual, shapeFlatMap: AckPre,
		shapeTransform: AckManual, shapeChannel: AckManual,
		shapeSubscribePayloads: AckPost, shapeTransformPayloads: AckPre, shapeFlatMapMessage: AckManual,
	}
)

// inPort is a typed stage input seen through type-erased closures: the
// values are reactive.Publisher[Message[T]] of the port's T.
type inPort struct {
	channel string
	typ     reflect.Type
	merge   func(ps []any) any
	// fromSource decodes a connector source for this input.
	fromSource func(ctx context.Context, b *builder, src reactive.Publisher[Message[[]byte]], c Codec) any
}

// outPort is a typed stage output.
type outPort struct {
	channel string
	typ     reflect.Type
	// toSink encodes the port's publisher pub for a connector sink.
	toSink func(ctx context.Context, b *builder, pub any, c Codec) reactive.Publisher[Message[[]byte]]
}

type node struct {
	shape shape
	name  string
	in    *inPort
	out   *outPort
	opts  stageOptions
	ack   AckStrategy // resolved at Start
	// output builds the publisher of a producer or processor.
	output func(ctx context.Context, b *builder) (any, error)
	// consume subscribes a consumer to its input publisher.
	consume func(ctx context.Context, b *builder, up any)
}

func asPub[T any](v any) reactive.Publisher[Message[T]] {
	p, ok := v.(reactive.Publisher[Message[T]])
	if !ok {
		panic(fmt.Errorf("messaging: internal: %T is not a publisher of Message[%v]", v, reflect.TypeFor[T]()))
	}
	return p
}

func newInPort[T any](ch string) *inPort {
	return &inPort{
		channel: ch, typ: reflect.TypeFor[T](),
		merge: func(ps []any) any {
			typed := make([]reactive.Publisher[Message[T]], len(ps))
			for i, p := range ps {
				typed[i] = asPub[T](p)
			}
			return reactive.Merge(typed...)
		},
		fromSource: func(ctx context.Context, b *builder, src reactive.Publisher[Message[[]byte]], c Codec) any {
			t := reflect.TypeFor[T]()
			g := newGate(func(m Message[[]byte]) (Message[T], bool) {
				v, err := decode[T](c, m.Payload(), t)
				if err != nil {
					b.rt.log.Warn("messaging: decode failed", zap.String("channel", ch), zap.Error(err))
					_ = m.Nack(ctx, fmt.Errorf("%w: channel %s: %w", ErrDecode, ch, err), ToDeadLetter())
					return nil, false
				}
				return trackMessage(b.rt.track, m, v), true
			}, nackDropped[T](ctx), nil)
			b.entries = append(b.entries, g.Stop)
			return connectLazily[Message[T]](g, func() { src.Subscribe(g) })
		},
	}
}

func decode[T any](c Codec, raw []byte, t reflect.Type) (v T, err error) {
	if _, ok := c.(BytesCodec); ok { // the identity: no boxing through any
		if p, ok := any(&v).(*[]byte); ok {
			*p = raw
			return v, nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: codec %s: %v", reactive.ErrPanic, c.Name(), r)
		}
	}()
	d, err := c.Decode(raw, t)
	if err != nil {
		return v, err
	}
	v, ok := d.(T)
	if !ok {
		return v, fmt.Errorf("codec %s returned %T, want %v", c.Name(), d, t)
	}
	return v, nil
}

// encodePayload encodes v; the bytes codec of a []byte is the identity.
func encodePayload[T any](c Codec, v T) ([]byte, error) {
	if _, ok := c.(BytesCodec); ok {
		if p, ok := any(&v).(*[]byte); ok {
			return *p, nil
		}
	}
	return encode(c, v)
}

// encodeWithMetadata encodes v, with the metadata items of a [MetadataEncoder] codec.
func encodeWithMetadata[T any](c Codec, v T) (b []byte, items []any, err error) {
	me, ok := c.(MetadataEncoder)
	if !ok {
		b, err = encodePayload(c, v)
		return b, nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: codec %s: %v", reactive.ErrPanic, c.Name(), r)
		}
	}()
	return me.EncodeWithMetadata(v)
}

func encode(c Codec, v any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: codec %s: %v", reactive.ErrPanic, c.Name(), r)
		}
	}()
	return c.Encode(v)
}

func newOutPort[T any](ch string) *outPort {
	return &outPort{
		channel: ch, typ: reflect.TypeFor[T](),
		toSink: func(ctx context.Context, b *builder, pub any, c Codec) reactive.Publisher[Message[[]byte]] {
			up := asPub[T](pub)
			_, identity := c.(BytesCodec)
			g := newGate(func(m Message[T]) (Message[[]byte], bool) {
				if identity { // a []byte message goes on as it is, not as a copy sharing its settlement
					if mb, ok := any(m).(Message[[]byte]); ok {
						return mb, true
					}
				}
				raw, items, err := encodeWithMetadata(c, m.Payload())
				if err != nil {
					b.rt.log.Warn("messaging: encode failed", zap.String("channel", ch), zap.Error(err))
					_ = m.Nack(ctx, fmt.Errorf("%w: channel %s: %w", ErrEncode, ch, err))
					return nil, false
				}
				out := WithPayload(m, raw)
				if len(items) > 0 {
					out = WithMetadataItems(out, items...)
				}
				return out, true
			}, nackDropped[[]byte](ctx), b.state(ch))
			return connectLazily[Message[[]byte]](g, func() { up.Subscribe(g) })
		},
	}
}

// lazyPublisher subscribes its stage upstream right after the downstream
// subscribed, so demand exists end to end before a source is asked for data.
type lazyPublisher[T any] struct {
	p       reactive.Publisher[T]
	connect func()
	once    sync.Once
}

func connectLazily[T any](p reactive.Publisher[T], connect func()) reactive.Publisher[T] {
	return &lazyPublisher[T]{p: p, connect: connect}
}

func (l *lazyPublisher[T]) Subscribe(s reactive.Subscriber[T]) {
	l.p.Subscribe(s)
	l.once.Do(l.connect)
}

// opProcessor is a Processor made of an identity gate (its subscriber side)
// and an operator applied to it (its publisher side): FlatMap and Transform.
type opProcessor[I, O any] struct {
	head *gate[Message[I], Message[I]]
	tail reactive.Publisher[Message[O]]
}

func (p *opProcessor[I, O]) OnSubscribe(s reactive.Subscription)         { p.head.OnSubscribe(s) }
func (p *opProcessor[I, O]) OnNext(m Message[I])                         { p.head.OnNext(m) }
func (p *opProcessor[I, O]) OnError(err error)                           { p.head.OnError(err) }
func (p *opProcessor[I, O]) OnComplete()                                 { p.head.OnComplete() }
func (p *opProcessor[I, O]) Subscribe(s reactive.Subscriber[Message[O]]) { p.tail.Subscribe(s) }

func mustRuntime(r *Runtime) {
	if r == nil {
		panic(fmt.Errorf("%w: runtime", ErrNilArgument))
	}
}

func mustFunc(what string, f any) {
	if isNilValue(f) {
		panic(fmt.Errorf("%w: %s", ErrNilArgument, what))
	}
}

func stageOpts(o []StageOption) stageOptions {
	opts := stageOptions{conc: 1}
	for _, f := range o {
		if f != nil {
			f.applyStage(&opts)
		}
	}
	return opts
}

// siteName is the default stage name: "Process(a→b) at app.go:42".
func siteName(kind, in, out string, o stageOptions) string {
	if o.name != "" {
		return o.name
	}
	desc := in
	switch {
	case in != "" && out != "":
		desc = in + "→" + out
	case out != "":
		desc = "→" + out
	}
	if file, line, ok := registrationSite(); ok {
		return fmt.Sprintf("%s(%s) at %s:%d", kind, desc, filepath.Base(file), line)
	}
	return fmt.Sprintf("%s(%s)", kind, desc)
}

// pkgPrefix is the prefix of this package's function names in a stack trace.
var pkgPrefix = reflect.TypeFor[Runtime]().PkgPath() + "."

// registrationSite is the first caller outside this package: the line that
// registered the stage, also through the typed-handle wrappers.
func registrationSite() (file string, line int, ok bool) {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, pkgPrefix) {
			return f.File, f.Line, f.File != ""
		}
		if !more {
			return "", 0, false
		}
	}
}

// callSafely runs f, turning a panic into an error wrapping reactive.ErrPanic.
func callSafely(stage string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w in %s: %v\n%s", reactive.ErrPanic, stage, r, debug.Stack())
		}
	}()
	return f()
}

// nackFor nacks m with err and the options of a NackWith error.
func nackFor[T any](ctx context.Context, m Message[T], err error) error {
	return m.Nack(ctx, err, nackOptionsFrom(err)...)
}

func (b *builder) acked(n *node, err error) { b.env(n).settled("ack", err) }

func (b *builder) failed(n *node, err error) { b.env(n).failed(err) }

// env is what the invocation functions of node n need; n.ack is resolved.
func (b *builder) env(n *node) stageEnv { return stageEnv{name: n.name, ack: n.ack, log: b.rt.log} }

// stageEnv names a stage, its resolved ack strategy and the logger: the
// invocation functions below are built from it both by the runtime and by
// the TCK hooks (export_test.go), so the verified code is the running code.
type stageEnv struct {
	name string
	ack  AckStrategy
	log  *zap.Logger
}

func (s stageEnv) settled(op string, err error) {
	if err != nil && !errors.Is(err, ErrAlreadySettled) {
		s.log.Warn("messaging: settlement failed", zap.String("stage", s.name), zap.String("op", op), zap.Error(err))
	}
}

func (s stageEnv) failed(err error) {
	s.log.Warn("messaging: stage invocation failed", zap.String("stage", s.name), zap.Error(err))
}

// Consume registers a consumer of the payloads of channel in. Default ack:
// Post (acked when h returned nil, nacked with its error or panic); allowed:
// None, Pre, Post.
func Consume[T any](r *Runtime, in string, h func(ctx context.Context, p T) error, o ...StageOption) {
	mustRuntime(r)
	mustFunc("consume function", h)
	opts := stageOpts(o)
	n := &node{shape: shapeConsume, name: siteName("Consume", in, "", opts), in: newInPort[T](in), opts: opts}
	n.consume = func(ctx context.Context, b *builder, up any) {
		consumeEngine(ctx, b, n, up, consumeInvoke(ctx, b.env(n), h))
	}
	r.register(n)
}

// consumeInvoke is Consume's invocation of h on one message.
func consumeInvoke[T any](ctx context.Context, s stageEnv, h func(ctx context.Context, p T) error) func(Message[T]) {
	return func(m Message[T]) {
		if s.ack == AckPre {
			s.settled("ack", m.Ack(ctx))
		}
		err := callSafely(s.name, func() error { return h(MessageContext(ctx, m.Metadata()), m.Payload()) })
		if err != nil {
			s.failed(err)
		}
		if s.ack == AckPost {
			if err != nil {
				s.settled("nack", nackFor(ctx, m, err))
			} else {
				s.settled("ack", m.Ack(ctx))
			}
		}
	}
}

// ConsumeMessage registers a consumer of the messages of channel in. Default
// ack: Manual (h settles; an error returned while the message is unsettled
// nacks it, a Go deviation from MP RM: no message stays in flight); allowed: None, Pre, Post,
// Manual.
func ConsumeMessage[T any](r *Runtime, in string, h func(ctx context.Context, m Message[T]) error, o ...StageOption) {
	mustRuntime(r)
	mustFunc("consume function", h)
	opts := stageOpts(o)
	n := &node{shape: shapeConsumeMessage, name: siteName("ConsumeMessage", in, "", opts), in: newInPort[T](in), opts: opts}
	n.consume = func(ctx context.Context, b *builder, up any) {
		consumeEngine(ctx, b, n, up, consumeMessageInvoke(ctx, b.env(n), h))
	}
	r.register(n)
}

// consumeMessageInvoke is ConsumeMessage's invocation of h on one message.
func consumeMessageInvoke[T any](ctx context.Context, s stageEnv, h func(ctx context.Context, m Message[T]) error) func(Message[T]) {
	return func(m Message[T]) {
		if s.ack == AckPre {
			s.settled("ack", m.Ack(ctx))
		}
		err := callSafely(s.name, func() error { return h(MessageContext(ctx, m.Metadata()), m) })
		if err != nil {
			s.failed(err)
		}
		switch {
		case s.ack == AckPost && err == nil:
			s.settled("ack", m.Ack(ctx))
		case (s.ack == AckPost || s.ack == AckManual) && err != nil:
			s.settled("nack", nackFor(ctx, m, err))
		}
	}
}

func consumeEngine[T any](ctx context.Context, b *builder, n *node, up any, f func(m Message[T])) {
	e := newConsumer(ctx, n.opts, b.state(n.in.channel), f)
	b.addStage(e)
	asPub[T](up).Subscribe(e)
}

// newConsumer is the engine of Consume and ConsumeMessage running f per message.
func newConsumer[T any](ctx context.Context, o stageOptions, obs *chanState, f func(m Message[T])) *engine[T, struct{}] {
	return newEngine(engineConfig[T, struct{}]{
		consumer: true, prefetch: o.prefetch, conc: o.conc, key: o.key,
		invoke: func(m Message[T]) (Message[struct{}], bool) {
			f(m)
			return nil, false
		},
		dropIn:  nackDropped[T](ctx),
		dropOut: func(Message[struct{}], error) {},
		obs:     obs,
	})
}

func nackDropped[T any](ctx context.Context) func(Message[T], error) {
	return func(m Message[T], err error) { _ = m.Nack(ctx, err) }
}

// Subscribe registers s as the subscriber of channel in (subscribed once at
// Start). Default ack: Manual; allowed: None, Pre (acked before OnNext), Post
// (acked when OnNext returned), Manual.
func Subscribe[T any](r *Runtime, in string, s reactive.Subscriber[Message[T]], o ...StageOption) {
	mustRuntime(r)
	mustFunc("subscriber", s)
	opts := stageOpts(o)
	n := &node{shape: shapeSubscribe, name: siteName("Subscribe", in, "", opts), in: newInPort[T](in), opts: opts}
	n.consume = func(ctx context.Context, b *builder, up any) {
		w := &ackSubscriber[T]{s: s, ack: n.ack, obs: b.state(in), who: "Subscribe subscriber", settle: func(m Message[T]) {
			b.acked(n, m.Ack(ctx))
		}}
		b.cancels = append(b.cancels, w.cancel)
		asPub[T](up).Subscribe(w)
	}
	r.register(n)
}

// ackSubscriber decorates a user Subscriber with the Pre/Post strategies and
// health observation; demand passes through untouched.
type ackSubscriber[T any] struct {
	s      reactive.Subscriber[Message[T]]
	ack    AckStrategy
	obs    *chanState
	who    string // names the subscriber in a health reason
	settle func(Message[T])
	sub    atomic.Pointer[subscriptionRef]
}

type subscriptionRef struct{ s reactive.Subscription }

func (w *ackSubscriber[T]) OnSubscribe(s reactive.Subscription) {
	w.sub.CompareAndSwap(nil, &subscriptionRef{s: s})
	w.obs.subscribed()
	w.s.OnSubscribe(observedSubscription{Subscription: s, obs: w.obs, who: w.who})
}

// observedSubscription records a Cancel by a user subscriber: outside
// Shutdown the channel is no longer live.
type observedSubscription struct {
	reactive.Subscription
	obs *chanState
	who string
}

func (o observedSubscription) Cancel() {
	o.obs.cancelled(o.who)
	o.Subscription.Cancel()
}

func (w *ackSubscriber[T]) OnNext(m Message[T]) {
	if w.ack == AckPre {
		w.settle(m)
	}
	w.s.OnNext(m)
	if w.ack == AckPost {
		w.settle(m)
	}
}

func (w *ackSubscriber[T]) OnError(err error) { w.obs.failed(err); w.s.OnError(err) }
func (w *ackSubscriber[T]) OnComplete()       { w.obs.completed(); w.s.OnComplete() }

func (w *ackSubscriber[T]) cancel() {
	if r := w.sub.Load(); r != nil {
		r.s.Cancel()
	}
}

// Process registers a 1:1 processor of payloads from in to out. Default ack:
// Post (the output carries the input's settlement: the input is acked when
// the output is acked, nacked when f fails or the output is nacked); allowed:
// None, Pre, Post. A failed invocation emits nothing.
func Process[I, O any](r *Runtime, in, out string, f func(ctx context.Context, p I) (O, error), o ...StageOption) {
	mustRuntime(r)
	mustFunc("process function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeProcess, name: siteName("Process", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		return processorOutput(ctx, b, n, processInvoke(ctx, b.env(n), f))
	}
	r.register(n)
}

// processInvoke is Process's invocation of f on one message.
func processInvoke[I, O any](ctx context.Context, s stageEnv, f func(ctx context.Context, p I) (O, error)) invokeFunc[I, O] {
	return func(m Message[I]) (Message[O], bool) {
		if s.ack == AckPre {
			s.settled("ack", m.Ack(ctx))
		}
		var v O
		err := callSafely(s.name, func() (err error) { v, err = f(MessageContext(ctx, m.Metadata()), m.Payload()); return err })
		if err != nil {
			s.failed(err)
			if s.ack == AckPost {
				s.settled("nack", nackFor(ctx, m, err))
			}
			return nil, false
		}
		if s.ack == AckPost {
			return WithPayload(m, v), true
		}
		return NewMessage(v, WithMetadata(m.Metadata())), true
	}
}

// ProcessMessage registers a 1:1 processor of messages from in to out.
// Default ack: Manual (f settles the input, typically by returning
// WithPayload(m, v); an error returned while the input is unsettled nacks
// it); allowed: None, Pre, Manual. A nil message is ErrNilMessage.
func ProcessMessage[I, O any](r *Runtime, in, out string, f func(ctx context.Context, m Message[I]) (Message[O], error), o ...StageOption) {
	mustRuntime(r)
	mustFunc("process function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeProcessMessage, name: siteName("ProcessMessage", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		return processorOutput(ctx, b, n, processMessageInvoke(ctx, b.env(n), f))
	}
	r.register(n)
}

// processMessageInvoke is ProcessMessage's invocation of f on one message.
func processMessageInvoke[I, O any](ctx context.Context, s stageEnv, f func(ctx context.Context, m Message[I]) (Message[O], error)) invokeFunc[I, O] {
	return func(m Message[I]) (Message[O], bool) {
		if s.ack == AckPre {
			s.settled("ack", m.Ack(ctx))
		}
		var res Message[O]
		err := callSafely(s.name, func() (err error) { res, err = f(MessageContext(ctx, m.Metadata()), m); return err })
		if err == nil && res == nil {
			err = fmt.Errorf("%w from %s", ErrNilMessage, s.name)
		}
		if err != nil {
			s.failed(err)
			if s.ack == AckManual {
				s.settled("nack", nackFor(ctx, m, err))
			}
			return nil, false
		}
		return res, true
	}
}

func processorOutput[I, O any](ctx context.Context, b *builder, n *node, inv invokeFunc[I, O]) (any, error) {
	up, err := b.input(ctx, n)
	if err != nil {
		return nil, err
	}
	e := newProcessor(ctx, n.opts, b.state(n.in.channel), inv)
	b.addStage(e)
	return connectLazily[Message[O]](e, func() { asPub[I](up).Subscribe(e) }), nil
}

// newProcessor is the engine of Process and ProcessMessage.
func newProcessor[I, O any](ctx context.Context, o stageOptions, obs *chanState, inv invokeFunc[I, O]) *engine[I, O] {
	return newEngine(engineConfig[I, O]{
		prefetch: o.prefetch, conc: o.conc, key: o.key, invoke: inv,
		dropIn: nackDropped[I](ctx), dropOut: nackDropped[O](ctx), obs: obs,
	})
}

// FlatMap registers a processor mapping every payload of in to a publisher
// whose values are sent to out, one publisher after the other. Default ack:
// Pre; allowed: None, Pre. Outputs carry the input's metadata; a panic or a
// nil publisher of f emits nothing.
func FlatMap[I, O any](r *Runtime, in, out string, f func(ctx context.Context, p I) reactive.Publisher[O], o ...StageOption) {
	mustRuntime(r)
	mustFunc("flatMap function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeFlatMap, name: siteName("FlatMap", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		up, err := b.input(ctx, n)
		if err != nil {
			return nil, err
		}
		p := newFlatMapProcessor(ctx, n.ack, b.state(in), func(m Message[I]) {
			b.acked(n, m.Ack(ctx))
		}, func(ctx context.Context, p I) reactive.Publisher[O] {
			var pub reactive.Publisher[O]
			err := callSafely(n.name, func() error { pub = f(ctx, p); return nil })
			if err != nil {
				b.failed(n, err)
			}
			return pub
		})
		return connectLazily[Message[O]](p, func() { asPub[I](up).Subscribe(p) }), nil
	}
	r.register(n)
}

func newFlatMapProcessor[I, O any](ctx context.Context, ack AckStrategy, obs *chanState, ackFn func(Message[I]), f func(context.Context, I) reactive.Publisher[O]) *opProcessor[I, O] {
	head := newGate(func(m Message[I]) (Message[I], bool) {
		if ack == AckPre {
			ackFn(m)
		}
		return m, true
	}, nil, obs)
	tail := reactive.FlatMap[Message[I], Message[O]](head, func(m Message[I]) reactive.Publisher[Message[O]] {
		pub := f(MessageContext(ctx, m.Metadata()), m.Payload())
		if pub == nil {
			return reactive.Empty[Message[O]]()
		}
		md := m.Metadata()
		return reactive.Map(pub, func(v O) (Message[O], error) { return NewMessage(v, WithMetadata(md)), nil })
	})
	return &opProcessor[I, O]{head: head, tail: tail}
}

// Transform registers f, called once at Start with the stream of in; the
// publisher it returns feeds out. Default ack: Manual; allowed: None, Pre,
// Manual.
func Transform[I, O any](r *Runtime, in, out string, f func(reactive.Publisher[Message[I]]) reactive.Publisher[Message[O]], o ...StageOption) {
	mustRuntime(r)
	mustFunc("transform function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeTransform, name: siteName("Transform", in, out, opts), in: newInPort[I](in), out: newOutPort[O](out), opts: opts}
	n.output = func(ctx context.Context, b *builder) (any, error) {
		up, err := b.input(ctx, n)
		if err != nil {
			return nil, err
		}
		p, err := newTransformProcessor(n.name, n.ack, b.state(in), func(m Message[I]) {
			b.acked(n, m.Ack(ctx))
		}, f)
		if err != nil {
			return nil, err
		}
		return connectLazily[Message[O]](p, func() { asPub[I](up).Subscribe(p) }), nil
	}
	r.register(n)
}

func newTransformProcessor[I, O any](name string, ack AckStrategy, obs *chanState, ackFn func(Message[I]), f func(reactive.Publisher[Message[I]]) reactive.Publisher[Message[O]]) (*opProcessor[I, O], error) {
	head := newGate(func(m Message[I]) (Message[I], bool) {
		if ack == AckPre {
			ackFn(m)
		}
		return m, true
	}, nil, obs)
	var tail reactive.Publisher[Message[O]]
	err := callSafely(name, func() error { tail = f(head); return nil })
	if err == nil && tail == nil {
		err = fmt.Errorf("%w: %s returned a nil publisher", ErrNilArgument, name)
	}
	if err != nil {
		return nil, err
	}
	return &opProcessor[I, O]{head: head, tail: tail}, nil
}

// Produce registers p as the upstream of channel out (subscribed once at
// Start; cut at Shutdown). Produce takes no ack strategy.
func Produce[T any](r *Runtime, out string, p reactive.Publisher[Message[T]], o ...StageOption) {
	mustRuntime(r)
	mustFunc("publisher", p)
	opts := stageOpts(o)
	n := &node{shape: shapeProduce, name: siteName("Produce", "", out, opts), out: newOutPort[T](out), opts: opts}
	n.output = func(_ context.Context, b *builder) (any, error) {
		pub, stop := entryGate(p)
		b.entries = append(b.entries, stop)
		return pub, nil
	}
	r.register(n)
}

// Generate registers f as the upstream of channel out: f is called once per
// downstream request (never concurrently); io.EOF completes the stream, any
// other error fails it. Generate takes no ack strategy.
func Generate[T any](r *Runtime, out string, f func(ctx context.Context) (T, error), o ...StageOption) {
	mustRuntime(r)
	mustFunc("generate function", f)
	opts := stageOpts(o)
	n := &node{shape: shapeGenerate, name: siteName("Generate", "", out, opts), out: newOutPort[T](out), opts: opts}
	n.output = func(_ context.Context, b *builder) (any, error) {
		pub, stop := entryGate(generated(n.name, func(ctx context.Context) (Message[T], error) {
			v, err := f(ctx)
			if err != nil {
				return nil, err
			}
			return NewMessage(v), nil
		}, func(err error) { b.failed(n, err) }))
		b.entries = append(b.entries, stop)
		return pub, nil
	}
	r.register(n)
}

// Channel returns the stream of channel in as an unmanaged, unicast publisher
// (MP RM @Channel): subscribe to it before or after Start; the user settles.
// A second subscriber gets OnError wrapping reactive.ErrAlreadySubscribed.
func Channel[T any](r *Runtime, in string) reactive.Publisher[Message[T]] {
	mustRuntime(r)
	opts := stageOptions{conc: 1}
	n := &node{shape: shapeChannel, name: siteName("Channel", in, "", opts), in: newInPort[T](in), opts: opts}
	p := &channelProxy[T]{}
	n.consume = func(_ context.Context, b *builder, up any) {
		p.connect(asPub[T](up), b.state(in))
	}
	r.register(n)
	return p
}

// channelProxy holds the subscriber of Channel until Start connects it.
type channelProxy[T any] struct {
	mu         sync.Mutex
	up         reactive.Publisher[Message[T]]
	pending    reactive.Subscriber[Message[T]]
	subscribed bool
}

func (p *channelProxy[T]) Subscribe(s reactive.Subscriber[Message[T]]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	p.mu.Lock()
	if p.subscribed {
		p.mu.Unlock()
		reactive.Failed[Message[T]](fmt.Errorf("%w: messaging channel", reactive.ErrAlreadySubscribed)).Subscribe(s)
		return
	}
	p.subscribed = true
	up := p.up
	if up == nil {
		p.pending = s
	}
	p.mu.Unlock()
	if up != nil {
		up.Subscribe(s)
	}
}

// connect subscribes the pending subscriber, if any; the channel is started
// when the user's subscriber saw OnSubscribe.
func (p *channelProxy[T]) connect(up reactive.Publisher[Message[T]], obs *chanState) {
	p.mu.Lock()
	p.up = &observedPublisher[T]{p: up, obs: obs}
	s := p.pending
	p.pending = nil
	up = p.up
	p.mu.Unlock()
	if s != nil {
		up.Subscribe(s)
	}
}

// observedPublisher marks its channel started when the subscriber saw OnSubscribe.
type observedPublisher[T any] struct {
	p   reactive.Publisher[Message[T]]
	obs *chanState
}

func (o *observedPublisher[T]) Subscribe(s reactive.Subscriber[Message[T]]) {
	o.p.Subscribe(&observedSubscriber[T]{Subscriber: s, obs: o.obs})
}

type observedSubscriber[T any] struct {
	reactive.Subscriber[Message[T]]
	obs *chanState
}

func (o *observedSubscriber[T]) OnSubscribe(s reactive.Subscription) {
	o.Subscriber.OnSubscribe(observedSubscription{Subscription: s, obs: o.obs, who: "Channel subscriber"})
	o.obs.subscribed()
}

func isNilValue[T any](v T) bool {
	a := any(v)
	if a == nil {
		return true
	}
	switch rv := reflect.ValueOf(a); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Interface:
		return rv.IsNil()
	default:
		return false
	}
}
