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
// # In-flight protection
//
// A delivery claims its id with a lease before the handler runs, so two workers (or a
// redelivery after an acknowledgement timeout) never run the same id at the same time. A
// delivery that finds its id claimed by someone else is not run: by default it fails with
// an [*InFlightError] and the [Guard.Middleware] turns that into pulsar.RetryAfter with the
// smaller of the lease left and [WithInFlightRetry] (the retry counts as a failed
// delivery, so the consumer's maxAttempts still applies); with [WithInFlightWait] the
// delivery waits instead, polling the store until the claim is committed (then it is
// skipped), released or expired (then it runs). A lease expires on its own, so a worker that
// dies holding one blocks its id for at most the lease ([WithLease]); choose a lease longer
// than the handler's slowest run. Success turns the claim into a remembered id kept for
// [WithTTL]; failure (an error or a panic) releases it at once.
//
// # Stores
//
// A [Store] keeps claims and remembered ids. [MemoryStore] is bounded (a maximum number of
// entries; every entry expires) and refuses a claim with [ErrStoreFull] rather than forget
// an id early; it serves one process. The Redis store, shared by a fleet, is in the
// subpackage idempotency/redisstore (github.com/redis/go-redis/v9): a claim is one atomic
// SET NX PX, commit, release and the in-flight answer are Lua scripts, keys carry a prefix
// and remembered ids a TTL. It has a package of its own so that importing idempotency
// pulls in no Redis client.
//
// # Store failures
//
// A store error is a failure, never a skip: when the store cannot answer the claim, the
// handler is not run and the delivery fails with a [*StoreError] (so the consumer retries
// it; nothing is lost and nothing runs twice by accident). When the handler succeeded but
// the commit fails, the delivery is acknowledged all the same (the effect happened; failing
// it would run the effect again), the id stays claimed until its lease ends, and the
// failure goes to [WithErrorHook]. A failed release is reported there too; the claim then
// ends with its lease.
//
// # Where it plugs in
//
// [Guard.Middleware] is a pulsar consumer middleware, a Handler hook (pulsar.Hooks). For the
// messaging runtime, GuardFunc in package pulsar/connector wraps a payload function
// (messaging.Consume with the "babelqueue" codec), mapping an in-flight id to a delayed
// redelivery: it lives beside the connector so that this package does not import the
// runtime. [Guard.Do] is the primitive both use, for any other path, and
// [Guard.InFlightDelay] the delay both ask for.
package idempotency
