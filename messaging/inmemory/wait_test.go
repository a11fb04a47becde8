package inmemory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// WaitSettled wakes every waiter at its own target. The waiters share one channel, made for
// the lowest target: a waiter with a lower target than the channel's closes it (waking the
// others, who wait again) and makes its own. The test reads that target, under the handle's
// lock, to know that a waiter is waiting: the waiting itself is not observable.
func TestWaitSettledWakesEachWaiterAtItsTarget(t *testing.T) {
	const within = 10 * time.Second
	s := New().Source("in")
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	target := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.settledCh == nil {
			return 0
		}
		return s.settledAt
	}
	wait := func(n int) <-chan error {
		done := make(chan error, 1)
		go func() { done <- s.WaitSettled(ctx, n) }()
		return done
	}
	ack := func() {
		t.Helper()
		require.NoError(t, s.wrap(pendingMsg{payload: []byte("m")}).Ack(ctx))
	}

	high := wait(3)
	testwait.Eventually(t, within, func() bool { return target() == 3 }, "the first waiter waits for 3")
	low := wait(1)
	testwait.Eventually(t, within, func() bool { return target() == 1 }, "the second waiter waits for 1")
	ack()
	require.NoError(t, <-low, "woken at its target")
	ack()
	ack()
	require.NoError(t, <-high, "woken at its target, after the other's")

	done, cancelDone := context.WithCancel(t.Context())
	cancelDone()
	require.NoError(t, s.WaitSettled(done, 3), "a target reached returns at once")
	err := s.WaitSettled(done, 4)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "3 of 4 settlements")
}
