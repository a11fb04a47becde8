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
	require.NoError(t, s.Commit(ctx, "id-1", c.Token, time.Hour))
	v, err := client.Get(ctx, "app:id-1").Result()
	require.NoError(t, err)
	assert.Equal(t, "d", v)
	ttl, err := client.PTTL(ctx, "app:id-1").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute)

	def, err := redisstore.New(client)
	require.NoError(t, err)
	assert.Equal(t, redisstore.DefaultKeyPrefix+"x", def.Key("x"))

	srv.Stop()
	_, err = s.Claim(ctx, "id-2", time.Minute)
	require.Error(t, err, "a claim against a dead server must fail")
	require.Error(t, s.Commit(ctx, "id-2", "t", time.Minute))
	require.Error(t, s.Release(ctx, "id-2", "t"))
	require.Error(t, s.Forget(ctx, "id-2"))
	assert.NotErrorIs(t, err, idempotency.ErrStoreFull)
}
