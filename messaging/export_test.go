package messaging

import (
	"context"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Hooks for the Reactive Streams TCK (tck_test.go): the stage processors and
// subscribers built as the runtime builds them, on identity functions.

// NewProcessStage is the processor of Process (Post: WithPayload).
func NewProcessStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newEngine(engineConfig[int, int]{
		invoke:  func(m Message[int]) (Message[int], bool) { return WithPayload(m, m.Payload()), true },
		dropIn:  nackDropped[int](ctx),
		dropOut: nackDropped[int](ctx),
	})
}

// NewProcessMessageStage is the processor of ProcessMessage returning its input.
func NewProcessMessageStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newEngine(engineConfig[int, int]{
		invoke:  func(m Message[int]) (Message[int], bool) { return m, true },
		dropIn:  nackDropped[int](ctx),
		dropOut: nackDropped[int](ctx),
		conc:    2,
	})
}

// NewFlatMapStage is the processor of FlatMap (one output per input).
func NewFlatMapStage(ctx context.Context) reactive.Processor[Message[int], Message[int]] {
	return newFlatMapProcessor(ctx, AckPre, nil, func(m Message[int]) { _ = m.Ack(ctx) },
		func(p int) reactive.Publisher[int] { return reactive.FromSlice(p) })
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
	return newEngine(engineConfig[int, struct{}]{
		consumer: true,
		invoke: func(m Message[int]) (Message[struct{}], bool) {
			f(m.Payload())
			_ = m.Ack(ctx)
			return nil, false
		},
		dropIn:  nackDropped[int](ctx),
		dropOut: func(Message[struct{}], error) {},
	})
}

// NewTestEmitter is an emitter outside a runtime.
func NewTestEmitter[T any](s OverflowStrategy) *Emitter[T] {
	return newEmitter[T](emitterOptions{strategy: s}, DefaultEmitterBufferSize, nil)
}
