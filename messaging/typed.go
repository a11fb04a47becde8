package messaging

import (
	"context"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Chan is a channel name that carries its payload type: declare each
// channel once,
//
//	var (
//		orders   = messaging.ChannelOf[Order]("orders")
//		invoices = messaging.ChannelOf[Invoice]("invoices")
//	)
//
// and register stages with the On functions (ProcessOn(rt, orders,
// invoices, f), ConsumeOn(rt, invoices, h), NewEmitterOn(rt, orders), …):
// a stage whose function does not fit the payload types of its channels,
// or two stages that disagree about a channel's type, do not compile. The
// string registrations stay for names that come from configuration; Start
// still checks the payload types of both ends of every channel and the
// codec of every connector channel.
type Chan[T any] struct{ name string }

// ChannelOf returns the typed handle of channel name.
func ChannelOf[T any](name string) Chan[T] { return Chan[T]{name: name} }

// Name returns the channel's name.
func (c Chan[T]) Name() string { return c.name }

// String returns the channel's name.
func (c Chan[T]) String() string { return c.name }

// ConsumeOn is [Consume] on a typed channel.
func ConsumeOn[T any](r *Runtime, in Chan[T], h func(ctx context.Context, p T) error, o ...StageOption) {
	Consume(r, in.name, h, o...)
}

// ConsumeMessageOn is [ConsumeMessage] on a typed channel.
func ConsumeMessageOn[T any](r *Runtime, in Chan[T], h func(ctx context.Context, m Message[T]) error, o ...StageOption) {
	ConsumeMessage(r, in.name, h, o...)
}

// SubscribeOn is [Subscribe] on a typed channel.
func SubscribeOn[T any](r *Runtime, in Chan[T], s reactive.Subscriber[Message[T]], o ...StageOption) {
	Subscribe(r, in.name, s, o...)
}

// SubscribePayloadsOn is [SubscribePayloads] on a typed channel.
func SubscribePayloadsOn[T any](r *Runtime, in Chan[T], s reactive.Subscriber[T], o ...StageOption) {
	SubscribePayloads(r, in.name, s, o...)
}

// ProcessOn is [Process] between typed channels.
func ProcessOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(ctx context.Context, p I) (O, error), o ...StageOption) {
	Process(r, in.name, out.name, f, o...)
}

// ProcessMessageOn is [ProcessMessage] between typed channels.
func ProcessMessageOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(ctx context.Context, m Message[I]) (Message[O], error), o ...StageOption) {
	ProcessMessage(r, in.name, out.name, f, o...)
}

// FlatMapOn is [FlatMap] between typed channels.
func FlatMapOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(ctx context.Context, p I) reactive.Publisher[O], o ...StageOption) {
	FlatMap(r, in.name, out.name, f, o...)
}

// FlatMapMessageOn is [FlatMapMessage] between typed channels.
func FlatMapMessageOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(ctx context.Context, m Message[I]) reactive.Publisher[Message[O]], o ...StageOption) {
	FlatMapMessage(r, in.name, out.name, f, o...)
}

// TransformOn is [Transform] between typed channels.
func TransformOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(reactive.Publisher[Message[I]]) reactive.Publisher[Message[O]], o ...StageOption) {
	Transform(r, in.name, out.name, f, o...)
}

// TransformPayloadsOn is [TransformPayloads] between typed channels.
func TransformPayloadsOn[I, O any](r *Runtime, in Chan[I], out Chan[O], f func(reactive.Publisher[I]) reactive.Publisher[O], o ...StageOption) {
	TransformPayloads(r, in.name, out.name, f, o...)
}

// ProduceOn is [Produce] on a typed channel.
func ProduceOn[T any](r *Runtime, out Chan[T], p reactive.Publisher[Message[T]], o ...StageOption) {
	Produce(r, out.name, p, o...)
}

// ProducePayloadsOn is [ProducePayloads] on a typed channel.
func ProducePayloadsOn[T any](r *Runtime, out Chan[T], p reactive.Publisher[T], o ...StageOption) {
	ProducePayloads(r, out.name, p, o...)
}

// GenerateOn is [Generate] on a typed channel.
func GenerateOn[T any](r *Runtime, out Chan[T], f func(ctx context.Context) (T, error), o ...StageOption) {
	Generate(r, out.name, f, o...)
}

// GenerateMessageOn is [GenerateMessage] on a typed channel.
func GenerateMessageOn[T any](r *Runtime, out Chan[T], f func(ctx context.Context) (Message[T], error), o ...StageOption) {
	GenerateMessage(r, out.name, f, o...)
}

// ChannelStream is [Channel] on a typed channel: its unmanaged stream.
func ChannelStream[T any](r *Runtime, in Chan[T]) reactive.Publisher[Message[T]] {
	return Channel[T](r, in.name)
}

// NewEmitterOn is [NewEmitter] on a typed channel.
func NewEmitterOn[T any](r *Runtime, out Chan[T], o ...EmitterOption) *Emitter[T] {
	return NewEmitter[T](r, out.name, o...)
}
