package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
)

// countingStore counts renewals and tells each one on a channel.
type countingStore struct {
	idempotency.Store
	renewals chan struct{}
	n        atomic.Int64
}

func (s *countingStore) Renew(ctx context.Context, id, token string, lease time.Duration) error {
	err := s.Store.Renew(ctx, id, token, lease)
	if err == nil {
		s.n.Add(1)
		select {
		case s.renewals <- struct{}{}:
		default:
		}
	}
	return err
}

// TestGuardRenewsTheLeaseWhileTheHandlerRuns: a handler that outlives several leases keeps
// its claim: after four renewals (more than a lease's length) the id is still in flight,
// and the handler sees its claim's fence.
func TestGuardRenewsTheLeaseWhileTheHandlerRuns(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			cs := &countingStore{Store: k.New(t), renewals: make(chan struct{}, 1)}
			g := newGuard(t, cs, idempotency.WithLease(150*time.Millisecond))
			var fences []uint64
			for range 2 {
				res, err := g.Do(ctx, "slow", func(ctx context.Context) error {
					f, ok := idempotency.FenceFrom(ctx)
					require.True(t, ok, "a guarded ctx carries the fence")
					fences = append(fences, f)
					for cs.n.Load() < 4 {
						<-cs.renewals
					}
					c, err := cs.Claim(ctx, "slow", time.Minute)
					require.NoError(t, err)
					assert.Equal(t, idempotency.StatusInFlight, c.Status, "the lease ran out while the handler ran")
					require.NoError(t, ctx.Err(), "the handler's ctx ended while its lease held")
					return nil
				})
				require.NoError(t, err)
				assert.Equal(t, idempotency.Ran, res)
				require.NoError(t, g.Forget(ctx, "slow"))
				cs.n.Store(0)
			}
			require.Len(t, fences, 2)
			_, ok := idempotency.FenceFrom(ctx)
			assert.False(t, ok)
			if k.Name == "memory" {
				assert.Greater(t, fences[1], fences[0], "the memory store's fences never go back")
			}
		})
	}
}

// brokenRenewals fails every renewal as a store that cannot answer.
type brokenRenewals struct{ idempotency.Store }

func (brokenRenewals) Renew(context.Context, string, string, time.Duration) error {
	return errOutage
}

// TestGuardCancelsTheHandlerWhenRenewalsFail: renewals that keep failing cancel the
// handler's ctx before the lease runs out, with a lease-lost cause that is a store failure;
// the middleware then fails the delivery (a counted retry), it does not defer it.
func TestGuardCancelsTheHandlerWhenRenewalsFail(t *testing.T) {
	ctx := context.Background()
	mem, err := idempotency.NewMemoryStore()
	require.NoError(t, err)
	var renewFailures atomic.Int64
	g := newGuard(t, brokenRenewals{mem}, idempotency.WithLease(90*time.Millisecond),
		idempotency.WithErrorHook(func(_ context.Context, op, _ string, _ error) {
			if op == "renew" {
				renewFailures.Add(1)
			}
		}))
	res, err := g.Do(ctx, "r", func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	assert.Equal(t, idempotency.Ran, res)
	require.ErrorIs(t, err, idempotency.ErrLeaseLost)
	require.ErrorIs(t, err, idempotency.ErrStore)
	require.ErrorIs(t, err, errOutage)
	var lle *idempotency.LeaseLostError
	require.ErrorAs(t, err, &lle)
	assert.False(t, lle.Taken())
	var se *idempotency.StoreError
	require.ErrorAs(t, lle.Err, &se, "the cause is the renewal's store failure")
	assert.Equal(t, "renew", se.Op)
	assert.Equal(t, "r", lle.ID)
	assert.Contains(t, lle.Error(), `lease on "r"`)
	assert.GreaterOrEqual(t, renewFailures.Load(), int64(2))
	_, deferred := g.InFlightDelay(err)
	assert.False(t, deferred, "a store failure is not a deferral")
	// The claim was released: the next delivery runs.
	res, err = newGuard(t, mem).Do(ctx, "r", func(context.Context) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, idempotency.Ran, res)
}

func TestGuardKeyScopesByQueue(t *testing.T) {
	mem, err := idempotency.NewMemoryStore()
	require.NoError(t, err)
	env, err := envelope.Make(testURN, nil, envelope.WithMessageID("m-1"), envelope.WithQueue("orders"))
	require.NoError(t, err)
	g := newGuard(t, mem)
	assert.Equal(t, "billing/m-1", g.Key(env, "persistent://public/default/billing-partition-3"), "the topic's queue, partitions shared")
	assert.Equal(t, "billing/m-1", g.Key(env, "persistent://public/default/billing"))
	assert.Equal(t, "orders/m-1", g.Key(env, ""), "meta.queue where the topic is not known")
	noQueue := *env
	noQueue.Meta.Queue = ""
	assert.Equal(t, "m-1", g.Key(&noQueue, ""))
	assert.Empty(t, g.Key(nil, "orders"))
	noID := *env
	noID.Meta.ID = ""
	assert.Empty(t, g.Key(&noID, "orders"), "an empty id is not guarded")

	assert.Equal(t, "sub-a/m-1", newGuard(t, mem, idempotency.WithScope("sub-a")).Key(env, "persistent://public/default/billing"))
	assert.Equal(t, "m-1", newGuard(t, mem, idempotency.WithScope("")).Key(env, "persistent://public/default/billing"), "an empty scope shares ids across queues")
}
