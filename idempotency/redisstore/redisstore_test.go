package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency/redisstore"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/redistest"
)

// The store contract (claims, leases, TTLs, atomic claims) runs on this store and on the
// memory store in package idempotency's tests; these are the Redis-only parts.

func TestNewValidatesItsOptions(t *testing.T) {
	_, err := redisstore.New(nil)
	require.ErrorIs(t, err, idempotency.ErrInvalidOption)
}

func TestRedisStoreKeysAndOutage(t *testing.T) {
	ctx := context.Background()
	srv, client := redistest.Start(t)
	s, err := redisstore.New(client, redisstore.WithKeyPrefix("app:"))
	require.NoError(t, err)
	assert.Equal(t, "app:id-1", s.Key("id-1"))
	c, err := s.Claim(ctx, "id-1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c.Fence)
	assert.Equal(t, "1", c.Token)
	require.NoError(t, s.Commit(ctx, "id-1", c.Token, time.Hour))
	v, err := client.HMGet(ctx, "app:id-1", "s", "f").Result()
	require.NoError(t, err)
	assert.Equal(t, []any{"d", "1"}, v, "remembered, with its fence")
	ttl, err := client.PTTL(ctx, "app:id-1").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute)
	assert.LessOrEqual(t, ttl, time.Hour, "a remembered id lives for its TTL, not the claim's retention")

	def, err := redisstore.New(client)
	require.NoError(t, err)
	assert.Equal(t, redisstore.DefaultKeyPrefix+"x", def.Key("x"))

	// A claimed key keeps its fence for the lease plus the fence retention.
	c, err = s.Claim(ctx, "id-3", time.Minute)
	require.NoError(t, err)
	ttl, err = client.PTTL(ctx, "app:id-3").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, redisstore.DefaultFenceRetention)
	require.NoError(t, s.Preload(ctx))

	_, err = redisstore.New(client, redisstore.WithFenceRetention(0))
	require.ErrorIs(t, err, idempotency.ErrInvalidOption)

	srv.Stop()
	_, err = s.Claim(ctx, "id-2", time.Minute)
	require.Error(t, err, "a claim against a dead server must fail")
	require.Error(t, s.Commit(ctx, "id-2", "t", time.Minute))
	require.Error(t, s.Renew(ctx, "id-2", "t", time.Minute))
	require.Error(t, s.Preload(ctx))
	require.Error(t, s.Release(ctx, "id-2", "t"))
	require.Error(t, s.Forget(ctx, "id-2"))
	assert.NotErrorIs(t, err, idempotency.ErrStoreFull)
}

// TestRedisStoreKeyLifetimes: a claimed key lives for the lease plus the fence retention
// (WithFenceRetention), counted again from each renewal; a forgotten id's fences start
// again from 1; an empty prefix keys ids bare.
func TestRedisStoreKeyLifetimes(t *testing.T) {
	ctx := context.Background()
	_, client := redistest.Start(t)
	s, err := redisstore.New(client, redisstore.WithKeyPrefix(""), redisstore.WithFenceRetention(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, "id", s.Key("id"), "an empty prefix")

	c, err := s.Claim(ctx, "id", time.Minute)
	require.NoError(t, err)
	ttl, err := client.PTTL(ctx, "id").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Hour)
	assert.LessOrEqual(t, ttl, time.Hour+time.Minute, "the lease plus the retention given")

	require.NoError(t, s.Renew(ctx, "id", c.Token, 2*time.Hour))
	ttl, err = client.PTTL(ctx, "id").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 2*time.Hour+59*time.Minute, "a renewal sets the key's life from its lease")

	require.NoError(t, s.Release(ctx, "id", c.Token))
	c, err = s.Claim(ctx, "id", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), c.Fence, "a release keeps the fence counter")
	require.NoError(t, s.Forget(ctx, "id"))
	c, err = s.Claim(ctx, "id", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c.Fence, "a forgotten id's fences start again from 1")

	_, err = redisstore.New(client, redisstore.WithFenceRetention(-time.Second))
	require.ErrorIs(t, err, idempotency.ErrInvalidOption)
}

// TestPreloadLoadsEveryScript: after Preload, the first claim, renewal, commit and release
// run with EVALSHA alone: no EVAL fallback sends a script.
func TestPreloadLoadsEveryScript(t *testing.T) {
	ctx := context.Background()
	_, client := redistest.Start(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.NoError(t, client.ScriptFlush(ctx).Err())
	require.NoError(t, s.Preload(ctx))
	require.NoError(t, client.ConfigResetStat(ctx).Err())
	c, err := s.Claim(ctx, "p", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Renew(ctx, "p", c.Token, time.Minute))
	require.NoError(t, s.Release(ctx, "p", c.Token))
	c, err = s.Claim(ctx, "p", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, "p", c.Token, time.Minute))
	stats, err := client.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Contains(t, stats, "cmdstat_evalsha:calls=5,")
	assert.NotContains(t, stats, "cmdstat_eval:", "a decision fell back to EVAL")
}
