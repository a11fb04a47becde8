// Package redisstore is the Redis [idempotency.Store] (github.com/redis/go-redis/v9): one
// store shared by a fleet of consumers, so that a message id handled by one worker is
// remembered by all of them.
//
//	store, err := redisstore.New(redisClient, redisstore.WithKeyPrefix("billing:"))
//	if err != nil { … }
//	guard, err := idempotency.New(store)
//
// Each decision is one server-side Lua script on the id's key, one round trip with EVALSHA
// (go-redis falls back to EVAL when the server does not have the script yet; [Store.Preload]
// loads them all in one pipeline): a claim (take a free id with the next fence, or answer
// done, or in flight with the lease left), a renewal, a commit and a release, the last
// three only for the id's current fence. An id is one hash: its fence counter, its state
// and its lease's end by the server's clock, so an expired lease keeps the counter and
// fences increase. Keys are a prefix ([DefaultKeyPrefix], or [WithKeyPrefix]) followed by
// the guard's key (idempotency.Guard.Key: the queue and meta.id), verbatim. It needs Redis
// 5 or newer.
//
// # Why a package of its own
//
// The guard and its in-memory store need nothing but the standard library and the SDK's
// own packages. The Redis client is a large dependency tree, and a service that dedupes in
// memory, or with a store of its own, should not compile or vet it: so the Redis store lives
// here, and `go list -deps` of package idempotency has no go-redis in it. It stays in the
// SDK's module, versioned with the [idempotency.Store] contract it implements (a separate
// module would let the two drift apart); Go builds only the packages a program imports, so
// a user who never imports redisstore links none of go-redis.
package redisstore
