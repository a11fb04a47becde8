package messaging

import (
	"context"

	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// Hooks for the Reactive Streams TCK (tck_test.go): the stage processors and
// subscribers built by the same functions the runtime uses (newProcessor,
// newConsumer and the invocation builders of stages.go), on identity functions.

func tckEnv(name string, ack AckStrategy) stageEnv {
	return stageEnv{name: name, ack: ack, log: zap.NewNop()}
}

// NewProcessStage is the processor of Process with its default ack (Post).
func NewProcessStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newProcessor(ctx, stageOptions{conc: 1}, nil,
		processInvoke(ctx, tckEnv("Process(tck)", AckPost), func(_ context.Context, p int) (int, error) { return p, nil }))
}

// NewProcessMessageStage is the processor of ProcessMessage (Manual) returning
// its input, with concurrency 2.
func NewProcessMessageStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newProcessor(ctx, stageOptions{conc: 2}, nil,
		processMessageInvoke(ctx, tckEnv("ProcessMessage(tck)", AckManual),
			func(_ context.Context, m Message[int]) (Message[int], error) { return m, nil }))
}

// NewFlatMapStage is the processor of FlatMap (one output per input).
func NewFlatMapStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newFlatMapProcessor(ctx, AckPre, nil, func(m Message[int]) { _ = m.Ack(ctx) },
		func(_ context.Context, p int) reactive.Publisher[int] { return reactive.FromSlice(p) })
}

// NewTransformStage is the processor of Transform with the identity function.
func NewTransformStage() reactive.Processor[Message[int], Message[int]] {
	p, err := newTransformProcessor("Transform(tck)", AckManual, nil, nil,
		func(up reactive.Publisher[Message[int]]) reactive.Publisher[Message[int]] { return up })
	if err != nil {
		panic(err)
	}
	return p
}

// NewConsumeStage is the subscriber of Consume (Post) calling f per payload.
func NewConsumeStage(ctx context.Context, f func(int)) reactive.Subscriber[Message[int]] {
	return newConsumer(ctx, stageOptions{conc: 1}, nil,
		consumeInvoke(ctx, tckEnv("Consume(tck)", AckPost), func(_ context.Context, p int) error { f(p); return nil }))
}

// NewConsumeMessageStage is the subscriber of ConsumeMessage (Manual) acking
// every message.
func NewConsumeMessageStage(ctx context.Context) reactive.Subscriber[Message[int]] {
	return newConsumer(ctx, stageOptions{conc: 1}, nil,
		consumeMessageInvoke(ctx, tckEnv("ConsumeMessage(tck)", AckManual),
			func(ctx context.Context, m Message[int]) error { return m.Ack(ctx) }))
}

// NewConsumeWhitebox is the subscriber of Consume (Post) instrumented for
// tck.VerifySubscriberWhitebox: every invocation reports its message to the
// probe before the user function runs.
func NewConsumeWhitebox(ctx context.Context, p *tck.Probe[Message[int]]) reactive.Subscriber[Message[int]] {
	inv := consumeInvoke(ctx, tckEnv("Consume(tck)", AckPost), func(context.Context, int) error { return nil })
	return newWhitebox(ctx, p, inv)
}

// NewConsumeMessageWhitebox is the subscriber of ConsumeMessage (Manual,
// acking) instrumented for tck.VerifySubscriberWhitebox.
func NewConsumeMessageWhitebox(ctx context.Context, p *tck.Probe[Message[int]]) reactive.Subscriber[Message[int]] {
	inv := consumeMessageInvoke(ctx, tckEnv("ConsumeMessage(tck)", AckManual),
		func(ctx context.Context, m Message[int]) error { return m.Ack(ctx) })
	return newWhitebox(ctx, p, inv)
}

func newWhitebox(ctx context.Context, p *tck.Probe[Message[int]], inv func(Message[int])) reactive.Subscriber[Message[int]] {
	w := &whitebox{probe: p}
	w.engine = newConsumer(ctx, stageOptions{conc: 1}, nil, func(m Message[int]) {
		p.RegisterOnNext(m)
		inv(m)
	})
	return w
}

// whitebox forwards the consumer's signals to the probe; its puppet requests
// through the consumer's own demand accounting (credit, then Inlet), the way
// a finished invocation does.
type whitebox struct {
	*engine[int, struct{}]
	probe *tck.Probe[Message[int]]
}

func (w *whitebox) OnSubscribe(s reactive.Subscription) {
	w.engine.OnSubscribe(s)
	w.probe.RegisterOnSubscribe(w)
}

func (w *whitebox) OnError(err error) {
	w.engine.OnError(err)
	w.probe.RegisterOnError(err)
}

func (w *whitebox) OnComplete() {
	w.engine.OnComplete()
	w.probe.RegisterOnComplete()
}

func (w *whitebox) TriggerRequest(n int64) {
	if _, err := w.credit.Add(n); err == nil {
		w.in.Request(n)
	}
}

func (w *whitebox) SignalCancel() { w.Cancel() }

// NewTestEmitter is an emitter outside a runtime.
func NewTestEmitter[T any](s OverflowStrategy) *Emitter[T] {
	return newEmitter[T](emitterOptions{strategy: s}, DefaultEmitterBufferSize, nil)
}

// NewMergedInput is the publisher feeding a WithMerge input: the runtime's
// merge of the input port over ps.
func NewMergedInput(ps ...reactive.Publisher[Message[int]]) reactive.Publisher[Message[int]] {
	anys := make([]any, len(ps))
	for i, p := range ps {
		anys[i] = p
	}
	return asPub[int](newInPort[int]("merged").merge(anys))
}

// NewProducePayloadsOutput is the output of ProducePayloads over p: the
// runtime's entry gate in front of p's payloads wrapped in messages.
func NewProducePayloadsOutput(p reactive.Publisher[int]) reactive.Publisher[Message[int]] {
	pub, _ := entryGate(payloadMessages(p))
	return pub
}

// NewGenerateMessageOutput is the output of GenerateMessage over f.
func NewGenerateMessageOutput(f func(ctx context.Context) (Message[int], error)) reactive.Publisher[Message[int]] {
	pub, _ := entryGate(generated("GenerateMessage(tck)", f, func(error) {}))
	return pub
}

// NewTransformPayloadsStage is the processor of TransformPayloads (Pre) with
// the identity function.
func NewTransformPayloadsStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	p, err := newTransformPayloadsProcessor("TransformPayloads(tck)", AckPre, nil, func(m Message[int]) { _ = m.Ack(ctx) },
		func(up reactive.Publisher[int]) reactive.Publisher[int] { return up })
	if err != nil {
		panic(err)
	}
	return p
}

// NewFlatMapMessageStage is the processor of FlatMapMessage (Manual) mapping
// every message to a publisher of itself.
func NewFlatMapMessageStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newFlatMapMessageProcessor(ctx, tckEnv("FlatMapMessage(tck)", AckManual), nil,
		func(_ context.Context, m Message[int]) reactive.Publisher[Message[int]] { return reactive.FromSlice(m) })
}
