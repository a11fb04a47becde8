package idempotency_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/redistest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// storeKinds are the stores every contract and integration test runs on.
var storeKinds = redistest.StoreKinds()

func TestStoreContract(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			c, err := s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			require.Equal(t, idempotency.StatusClaimed, c.Status)
			require.NotEmpty(t, c.Token)

			again, err := s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusInFlight, again.Status)
			assert.Greater(t, again.LeaseLeft, 30*time.Second)
			assert.LessOrEqual(t, again.LeaseLeft, time.Minute)

			// A stale token releases nothing, renews nothing and commits nothing.
			require.ErrorIs(t, s.Release(ctx, "a", "not-the-token"), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, "a", "not-the-token", time.Minute), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Commit(ctx, "a", "not-the-token", time.Hour), idempotency.ErrLeaseLost)
			require.NoError(t, s.Renew(ctx, "a", c.Token, time.Minute))
			again, err = s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusInFlight, again.Status)

			require.NoError(t, s.Release(ctx, "a", c.Token))
			c2, err := s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			require.Equal(t, idempotency.StatusClaimed, c2.Status)
			assert.NotEqual(t, c.Token, c2.Token)
			assert.Greater(t, c2.Fence, c.Fence, "fences increase per id")
			// The first holder is fenced off: its late commit and renewal are refused.
			require.ErrorIs(t, s.Commit(ctx, "a", c.Token, time.Hour), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, "a", c.Token, time.Minute), idempotency.ErrLeaseLost)

			require.NoError(t, s.Commit(ctx, "a", c2.Token, time.Hour))
			done, err := s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusDone, done.Status)
			// Releasing a remembered id with the old token is refused and keeps it remembered.
			require.ErrorIs(t, s.Release(ctx, "a", c2.Token), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, "a", c2.Token, time.Minute), idempotency.ErrLeaseLost)
			done, err = s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusDone, done.Status)

			require.NoError(t, s.Forget(ctx, "a"))
			c3, err := s.Claim(ctx, "a", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusClaimed, c3.Status)

			// Other ids are independent; ids are verbatim (case and spaces matter).
			for _, id := range []string{"A", " a", "b"} {
				c, err := s.Claim(ctx, id, time.Minute)
				require.NoError(t, err)
				assert.Equal(t, idempotency.StatusClaimed, c.Status, id)
			}

			// An id the store does not know at all (a restarted server) commits: nobody
			// claimed it since.
			require.NoError(t, s.Commit(ctx, "unknown", "7", time.Hour))
			done, err = s.Claim(ctx, "unknown", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusDone, done.Status)

			_, err = s.Claim(ctx, "z", 0)
			require.ErrorIs(t, err, idempotency.ErrInvalidOption)
			require.ErrorIs(t, s.Renew(ctx, "z", "1", 0), idempotency.ErrInvalidOption)
			require.ErrorIs(t, s.Commit(ctx, "z", "", 0), idempotency.ErrInvalidOption)
		})
	}
}

func TestStoreLeaseAndTTLExpire(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			c, err := s.Claim(ctx, "lease", 50*time.Millisecond)
			require.NoError(t, err)
			require.Equal(t, idempotency.StatusClaimed, c.Status)
			require.NoError(t, s.Commit(ctx, "ttl", "", 50*time.Millisecond))
			testwait.Eventually(t, 5*time.Second, func() bool {
				c, err := s.Claim(ctx, "lease", time.Minute)
				return err == nil && c.Status == idempotency.StatusClaimed
			}, "the lease never expired")
			testwait.Eventually(t, 5*time.Second, func() bool {
				c, err := s.Claim(ctx, "ttl", time.Minute)
				return err == nil && c.Status == idempotency.StatusClaimed
			}, "the remembered id never expired")
		})
	}
}

// TestStoreFencesIncreaseAcrossExpiredLeases: a lease that ends (nobody renewed it) frees
// the id, and the next claim's fence is still larger; the expired holder keeps its token
// current only until then.
func TestStoreFencesIncreaseAcrossExpiredLeases(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			first, next := reclaimedAfterExpiry(ctx, t, s, "f")
			assert.Greater(t, next.Fence, first.Fence)
			require.ErrorIs(t, s.Commit(ctx, "f", first.Token, time.Hour), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Release(ctx, "f", first.Token), idempotency.ErrLeaseLost)
			require.NoError(t, s.Release(ctx, "f", next.Token))
			third, err := s.Claim(ctx, "f", time.Minute)
			require.NoError(t, err)
			assert.Greater(t, third.Fence, next.Fence, "a release keeps the fence counter")
			require.NoError(t, s.Commit(ctx, "f", third.Token, time.Hour))
		})
	}
}

// TestStoreExpiredTokenStaysCurrentUntilOvertaken: a holder whose lease ended while nobody
// claimed the id still holds a current token: it may renew (the id is in flight again) and
// commit.
func TestStoreExpiredTokenStaysCurrentUntilOvertaken(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			slow, err := s.Claim(ctx, "slow", 30*time.Millisecond)
			require.NoError(t, err)
			// A probe claimed after it, with the same lease, is free again only once the
			// slow holder's lease has ended too.
			_, err = s.Claim(ctx, "probe", 30*time.Millisecond)
			require.NoError(t, err)
			testwait.Eventually(t, 5*time.Second, func() bool {
				c, err := s.Claim(ctx, "probe", time.Minute)
				return err == nil && c.Status == idempotency.StatusClaimed
			}, "the probe's lease never expired")
			require.NoError(t, s.Renew(ctx, "slow", slow.Token, time.Minute), "an expired token nobody overtook was refused")
			c, err := s.Claim(ctx, "slow", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusInFlight, c.Status, "the renewal did not hold the id again")
			require.NoError(t, s.Commit(ctx, "slow", slow.Token, time.Hour))
			c, err = s.Claim(ctx, "slow", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StatusDone, c.Status)
		})
	}
}

