// Package idempotency collapses at-least-once delivery into one effect per message: a
// handler wrapped by a [Guard] runs once per meta.id, however often the message is
// delivered.
//
// The key is the envelope's meta.id, verbatim. For every delivery the guard:
//
//   - runs the handler on the first delivery of an id, and remembers the id when the
//     handler succeeds;
//   - leaves the id unmarked when the handler fails, so retries and dead letters still
//     apply and a later delivery runs the handler again;
//   - skips a remembered id: the handler is not run and the delivery is acknowledged;
//   - runs the handler unguarded when meta.id is empty (it cannot be deduplicated, and
//     the guard never drops work it cannot identify).
//
// # In-flight protection and leases
//
// A delivery claims its id with a lease before the handler runs, so two workers (or a
// redelivery after an acknowledgement timeout) never run the same id at the same time.
// While the handler runs, the guard renews the lease every third of its length
// ([WithLease]), so a handler slower than the lease keeps its claim. When the claim is lost
// (another claim took the id, or renewals failed until the lease ran out), the handler's
// ctx is cancelled with a [*LeaseLostError] as its cause (context.Cause), and the run is
// not committed: the outcome is a retry, never an acknowledgement of unfinished work. A
// lease expires on its own, so a worker that dies holding one blocks its id for at most the
// lease. Success turns the claim into a remembered id kept for [WithTTL]; failure (an error
// or a panic) releases it at once.
//
// A delivery that finds its id claimed by someone else is not run. By default the
// [Guard.Middleware] defers it: pulsar.Defer with the smaller of the lease left and
// [WithInFlightRetry], a redelivery that does not count toward the consumer's
// maxAttempts, so a duplicate of a slow run is never dead-lettered. With [WithInFlightWait]
// the delivery waits instead, polling the store until the claim is committed (then it is
// skipped), released or expired (then it runs). A remembered id is acknowledged without
// counting either.
//
// # Fencing
//
// Every claim gets a fence, a number that increases with every claim of the id
// ([Claim].Fence; [FenceFrom] reads it from the handler's ctx), and the store accepts
// Renew, Commit and Release only with the id's current token ([ErrLeaseLost] otherwise).
// A handler that writes to a database can fence that write, so that a holder whose lease
// was lost (a long GC pause, a partition) cannot overwrite the work of the holder that took
// over:
//
//	func charge(ctx context.Context, env *envelope.Envelope, _ apulsar.Message) error {
//		fence, _ := idempotency.FenceFrom(ctx)
//		// Applied only while no later holder (a larger fence) has written.
//		_, err := db.ExecContext(ctx,
//			`UPDATE orders SET charged = true, fence = $1 WHERE id = $2 AND fence < $1`,
//			fence, orderID(env))
//		return err
//	}
//
// The fences of the Redis store live in the id's key, which outlives a lease by
// redisstore.WithFenceRetention; an id forgotten ([Guard.Forget]) or expired starts again
// from 1. The memory store counts for all ids at once, so its fences never go back.
//
// # Keys
//
// The guard keys a delivery by [Guard.Key]: the queue it was received on (the logical
// queue name of its topic, shared by the partitions; meta.queue where the topic is not
// known), "/", and meta.id. So the same meta.id on two queues is two ids under one store and
// prefix, and a fan-out of one envelope to several queues runs once per queue. Two
// applications that consume the same queue on different subscriptions with one store and
// prefix must tell themselves apart: with [WithScope] (the subscription name, say) or
// different key prefixes. WithScope("") shares ids across queues.
//
// # Stores
//
// A [Store] keeps claims and remembered ids. [MemoryStore] is bounded (a maximum number of
// entries; every entry expires) and refuses a claim with [ErrStoreFull] rather than forget
// an id early; it serves one process. The Redis store, shared by a fleet, is in the
// subpackage idempotency/redisstore (github.com/redis/go-redis/v9): each of claim, renew,
// commit and release is one Lua script on the id's key (one round trip per decision, with
// EVALSHA), keys carry a prefix and remembered ids a TTL. It has a package of its own so
// that importing idempotency pulls in no Redis client.
//
// # Store failures
//
// A store error is a failure, never a skip: when the store cannot answer the claim, the
// handler is not run and the delivery fails with a [*StoreError] (so the consumer retries
// it; nothing is lost and nothing runs twice by accident). When the handler succeeded but
// the commit fails, the guard retries it with a jittered backoff within [WithCommitRetry]
// (each failed try goes to [WithErrorHook]); if it still fails, [Guard.Do] returns
// [RanUncommitted] and the middleware acknowledges the delivery all the same with
// pulsar.AckWithWarning (the effect happened; failing it would run the effect again), so
// the failure also reaches the consumer's Event hook (EventError), its log and Health.Warnings. The id
// then stays claimed until its lease ends. A failed release is reported to the hook too;
// the claim then ends with its lease. A handler that itself returns pulsar.AckWithWarning
// succeeded: its id is remembered like that of a handler that returned nil.
//
// # Where it plugs in
//
// [Guard.Middleware] is a pulsar consumer middleware, a Handler hook (pulsar.Hooks). For the
// messaging runtime, GuardFunc in package pulsar/connector wraps a payload function
// (messaging.Consume with the "babelqueue" codec), mapping an in-flight id to a delayed
// redelivery that, under failure-strategy babelqueue, is a deferral too: it lives beside
// the connector so that this package does not import the runtime. The messaging runtime
// has no warning outcome: there a commit that keeps failing is acknowledged and reported to
// [WithErrorHook] only. [Guard.Do] is the primitive both use, for any other path, and
// [Guard.InFlightDelay] the delay both ask for.
package idempotency
