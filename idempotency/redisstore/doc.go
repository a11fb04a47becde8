// Package redisstore is the Redis [idempotency.Store] (github.com/redis/go-redis/v9): one
// store shared by a fleet of consumers, so that a message id handled by one worker is
// remembered by all of them.
//
//	store, err := redisstore.New(redisClient, redisstore.WithKeyPrefix("billing:"))
//	if err != nil { … }
//	guard, err := idempotency.New(store)
//
// A claim is one atomic script (SET NX PX, else the key's state and its PTTL); a commit is
// SET with PX, so a remembered id expires after its TTL; a release and the in-flight answer
// are scripts that act only on the caller's claim token. Keys are a prefix
// ([DefaultKeyPrefix], or [WithKeyPrefix]) followed by meta.id, verbatim.
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