// TestStoreRefusesAStaleCommitAfterTheNextHolderSettled: a holder whose lease ended and whose
// id was claimed again is not current, also once that later claim has settled: its late
// commit is refused, whether the later holder committed (the id stays remembered as the
// later holder left it) or released the id (it stays free, so the failed run is retried).
func TestStoreRefusesAStaleCommitAfterTheNextHolderSettled(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		for _, settle := range []string{"commit", "release"} {
			t.Run(k.Name+"/"+settle, func(t *testing.T) {
				s := k.New(t)
				first, next := reclaimedAfterExpiry(ctx, t, s, "s")
				if settle == "commit" {
					require.NoError(t, s.Commit(ctx, "s", next.Token, time.Hour))
				} else {
					require.NoError(t, s.Release(ctx, "s", next.Token))
				}
				require.ErrorIs(t, s.Commit(ctx, "s", first.Token, time.Hour), idempotency.ErrLeaseLost,
					"the stale holder committed after the next holder's %s", settle)
				c, err := s.Claim(ctx, "s", time.Minute)
				require.NoError(t, err)
				if settle == "commit" {
					assert.Equal(t, idempotency.StatusDone, c.Status)
				} else {
					assert.Equal(t, idempotency.StatusClaimed, c.Status, "the released id was remembered by the stale commit")
				}
			})
		}
	}
}

func TestStoreClaimIsAtomic(t *testing.T) {
	ctx := context.Background()
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			for round := range 20 {
				id := fmt.Sprintf("race-%d", round)
				var claimed atomic.Int32
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						c, err := s.Claim(ctx, id, time.Minute)
						if err == nil && c.Status == idempotency.StatusClaimed {
							claimed.Add(1)
						}
					})
				}
				wg.Wait()
				require.Equal(t, int32(1), claimed.Load(), "round %d", round)
			}
		})
	}
}

func TestMemoryStoreFullIsAnError(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	s, err := idempotency.NewMemoryStore(idempotency.WithMaxEntries(2), idempotency.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	require.NoError(t, s.Commit(ctx, "a", "", time.Hour))
	c, err := s.Claim(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.StatusClaimed, c.Status)

	_, err = s.Claim(ctx, "c", time.Minute)
	require.ErrorIs(t, err, idempotency.ErrStoreFull)
	// Nothing was forgotten to make room.
	got, err := s.Claim(ctx, "a", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.StatusDone, got.Status)

	// Once b's lease ends, its room is reused.
	now = now.Add(2 * time.Minute)
	c, err = s.Claim(ctx, "c", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.StatusClaimed, c.Status)
	assert.Equal(t, 2, s.Len())

	// a stays remembered until its TTL, then its room is reused too.
	_, err = s.Claim(ctx, "d", time.Minute)
	require.ErrorIs(t, err, idempotency.ErrStoreFull)
	now = now.Add(time.Hour)
	c, err = s.Claim(ctx, "d", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.StatusClaimed, c.Status)

	// A released id keeps its token, not its room: a new id takes it at once.
	one, err := idempotency.NewMemoryStore(idempotency.WithMaxEntries(1), idempotency.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	c, err = one.Claim(ctx, "r", time.Minute)
	require.NoError(t, err)
	require.NoError(t, one.Release(ctx, "r", c.Token))
	c, err = one.Claim(ctx, "q", time.Minute)
	require.NoError(t, err, "a released id held the room")
	assert.Equal(t, idempotency.StatusClaimed, c.Status)
	assert.Equal(t, 1, one.Len())
}

// TestMemoryStoreDefaultBound: without WithMaxEntries the store holds DefaultMaxEntries
// (100,000) live entries, and refuses the next new id.
func TestMemoryStoreDefaultBound(t *testing.T) {
	ctx := context.Background()
	require.Equal(t, 100_000, idempotency.DefaultMaxEntries)
	s, err := idempotency.NewMemoryStore()
	require.NoError(t, err)
	for i := range idempotency.DefaultMaxEntries {
		c, err := s.Claim(ctx, strconv.Itoa(i), time.Hour)
		require.NoError(t, err)
		require.Equal(t, idempotency.StatusClaimed, c.Status)
	}
	_, err = s.Claim(ctx, "one more", time.Hour)
	require.ErrorIs(t, err, idempotency.ErrStoreFull)
}

func TestStoreOptionsAreValidated(t *testing.T) {
	_, err := idempotency.NewMemoryStore(idempotency.WithMaxEntries(0))
	require.ErrorIs(t, err, idempotency.ErrInvalidOption)
	_, err = idempotency.NewMemoryStore(idempotency.WithMaxEntries(1))
	require.NoError(t, err, "one entry is a bound")
	_, err = idempotency.NewMemoryStore(idempotency.WithClock(nil))
	require.ErrorIs(t, err, idempotency.ErrInvalidOption)
}

// reclaimedAfterExpiry claims id with a 30 ms lease, waits until the lease has expired, and
// claims id again: the first claim and the one that overtook it.
func reclaimedAfterExpiry(ctx context.Context, t *testing.T, s idempotency.Store, id string) (first, next idempotency.Claim) {
	t.Helper()
	first, err := s.Claim(ctx, id, 30*time.Millisecond)
	require.NoError(t, err)
	testwait.Eventually(t, 5*time.Second, func() bool {
		next, err = s.Claim(ctx, id, time.Minute)
		return err == nil && next.Status == idempotency.StatusClaimed
	}, "the lease never expired")
	return first, next
}
