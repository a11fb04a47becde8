package connector

import (
	"context"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

// GuardFunc wraps a payload function of the messaging runtime (as given to
// messaging.Consume on a channel with the "babelqueue" codec) in g, keyed on the envelope's
// meta.id: the runtime acknowledges the message when the returned function returns nil
// (also for a remembered id, whose h is not run) and nacks it with its error otherwise; an
// id in flight elsewhere is nacked with messaging.RedeliverAfter([idempotency.Guard.InFlightDelay]),
// the smaller of the other lease left and idempotency.WithInFlightRetry. A nil envelope runs
// h unguarded.
//
// It is the messaging side of the guard, which itself knows only pulsar's middleware
// (idempotency.Guard.Middleware), so that importing idempotency never pulls in the runtime.
func GuardFunc(g *idempotency.Guard, h func(ctx context.Context, env *envelope.Envelope) error) func(ctx context.Context, env *envelope.Envelope) error {
	return func(ctx context.Context, env *envelope.Envelope) error {
		id := ""
		if env != nil {
			id = env.Meta.ID
		}
		res, err := g.Do(ctx, id, func(ctx context.Context) error { return h(ctx, env) })
		if res == idempotency.NotRun {
			if d, ok := g.InFlightDelay(err); ok {
				return messaging.NackWith(err, messaging.RedeliverAfter(d))
			}
		}
		return err
	}
}
