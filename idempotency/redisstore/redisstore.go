package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
)

// DefaultKeyPrefix is the [Store]'s default key prefix.
const DefaultKeyPrefix = "babelqueue:idempotency:"

// A key holds "c:<token>" while claimed (with the lease as its expiry) and "d" once
// remembered (with the TTL as its expiry).
const (
	claimPrefix = "c:"
	doneValue   = "d"
)

// claimScript takes the key if it is free (SET NX PX), else answers done or in flight
// with the lease left, in one atomic step.
var claimScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, 0}
end
local v = redis.call('GET', KEYS[1])
if v == 'd' then
  return {2, 0}
end
return {3, redis.call('PTTL', KEYS[1])}
`)

// releaseScript deletes the key only while it holds the caller's claim.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Store is an [idempotency.Store] in Redis, shared by every worker that uses the same server and
// prefix. A claim is one atomic script (SET NX PX, else the current state and PTTL); a
// commit is SET with PX, so a remembered id expires after its TTL; a release deletes the
// key only while it holds the caller's claim token. Keys are the prefix followed by meta.id.
// It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
}

// Option configures [New].
type Option interface{ apply(*Store) error }

type optionFunc func(*Store) error

func (f optionFunc) apply(s *Store) error { return f(s) }

// WithKeyPrefix sets the prefix of every key the [Store] writes, so several
// consumers (or applications) share a server without sharing ids. Default:
// [DefaultKeyPrefix]. An empty prefix is allowed.
func WithKeyPrefix(p string) Option {
	return optionFunc(func(s *Store) error {
		s.prefix = p
		return nil
	})
}

// New returns a store on client (a *redis.Client, *redis.ClusterClient or *redis.Ring);
// the caller keeps ownership of the client and closes it. Errors wrap
// [idempotency.ErrInvalidOption].
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil redis client", idempotency.ErrInvalidOption)
	}
	s := &Store{client: client, prefix: DefaultKeyPrefix}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

var _ idempotency.Store = (*Store)(nil)

// Key returns the Redis key of id.
func (s *Store) Key(id string) string { return s.prefix + id }

// millis rounds d up to whole milliseconds, at least 1.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return max(int64(ms), 1)
}

// Claim implements [idempotency.Store]. lease ≤ 0 is an error wrapping
// [idempotency.ErrInvalidOption].
func (s *Store) Claim(ctx context.Context, id string, lease time.Duration) (idempotency.Claim, error) {
	if lease <= 0 {
		return idempotency.Claim{}, fmt.Errorf("%w: lease %s, want > 0", idempotency.ErrInvalidOption, lease)
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token := hex.EncodeToString(b[:])
	res, err := claimScript.Run(ctx, s.client, []string{s.Key(id)}, claimPrefix+token, millis(lease)).Int64Slice()
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if len(res) != 2 {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: unexpected reply %v", res)
	}
	switch res[0] {
	case 1:
		return idempotency.Claim{Status: idempotency.StatusClaimed, Token: token}, nil
	case 2:
		return idempotency.Claim{Status: idempotency.StatusDone}, nil
	case 3:
		return idempotency.Claim{Status: idempotency.StatusInFlight, LeaseLeft: time.Duration(max(res[1], 0)) * time.Millisecond}, nil
	default:
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: unexpected reply %v", res)
	}
}

// Commit implements [idempotency.Store]: SET key "d" PX ttl. ttl ≤ 0 is an error wrapping
// [idempotency.ErrInvalidOption].
func (s *Store) Commit(ctx context.Context, id, _ string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %s, want > 0", idempotency.ErrInvalidOption, ttl)
	}
	if err := s.client.Set(ctx, s.Key(id), doneValue, time.Duration(millis(ttl))*time.Millisecond).Err(); err != nil {
		return fmt.Errorf("redisstore: commit: %w", err)
	}
	return nil
}

// Release implements [idempotency.Store].
func (s *Store) Release(ctx context.Context, id, token string) error {
	if err := releaseScript.Run(ctx, s.client, []string{s.Key(id)}, claimPrefix+token).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

// Forget implements [idempotency.Store].
func (s *Store) Forget(ctx context.Context, id string) error {
	if err := s.client.Del(ctx, s.Key(id)).Err(); err != nil {
		return fmt.Errorf("redisstore: forget: %w", err)
	}
	return nil
}
