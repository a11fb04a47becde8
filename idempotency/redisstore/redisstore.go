package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
)

// DefaultKeyPrefix is the [Store]'s default key prefix. The guard's keys already carry the
// queue ([idempotency.Guard.Key]), so two queues never share ids under the default prefix.
const DefaultKeyPrefix = "babelqueue:idempotency:"

// DefaultFenceRetention is how long a claimed id's key (and so its fence counter) outlives
// the claim's lease by default (see [WithFenceRetention]).
const DefaultFenceRetention = idempotency.DefaultTTL

// Every id is one Redis hash, so that each decision is one script on one key (and a
// cluster can serve it from one slot):
//
//	f  the fence counter: the last fence handed out for the id (one more on every claim)
//	s  "c" while claimed, "d" once remembered, absent when free (released)
//	e  while claimed: the lease's end, in milliseconds of the server's clock (ignored
//	   once remembered)
//
// A claimed key expires lease + fence retention after its last claim or renewal (each
// sets the expiry again, later than the one before), a remembered one after its TTL. The lease is the field e, not the key's expiry, so that an
// expired lease keeps the fence counter: the next claim gets a larger fence.

// claimScript: remembered → {2, 0}; claimed with a lease not yet ended → {3, ms left};
// otherwise claim it (fence + 1, s = c, e = now + lease) → {1, fence}.
// ARGV: lease ms, fence retention ms.
var claimScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 's', 'e', 'f')
if v[1] == 'd' then
  return {2, 0}
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if v[1] == 'c' then
  local left = tonumber(v[2]) - now
  if left > 0 then
    return {3, left}
  end
end
local f = (tonumber(v[3]) or 0) + 1
redis.call('HSET', KEYS[1], 's', 'c', 'e', now + tonumber(ARGV[1]), 'f', f)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]))
return {1, f}
`)

// renewScript: while claimed with the caller's fence, e = now + lease → 1; otherwise 0.
// ARGV: fence, lease ms, fence retention ms.
var renewScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 's', 'f')
if v[1] ~= 'c' or v[2] ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[1], 'e', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
`)

// commitScript: unless a later claim took the id (another fence), remember it for ttl
// → 1; otherwise 0. A key that is gone (a restarted server, say) is remembered too: nobody
// claimed it since. ARGV: fence, ttl ms.
var commitScript = redis.NewScript(`
local f = redis.call('HGET', KEYS[1], 'f')
if f and f ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 's', 'd', 'f', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript: while claimed with the caller's fence, free the id (the fence counter
// stays) → 1; otherwise 0. ARGV: fence.
var releaseScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 's', 'f')
if v[1] ~= 'c' or v[2] ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 's', 'e')
return 1
`)

// Store is an [idempotency.Store] in Redis, shared by every worker that uses the same server and
// prefix. Claim, renew, commit and release are each one Lua script on the id's key, run
// with EVALSHA (and EVAL when the server does not have the script yet): one round trip per
// decision. Fences come from a counter per id, kept in the id's key. Keys are the prefix
// followed by the id. It needs Redis 5 or newer (scripts read the server's clock). It is
// safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
	retain time.Duration
}

// Option configures [New].
type Option interface{ apply(*Store) error }

type optionFunc func(*Store) error

func (f optionFunc) apply(s *Store) error { return f(s) }

// WithKeyPrefix sets the prefix of every key the [Store] writes, so several
// applications share a server without sharing ids. Default: [DefaultKeyPrefix]. An empty
// prefix is allowed.
func WithKeyPrefix(p string) Option {
	return optionFunc(func(s *Store) error {
		s.prefix = p
		return nil
	})
}

// WithFenceRetention sets how long the key of a claimed id, and so its fence counter,
// outlives the last claim or renewal: an id's fences increase as long as its key lives,
// and start again from 1 once it has expired (after this retention, or after a remembered
// id's TTL) or was forgotten. Keep it longer than the slowest handler a stalled holder
// might wake up from. Default: [DefaultFenceRetention]. d ≤ 0 is an error.
func WithFenceRetention(d time.Duration) Option {
	return optionFunc(func(s *Store) error {
		if d <= 0 {
			return fmt.Errorf("%w: fence retention %s, want > 0", idempotency.ErrInvalidOption, d)
		}
		s.retain = d
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
	s := &Store{client: client, prefix: DefaultKeyPrefix, retain: DefaultFenceRetention}
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

// Preload loads the store's scripts into the server (SCRIPT LOAD, pipelined), so that the
// first decisions need no EVAL fallback. It is optional: a script the server does not have
// is sent once with EVAL.
func (s *Store) Preload(ctx context.Context) error {
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sc := range []*redis.Script{claimScript, renewScript, commitScript, releaseScript} {
			sc.Load(ctx, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: preload scripts: %w", err)
	}
	return nil
}

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
	res, err := claimScript.Run(ctx, s.client, []string{s.Key(id)}, millis(lease), millis(s.retain)).Int64Slice()
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if len(res) != 2 {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: unexpected reply %v", res)
	}
	switch res[0] {
	case 1:
		if res[1] < 1 {
			return idempotency.Claim{}, fmt.Errorf("redisstore: claim: unexpected fence %d", res[1])
		}
		fence := uint64(res[1]) //nolint:gosec // G115: res[1] ≥ 1, checked above
		return idempotency.Claim{Status: idempotency.StatusClaimed, Token: strconv.FormatUint(fence, 10), Fence: fence}, nil
	case 2:
		return idempotency.Claim{Status: idempotency.StatusDone}, nil
	case 3:
		return idempotency.Claim{Status: idempotency.StatusInFlight, LeaseLeft: time.Duration(max(res[1], 0)) * time.Millisecond}, nil
	default:
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: unexpected reply %v", res)
	}
}

// Renew implements [idempotency.Store]. lease ≤ 0 is an error wrapping
// [idempotency.ErrInvalidOption].
func (s *Store) Renew(ctx context.Context, id, token string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("%w: lease %s, want > 0", idempotency.ErrInvalidOption, lease)
	}
	ok, err := renewScript.Run(ctx, s.client, []string{s.Key(id)}, token, millis(lease), millis(s.retain)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: renew: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: %q is not claimed with fence %s", idempotency.ErrLeaseLost, id, token)
	}
	return nil
}

// Commit implements [idempotency.Store]. ttl ≤ 0 is an error wrapping
// [idempotency.ErrInvalidOption].
func (s *Store) Commit(ctx context.Context, id, token string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %s, want > 0", idempotency.ErrInvalidOption, ttl)
	}
	ok, err := commitScript.Run(ctx, s.client, []string{s.Key(id)}, token, millis(ttl)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: commit: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: %q was claimed after fence %s", idempotency.ErrLeaseLost, id, token)
	}
	return nil
}

// Release implements [idempotency.Store].
func (s *Store) Release(ctx context.Context, id, token string) error {
	ok, err := releaseScript.Run(ctx, s.client, []string{s.Key(id)}, token).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: %q is not claimed with fence %s", idempotency.ErrLeaseLost, id, token)
	}
	return nil
}

// Forget implements [idempotency.Store]. The id's fence counter goes with it.
func (s *Store) Forget(ctx context.Context, id string) error {
	if err := s.client.Del(ctx, s.Key(id)).Err(); err != nil {
		return fmt.Errorf("redisstore: forget: %w", err)
	}
	return nil
}
