package connector

import (
	"context"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// GuardFunc wraps a payload function of the messaging runtime (as given to
// messaging.Consume on a channel with the "babelqueue" codec) in g, keyed by
// [idempotency.Guard.Key] of the envelope (the runtime does not give the payload function
// the topic, so the key's queue is the envelope's meta.queue unless [idempotency.WithScope]
// fixes it): the runtime acknowledges the message when the returned function returns nil
// (also for a remembered id, whose h is not run, and for a run whose commit failed: the
// effect happened, and the failure went to [idempotency.WithErrorHook]) and nacks it with
// its error otherwise. An id in flight elsewhere, or whose claim another delivery took while
// h ran, is nacked with messaging.RedeliverAfter([idempotency.Guard.InFlightDelay]) and a
// bqpulsar.Defer cause, so that under failure-strategy babelqueue the redelivery does not
// count toward the attempts. A nil envelope runs h unguarded. h's ctx carries the claim's
// fence ([idempotency.FenceFrom]) and is cancelled when the lease is lost.
//
// It is the messaging side of the guard, which itself knows only pulsar's middleware
// (idempotency.Guard.Middleware), so that importing idempotency never pulls in the runtime.
func GuardFunc(g *idempotency.Guard, h func(ctx context.Context, env *envelope.Envelope) error) func(ctx context.Context, env *envelope.Envelope) error {
	return func(ctx context.Context, env *envelope.Envelope) error {
		res, err := g.Do(ctx, g.Key(env, ""), func(ctx context.Context) error { return h(ctx, env) })
		if err == nil || res == idempotency.RanUncommitted {
			return nil
		}
		if d, ok := g.InFlightDelay(err); ok {
			return messaging.NackWith(bqpulsar.Defer(d, err), messaging.RedeliverAfter(d))
		}
		return err
	}
}
